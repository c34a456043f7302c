"""The published OpenAPI definitions of the built-in kinds, shipped with the package.

``kubernetes.json`` beside this module is extracted by ``scripts/extract_openapi.py`` from
Kubernetes' own ``api/openapi-spec/swagger.json`` (Apache-2.0, the Kubernetes Authors; the
file records the release, the source and its SHA-256): the schemas of the kinds setpoint
serves, with their descriptions and patch-strategy extensions, and everything they refer to.
Serving the same definitions is what lets ``kubectl explain`` print Kubernetes' documentation
and ``kubectl apply`` compute strategic merge patches from the server's OpenAPI.

A definition is found by its ``x-kubernetes-group-version-kind``, so a kind served by the
registry gets its published schema as soon as the data file has it (adding one is a line in
the script). Definitions are in OpenAPI v2 form; :mod:`~setpoint.server.openapi.schemas`
derives the v3 form.

Invariants: every ``$ref`` in the data resolves inside it (checked on load); the data is read
once per :class:`Definitions` and never mutated (callers get the shared values and must copy
before changing them).
"""

from __future__ import annotations

import hashlib
import importlib.resources
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from setpoint.server.openapi import schemas

Obj = dict[str, Any]
GVK = tuple[str, str, str]

DATA_FILE = "kubernetes.json"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = META + "ObjectMeta"
LIST_META = META + "ListMeta"
STATUS = META + "Status"
DELETE_OPTIONS = META + "DeleteOptions"
PATCH = META + "Patch"
SCALE = "io.k8s.api.autoscaling.v1.Scale"


class DataError(ValueError):
    """The shipped definitions are not usable (a packaging or extraction defect)."""


@dataclass(frozen=True, slots=True)
class Definitions:
    """Kubernetes' published definitions, indexed by name and by group-version-kind."""

    kubernetes_version: str
    definitions: Mapping[str, Obj]
    by_gvk: Mapping[GVK, str] = field(default_factory=dict)
    #: per ``x-kubernetes-action``, the keys in :attr:`parameters` of its query parameters
    query_parameters: Mapping[str, list[str]] = field(default_factory=dict)
    #: the shared parameters (``#/parameters/KEY`` in v2), each key the parameter's name and
    #: a digest of its text (Kubernetes names them the same way)
    parameters: Mapping[str, Obj] = field(default_factory=dict)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Definitions:
        defs = document.get("definitions")
        if not isinstance(defs, dict):
            raise DataError("the OpenAPI data has no definitions")
        by_gvk: dict[GVK, str] = {}
        for name, schema in defs.items():
            for target in schemas.references(schema):
                if target not in defs:
                    raise DataError(f"{name} refers to {target}, which is not defined")
            for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
                # a definition naming one kind is that kind's; shared ones (DeleteOptions,
                # WatchEvent) list many groups and never shadow a kind's own definition
                by_gvk.setdefault(key, name)
        params = document.get("queryParameters") or {}
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise DataError("the OpenAPI data's queryParameters must map actions to lists")
        shared: dict[str, Obj] = {}
        keys: dict[str, list[str]] = {}
        for action, found in params.items():
            for param in found:
                digest = hashlib.sha256(orjson.dumps(param, option=orjson.OPT_SORT_KEYS))
                param_key = f"{param.get('name')}-{digest.hexdigest()[:8]}"
                shared[param_key] = param
                keys.setdefault(action, []).append(param_key)
        return cls(kubernetes_version=str(document.get("kubernetesVersion", "")),
                   definitions=defs, by_gvk=by_gvk, query_parameters=keys,
                   parameters=dict(sorted(shared.items())))

    @classmethod
    def load(cls) -> Definitions:
        """The definitions shipped in the package."""
        raw = importlib.resources.files(__package__).joinpath(DATA_FILE).read_bytes()
        return cls.from_document(orjson.loads(raw))

    def name_of(self, group: str, version: str, kind: str) -> str | None:
        return self.by_gvk.get((group, version, kind))

    def closure(self, roots: Iterable[str]) -> list[str]:
        """``roots`` that are defined here and every definition they refer to, sorted."""
        found: set[str] = set()
        pending = [r for r in roots if r in self.definitions]
        while pending:
            name = pending.pop()
            if name in found:
                continue
            found.add(name)
            pending.extend(schemas.references(self.definitions[name]))
        return sorted(found)
