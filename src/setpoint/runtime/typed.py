"""Typed resources: a custom resource declared as a pydantic model, its CRD generated from it.

Declare the spec and status as pydantic models (:class:`Model` gives camelCase names on the
wire and snake_case in Python), and the resource as a :class:`Resource` subclass decorated
with :func:`custom_resource`::

    class QueueSpec(Model):
        name: str = Field(min_length=1, max_length=80, description="The queue's name")
        visibility_timeout: int = Field(30, ge=0, le=43_200)      # visibilityTimeout
        tier: Literal["standard", "premium"] = "standard"

    class QueueStatus(Model):
        url: str | None = None

    @custom_resource(group="sqs.example.com", version="v1", kind="Queue",
                     columns=[PrinterColumn("URL", ".status.url")])
    class Queue(Resource):
        spec: QueueSpec
        status: QueueStatus | None = None

:func:`crd_for` writes the CustomResourceDefinition (``setpoint crd generate MODULE:Queue``
prints it): a structural schema with the models' descriptions, defaults, enums (``Literal``),
bounds, formats, ``x-kubernetes-validations`` (CEL rules, see :func:`cel`) and list types,
printer columns, the status subresource when the resource has a ``status`` field, and one
version per model given (all of one group and kind). A reconcile reads typed objects with
``ctx.get_as(Queue, request)``; a typed object still answers dict access (``queue["spec"]``
reads the object as the server sent it), and :meth:`Resource.to_object` gives the dict to
write.

Conversion to a structural schema (OpenAPI v3 as Kubernetes accepts it): ``$ref`` s are
inlined, titles dropped, ``X | None`` becomes ``X`` with ``nullable: true``, ``int | str``
becomes ``x-kubernetes-int-or-string``, ``Any`` and ``dict[str, Any]`` preserve unknown
fields, numeric exclusive bounds take the boolean form, a ``set`` becomes a list of
``x-kubernetes-list-type: set``. Anything else a structural schema cannot say (other unions,
recursive models, tuples) is refused with :class:`SchemaError` naming the field.

Invariants: generation is deterministic (same models, same CRD); an object built from the
model and dumped by :meth:`Resource.to_object` passes the generated schema, and the server's
defaults are the model's defaults (tested against the server). Nothing here talks to a
server.

Non-guarantees: pydantic validators written in Python (``field_validator``) have no CEL
counterpart and are not in the CRD: the server does not enforce them (express the rule with
:func:`cel` as well); pydantic's regular expressions are checked by the server's RE2, which
refuses lookarounds and backreferences.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr
from pydantic.alias_generators import to_camel

__all__ = ["Definition", "Model", "PrinterColumn", "Resource", "SchemaError", "cel",
           "cel_rules", "crd_for", "crds_for", "custom_resource", "schema_of"]

Obj = dict[str, Any]
R = TypeVar("R", bound="Resource")

#: the keys of a schema node a CRD keeps (OpenAPI v3 as apiextensions.k8s.io/v1 has it)
_KEPT = frozenset({
    "type", "format", "description", "default", "enum", "nullable", "maximum", "minimum",
    "exclusiveMaximum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems", "maxProperties", "minProperties", "multipleOf", "required", "properties",
    "additionalProperties", "items", "example",
})


class SchemaError(ValueError):
    """A model has something a structural schema cannot express."""


class Model(BaseModel):
    """A base for specs and statuses: camelCase on the wire, either name in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """An ``additionalPrinterColumns`` entry: what ``kubectl get`` shows."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def as_dict(self) -> Obj:
        out: Obj = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            out["description"] = self.description
        if self.priority:
            out["priority"] = self.priority
        if self.format:
            out["format"] = self.format
        return out


@dataclass(frozen=True, slots=True)
class Definition:
    """What :func:`custom_resource` records about a resource model."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Literal["Namespaced", "Cluster"]
    short_names: tuple[str, ...]
    categories: tuple[str, ...]
    columns: tuple[PrinterColumn, ...]
    storage: bool | None
    served: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"


class Resource(BaseModel):
    """A typed custom resource; subclass it with ``spec`` (and ``status``) fields and
    decorate the subclass with :func:`custom_resource`."""

    model_config = ConfigDict(populate_by_name=True)
    __setpoint_definition__: ClassVar[Definition]

    api_version: str = ""
    kind: str = ""
    metadata: dict[str, Any] = {}
    _raw: Obj | None = PrivateAttr(default=None)

    @classmethod
    def definition(cls) -> Definition:
        found = cls.__dict__.get("__setpoint_definition__")
        if not isinstance(found, Definition):
            raise TypeError(f"{cls.__qualname__} is not decorated with @custom_resource")
        return found

    @classmethod
    def api_version_kind(cls) -> tuple[str, str]:
        """``(apiVersion, kind)``: how the runtime and the client name this resource."""
        definition = cls.definition()
        return definition.api_version, definition.kind

    @classmethod
    def from_object(cls: type[R], obj: Mapping[str, Any]) -> R:
        """The typed form of an object read from the API (``obj`` is kept for dict access)."""
        typed = cls.model_validate({**obj, "api_version": obj.get("apiVersion", ""),
                                    "kind": obj.get("kind", "")})
        typed._raw = dict(obj)
        return typed

    def to_object(self) -> Obj:
        """The object to send to the API: camelCase names, ``None`` left out."""
        definition = self.definition()
        body = self.model_dump(mode="json", by_alias=True, exclude_none=True,
                               exclude={"api_version", "kind", "metadata"})
        return {"apiVersion": definition.api_version, "kind": definition.kind,
                "metadata": copy.deepcopy(self.metadata), **body}

    # --- dict access, as for the plain objects the rest of the runtime hands out ---------

    def _as_dict(self) -> Obj:
        return self._raw if self._raw is not None else self.to_object()

    def __getitem__(self, key: str) -> Any:
        return self._as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._as_dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self._as_dict().get(key, default)

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", ""))


def custom_resource(*, group: str, version: str, kind: str, plural: str | None = None,
                    singular: str | None = None,
                    scope: Literal["Namespaced", "Cluster"] = "Namespaced",
                    short_names: Sequence[str] = (), categories: Sequence[str] = (),
                    columns: Sequence[PrinterColumn] = (), storage: bool | None = None,
                    served: bool = True) -> Callable[[type[R]], type[R]]:
    """Declare a :class:`Resource` subclass as the ``version`` of ``kind`` in ``group``.

    ``plural`` defaults to the lowercase kind with an ``s``; ``storage`` marks the stored
    version when :func:`crd_for` is given several.
    """
    if not group or "." not in group:
        raise ValueError("a custom resource's group must be a domain name (a.b)")
    if not kind or not kind[0].isupper():
        raise ValueError("a kind is CamelCase, starting with a capital letter")

    def declare(cls: type[R]) -> type[R]:
        if not (isinstance(cls, type) and issubclass(cls, Resource)):
            raise TypeError("@custom_resource decorates a subclass of Resource")
        cls.__setpoint_definition__ = Definition(
            group=group, version=version, kind=kind,
            plural=plural or f"{kind.lower()}s", singular=singular or kind.lower(),
            scope=scope, short_names=tuple(short_names), categories=tuple(categories),
            columns=tuple(columns), storage=storage, served=served)
        return cls

    return declare


def cel(rule: str, message: str | None = None, *, field_path: str | None = None,
        reason: str | None = None, message_expression: str | None = None) -> Obj:
    """A CEL validation rule, for ``json_schema_extra``: on a model,
    ``model_config = ConfigDict(json_schema_extra=cel("self.min <= self.max"))``; on a field,
    ``Field(json_schema_extra=cel("self >= 0"))``. Combine several with :func:`cel_rules`."""
    entry: Obj = {"rule": rule}
    if message is not None:
        entry["message"] = message
    if message_expression is not None:
        entry["messageExpression"] = message_expression
    if field_path is not None:
        entry["fieldPath"] = field_path
    if reason is not None:
        entry["reason"] = reason
    return {"x-kubernetes-validations": [entry]}


def cel_rules(*rules: Obj) -> Obj:
    """Several :func:`cel` rules in one ``json_schema_extra``."""
    return {"x-kubernetes-validations": [v for r in rules
                                         for v in r["x-kubernetes-validations"]]}


# --- the schema --------------------------------------------------------------------------


def _structural(node: Any, defs: Mapping[str, Any], where: str,
                seen: tuple[str, ...] = ()) -> Obj:
    if not isinstance(node, Mapping):
        raise SchemaError(f"{where}: not a schema: {node!r}")
    if "$ref" in node:
        name = str(node["$ref"]).rpartition("/")[2]
        if name in seen:
            raise SchemaError(f"{where}: {name} refers to itself; a structural schema "
                              "cannot be recursive")
        target = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
        return _structural(target, defs, where, (*seen, name))
    for junctor in ("anyOf", "oneOf"):
        if junctor in node:
            return _union(node, junctor, defs, where, seen)
    if "allOf" in node and len(node["allOf"]) == 1:
        merged = {**node["allOf"][0], **{k: v for k, v in node.items() if k != "allOf"}}
        return _structural(merged, defs, where, seen)
    out: Obj = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-"):
            out[key] = copy.deepcopy(value)
        elif key == "properties":
            out["properties"] = {name: _structural(sub, defs, f"{where}.{name}", seen)
                                 for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, list) or "prefixItems" in node:
                raise SchemaError(f"{where}: tuples have no structural schema; use a list")
            out["items"] = _structural(value, defs, f"{where}[*]", seen)
        elif key == "additionalProperties":
            if value is True or value == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, Mapping) and "properties" not in node:
                out["additionalProperties"] = _structural(value, defs, f"{where}[*]", seen)
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMaximum", "exclusiveMinimum") and not isinstance(value, bool):
            out["maximum" if key == "exclusiveMaximum" else "minimum"] = value
            out[key] = True
        elif key == "uniqueItems":
            if value:
                out["x-kubernetes-list-type"] = "set"
        elif key == "default":
            if value is not None:
                out["default"] = copy.deepcopy(value)
        elif key == "prefixItems":
            raise SchemaError(f"{where}: tuples have no structural schema; use a list")
        elif key in _KEPT:
            out[key] = copy.deepcopy(value)
    if "type" not in out and not (out.get("x-kubernetes-int-or-string")
                                  or out.get("x-kubernetes-preserve-unknown-fields")):
        out["x-kubernetes-preserve-unknown-fields"] = True  # Any: keep what is sent
    if out.get("type") == "object" and "properties" not in out \
            and "additionalProperties" not in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _union(node: Mapping[str, Any], junctor: str, defs: Mapping[str, Any], where: str,
           seen: tuple[str, ...]) -> Obj:
    options = list(node[junctor])
    nullable = any(o == {"type": "null"} for o in options)
    rest = [o for o in options if o != {"type": "null"}]
    outer = {k: v for k, v in node.items() if k != junctor}
    if len(rest) == 1:
        out = _structural({**rest[0], **outer}, defs, where, seen)
    elif sorted(o.get("type", "") for o in rest) == ["integer", "string"] \
            and all(set(o) <= {"type"} for o in rest):
        out = _structural({k: v for k, v in outer.items()}, defs, where, seen)
        out.pop("x-kubernetes-preserve-unknown-fields", None)
        out["x-kubernetes-int-or-string"] = True
    else:
        kinds = ", ".join(str(o.get("type") or o.get("$ref", "?")) for o in rest)
        raise SchemaError(f"{where}: a union of {kinds} has no structural schema (only "
                          "X | None and int | str have one)")
    if nullable:
        out["nullable"] = True
    return out


def schema_of(model: type[Resource]) -> Obj:
    """The ``openAPIV3Schema`` of a resource model: ``spec`` and ``status`` (and any other
    top-level field), without ``apiVersion``, ``kind`` and ``metadata``."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    properties = {name: sub for name, sub in raw.get("properties", {}).items()
                  if name not in ("api_version", "kind", "metadata")}
    required = [name for name in raw.get("required", []) if name in properties]
    top: Obj = {"type": "object", "properties": properties}
    if required:
        top["required"] = required
    for key in ("description", "x-kubernetes-validations"):
        if key in raw:
            top[key] = raw[key]
    return _structural(top, defs, model.__qualname__)


def crd_for(*models: type[Resource]) -> Obj:
    """The CustomResourceDefinition of one kind from its version models (one or more, all of
    one group and kind). The stored version is the one declared ``storage=True``, else the
    last one given that does not say ``storage=False``."""
    if not models:
        raise ValueError("name at least one resource model")
    definitions = [m.definition() for m in models]
    first = definitions[0]
    for d in definitions[1:]:
        if (d.group, d.kind, d.plural, d.scope) != (first.group, first.kind, first.plural,
                                                    first.scope):
            raise ValueError("every version must be of one group, kind, plural and scope")
    if len({d.version for d in definitions}) != len(definitions):
        raise ValueError("each version may be given once")
    marked = [d for d in definitions if d.storage]
    if len(marked) > 1:
        raise ValueError("only one version can be the storage version")
    unmarked = [d for d in definitions if d.storage is None]
    if not marked and not unmarked:
        raise ValueError("every version says storage=False: one must be stored")
    storage = marked[0] if marked else unmarked[-1]
    versions = []
    for model, d in zip(models, definitions, strict=True):
        version: Obj = {"name": d.version, "served": d.served, "storage": d is storage,
                        "schema": {"openAPIV3Schema": schema_of(model)}}
        if "status" in model.model_fields:
            version["subresources"] = {"status": {}}
        if d.columns:
            version["additionalPrinterColumns"] = [c.as_dict() for c in d.columns]
        versions.append(version)
    names: Obj = {"plural": first.plural, "singular": first.singular, "kind": first.kind,
                  "listKind": f"{first.kind}List"}
    if first.short_names:
        names["shortNames"] = list(first.short_names)
    if first.categories:
        names["categories"] = list(first.categories)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": first.name},
            "spec": {"group": first.group, "scope": first.scope, "names": names,
                     "versions": versions}}


def crds_for(models: Iterable[type[Resource]]) -> list[Obj]:
    """One CRD per kind among ``models`` (versions of one kind grouped, in order given)."""
    by_kind: dict[tuple[str, str], list[type[Resource]]] = {}
    for model in models:
        d = model.definition()
        by_kind.setdefault((d.group, d.kind), []).append(model)
    return [crd_for(*group) for group in by_kind.values()]
