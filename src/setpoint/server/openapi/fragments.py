"""What one served resource version contributes to the OpenAPI documents.

A :class:`Fragment` holds the resource version's own definitions (in v2 and v3 form), its path
items (v2 form) and the names of the published definitions it refers to. Built-in kinds
refer to Kubernetes' published definitions (found by group-version-kind, see
:mod:`~setpoint.server.openapi.builtins`) and have no definitions of their own, unless the data
lacks them (then a schema that accepts any object stands in). A custom resource's definitions
are built from its CRD the way apiextensions-apiserver builds them:

* v3: the structural schema, unfolded (``x-kubernetes-int-or-string`` as ``anyOf``), with
  ``apiVersion``, ``kind`` and ``metadata`` (a reference to ``ObjectMeta``) set at the root and in
  every ``x-kubernetes-embedded-resource``;
* v2: the same after :func:`~setpoint.server.openapi.schemas.structural_v2`, without defaults;
  a root that preserves unknown fields (or a CRD with ``preserveUnknownFields``) is only
  ``{"type": "object"}``, since kubectl would otherwise reject every field it does not know;
* the list kind: ``items`` referring to the kind, ``metadata`` to ``ListMeta``;
* both tagged with ``x-kubernetes-group-version-kind`` (an array) and, when the CRD has
  selectable fields, ``x-kubernetes-selectable-fields``.

Fragments are immutable and computed once per served resource (the catalog replaces a
resource's store when its CRD changes), so a CRD change costs one CRD's worth of work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from setpoint.registry.catalog import Served
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.schema import check_structural
from setpoint.server.openapi import builtins, paths, schemas

Obj = dict[str, Any]

API_VERSION: Obj = {
    "description": "APIVersion defines the versioned schema of this representation of an "
                   "object. Servers should convert recognized schemas to the latest internal "
                   "value, and may reject unrecognized values. More info: "
                   "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                   "api-conventions.md#resources",
    "type": "string",
}
KIND: Obj = {
    "description": "Kind is a string value representing the REST resource this object "
                   "represents. Servers may infer this from the endpoint the client submits "
                   "requests to. Cannot be updated. In CamelCase. More info: "
                   "https://git.k8s.io/community/contributors/devel/sig-architecture/"
                   "api-conventions.md#types-kinds",
    "type": "string",
}
METADATA_DOC = ("Standard object's metadata. More info: https://git.k8s.io/community/"
                "contributors/devel/sig-architecture/api-conventions.md#metadata")
LIST_METADATA_DOC = ("Standard list metadata. More info: https://git.k8s.io/community/"
                     "contributors/devel/sig-architecture/api-conventions.md#metadata")
EMBEDDED_API_VERSION_DOC = (
    "apiVersion defines the versioned schema of this representation of an object. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
    "#resources")
EMBEDDED_KIND_DOC = (
    "kind is a string value representing the type of this object. In CamelCase. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
    "#types-kinds")


@dataclass(frozen=True, slots=True)
class Fragment:
    """One resource version's part of the documents; see the module docstring."""

    group: str
    version: str
    v2_definitions: Mapping[str, Obj]
    v3_definitions: Mapping[str, Obj]
    v2_paths: Mapping[str, Obj]  # v3 form: ``paths.to_v3`` (made when a document needs it)
    #: published definitions referred to (their own references are followed when assembling)
    shared: tuple[str, ...]
    #: changes whenever anything above changes
    fingerprint: str


def definition_name(group: str, version: str, kind: str) -> str:
    """Kubernetes' name for a custom kind's definition: the group reversed, then version.kind."""
    prefix = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
    return f"{prefix}.{version}.{kind}"


def gvk_extension(info: ResourceInfo, version: str, kind: str) -> list[Obj]:
    return [{"group": info.group, "kind": kind, "version": version}]


def _refs_anywhere(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        target = value.get("$ref")
        if isinstance(target, str) and target.startswith(schemas.V2_PREFIX):
            yield target[len(schemas.V2_PREFIX):]
        for v in value.values():
            yield from _refs_anywhere(v)
    elif isinstance(value, list):
        for v in value:
            yield from _refs_anywhere(v)


def _make(info: ResourceInfo, version: VersionInfo, v2_defs: Obj, v3_defs: Obj,
          target: paths.Target, data: builtins.Definitions, shared: list[str]) -> Fragment:
    """``shared`` names every published definition ``v2_defs`` refer to; the paths' are added."""
    v2_paths = paths.path_items(target, data)
    refs = {*shared, *_refs_anywhere(v2_paths)} - set(v2_defs)
    digest = hashlib.sha256(orjson.dumps([v2_defs, v3_defs, v2_paths, sorted(refs)],
                                         option=orjson.OPT_SORT_KEYS)).hexdigest()
    return Fragment(group=info.group, version=version.name, v2_definitions=v2_defs,
                    v3_definitions=v3_defs, v2_paths=v2_paths, shared=tuple(sorted(refs)),
                    fingerprint=digest)


def _any_object(info: ResourceInfo, version: str, kind: str, description: str) -> Obj:
    return {"description": description, "type": "object",
            "x-kubernetes-group-version-kind": gvk_extension(info, version, kind)}


def _generic_v3(v2: Obj) -> Obj:
    return {**v2, "properties": {"apiVersion": API_VERSION, "kind": KIND,
                                 "metadata": {**schemas.ref(builtins.OBJECT_META),
                                              "description": METADATA_DOC}},
            "x-kubernetes-preserve-unknown-fields": True}


def builtin(served: Served, data: builtins.Definitions) -> list[Fragment]:
    """The fragments of a built-in resource, one per served version."""
    info = served.info
    # the kinds the registry applies strategic merge patches to (see the PATCH handler)
    strategic = info.kind != "CustomResourceDefinition"
    out = []
    for version in info.served_versions:
        kind_def = data.name_of(info.group, version.name, info.kind)
        list_def = data.name_of(info.group, version.name, info.list_kind)
        v2_defs: Obj = {}
        v3_defs: Obj = {}
        if kind_def is None or list_def is None:
            kind_def = definition_name(info.group, version.name, info.kind)
            list_def = definition_name(info.group, version.name, info.list_kind)
            kind_v2 = _any_object(info, version.name, info.kind,
                                  f"{info.kind} of {info.api_version(version.name)}.")
            list_v2 = _list(info, version.name, kind_def)
            v2_defs = {kind_def: kind_v2, list_def: list_v2}
            v3_defs = {kind_def: schemas.to_v3(_generic_v3(kind_v2)),
                       list_def: schemas.to_v3(list_v2)}
        target = paths.Target(info, version, kind_def, list_def, strategic=strategic)
        out.append(_make(info, version, v2_defs, v3_defs, target, data, [kind_def, list_def]))
    return out


def _list(info: ResourceInfo, version: str, kind_def: str) -> Obj:
    return {
        "description": f"{info.list_kind} is a list of {info.kind}",
        "properties": {
            "apiVersion": API_VERSION,
            "items": {"description": f"List of {info.resource}. More info: "
                                     "https://git.k8s.io/community/contributors/devel/"
                                     "sig-architecture/api-conventions.md",
                      "items": schemas.ref(kind_def), "type": "array"},
            "kind": KIND,
            "metadata": {**schemas.ref(builtins.LIST_META), "description": LIST_METADATA_DOC},
        },
        "required": ["items"],
        "type": "object",
        "x-kubernetes-group-version-kind": gvk_extension(info, version, info.list_kind),
    }


def _with_embedded(schema: Any, *, v2: bool) -> Any:
    """Add ``apiVersion``, ``kind`` and ``metadata`` to every embedded resource (a copy)."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: _with_embedded(v, v2=v2) for k, v in props.items()}
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _with_embedded(out[key], v2=v2)
    if v2 and out.get("x-kubernetes-preserve-unknown-fields") is True:
        return out  # kubectl would refuse the unknown fields next to these properties
    if out.get("x-kubernetes-embedded-resource") is True:
        out["properties"] = {
            **(out.get("properties") or {}),
            "apiVersion": {**API_VERSION, "description": EMBEDDED_API_VERSION_DOC},
            "kind": {**KIND, "description": EMBEDDED_KIND_DOC},
            "metadata": {**schemas.ref(builtins.OBJECT_META), "description": METADATA_DOC},
        }
        required = list(out.get("required") or [])
        out["required"] = required + [k for k in ("kind", "apiVersion") if k not in required]
    return out


def _custom_kind(info: ResourceInfo, version: VersionInfo, *, v2: bool,
                 preserve_unknown_fields: bool) -> Obj:
    schema = version.schema if isinstance(version.schema, dict) else None
    if schema is not None and preserve_unknown_fields and check_structural(schema):
        schema = None  # non-structural (allowed with preserveUnknownFields): not published
    if schema is None or (v2 and (preserve_unknown_fields or
                                  schema.get("x-kubernetes-preserve-unknown-fields") is True)):
        out: Obj = {"type": "object"}
    else:
        if v2:
            out = schemas.without_defaults(schemas.structural_v2(schema))
        else:
            out = schemas.unfold(schema)
        out = _with_embedded(out, v2=v2)
        out["properties"] = {**(out.get("properties") or {}),
                             "apiVersion": API_VERSION, "kind": KIND,
                             "metadata": {**schemas.ref(builtins.OBJECT_META),
                                          "description": METADATA_DOC}}
    out["x-kubernetes-group-version-kind"] = gvk_extension(info, version.name, info.kind)
    return out


def _selectable(version: VersionInfo) -> list[Obj]:
    return [{"fieldPath": path.removeprefix(".")} for path in version.selectable_fields if path]


def custom(served: Served, data: builtins.Definitions) -> list[Fragment]:
    """The fragments of a custom resource, one per served version."""
    info = served.info
    preserve = bool(getattr(served.store.strategy, "preserve_unknown_fields", False))
    out = []
    for version in info.served_versions:
        kind_def = definition_name(info.group, version.name, info.kind)
        list_def = definition_name(info.group, version.name, info.list_kind)
        kind_v2 = _custom_kind(info, version, v2=True, preserve_unknown_fields=preserve)
        kind_v3 = _custom_kind(info, version, v2=False, preserve_unknown_fields=preserve)
        list_v2 = _list(info, version.name, kind_def)
        selectable = _selectable(version)
        if selectable:
            for schema in (kind_v2, kind_v3, list_v2):
                schema["x-kubernetes-selectable-fields"] = selectable
        v2_defs = {kind_def: kind_v2, list_def: list_v2}
        v3_defs = {kind_def: schemas.to_v3(kind_v3), list_def: schemas.to_v3(list_v2)}
        target = paths.Target(info, version, kind_def, list_def, strategic=False)
        out.append(_make(info, version, v2_defs, v3_defs, target, data,
                         [builtins.OBJECT_META, builtins.LIST_META]))
    return out


def of(served: Served, data: builtins.Definitions) -> list[Fragment]:
    return custom(served, data) if served.custom else builtin(served, data)
