"""The structural-schema model: one :class:`Node` per schema object of an ``openAPIV3Schema``.

This mirrors apiextensions' ``Structural`` (``Generic`` + ``Extensions`` + ``ValueValidation``)
and ``NestedValueValidation`` with one class: a node reached through ``allOf``/``anyOf``/
``oneOf``/``not`` (a *junctor*) has ``nested=True`` and is only ever used for validation.

:func:`parse` never raises. Kubernetes rejects a CRD whose schema does not decode (a string
``maxLength``, an ``items`` array, ...); here such a keyword is ignored at compile time and its
name is recorded in :attr:`Node.malformed` for :mod:`setpoint.schema.structuralcheck` to report.

Invariants:

* ``default`` is :data:`MISSING` when absent *or* JSON ``null`` (Kubernetes treats a null
  default as no default);
* ``properties`` is ``None`` when absent or empty, as ``len(s.Properties) > 0`` upstream;
* ``additional_properties`` is ``None`` (absent), ``True``/``False`` (boolean form) or a node;
* x-kubernetes-validations rules are kept verbatim as :class:`ValidationRule`; the model only
  holds them (:mod:`~setpoint.schema.celrules` compiles and evaluates them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final[Any] = _Missing()

META_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})

# JSON names of JSONSchemaProps, and extensions.
KNOWN_KEYWORDS: Final = frozenset({
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
})


@dataclass(frozen=True, slots=True)
class ValidationRule:
    """One ``x-kubernetes-validations`` entry, as written (evaluated by ``celrules``)."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str | None = None
    field_path: str = ""
    optional_old_self: bool | None = None


@dataclass(eq=False, slots=True)
class Node:
    """One schema object. Field names follow the JSON keywords in snake case."""

    raw: Mapping[str, Any]
    nested: bool = False
    # Generic
    type: str = ""
    nullable: bool = False
    default: Any = MISSING
    description: str = ""
    title: str = ""
    # Structure
    properties: dict[str, Node] | None = None
    additional_properties: bool | Node | None = None
    items: Node | None = None
    # Extensions
    preserve_unknown_fields: bool = False
    preserve_unknown_fields_false: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False
    list_type: str | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: str | None = None
    validations: tuple[ValidationRule, ...] = ()
    # Value validation
    format: str = ""
    maximum: float | None = None
    exclusive_maximum: bool = False
    minimum: float | None = None
    exclusive_minimum: bool = False
    max_length: int | None = None
    min_length: int | None = None
    pattern: str = ""
    max_items: int | None = None
    min_items: int | None = None
    unique_items: bool = False
    multiple_of: float | None = None
    enum: list[Any] | None = None
    max_properties: int | None = None
    min_properties: int | None = None
    required: tuple[str, ...] | None = None
    all_of: tuple[Node, ...] = ()
    any_of: tuple[Node, ...] = ()
    one_of: tuple[Node, ...] = ()
    not_: Node | None = None
    # Keywords present with a value of the wrong JSON type (ignored for compilation).
    malformed: tuple[str, ...] = field(default=())

    @property
    def additional_schema(self) -> Node | None:
        """The schema of ``additionalProperties`` when it is a schema, else ``None``."""
        ap = self.additional_properties
        return ap if isinstance(ap, Node) else None

    @property
    def has_additional(self) -> bool:
        return self.additional_properties is not None

    def prop(self, name: str) -> Node | None:
        return self.properties.get(name) if self.properties else None


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) in (int, float)


def parse(schema: Any, *, nested: bool = False) -> Node:
    """Build the node tree for a schema dict (anything else gives an empty, typeless node)."""
    raw: Mapping[str, Any] = schema if isinstance(schema, Mapping) else {}
    node = Node(raw=raw, nested=nested)
    bad: list[str] = []

    def get_str(key: str) -> str:
        v = raw.get(key)
        if v is None:
            return ""
        if isinstance(v, str):
            return v
        bad.append(key)
        return ""

    def get_bool(key: str) -> bool:
        v = raw.get(key)
        if v is None:
            return False
        if isinstance(v, bool):
            return v
        bad.append(key)
        return False

    def get_float(key: str) -> float | None:
        v = raw.get(key)
        if v is None:
            return None
        if _is_number(v):
            return float(v)
        bad.append(key)
        return None

    def get_int(key: str) -> int | None:
        v = raw.get(key)
        if v is None:
            return None
        if _is_int(v):
            return int(v)
        if type(v) is float and v.is_integer():
            return int(v)
        bad.append(key)
        return None

    def get_schema_list(key: str) -> tuple[Node, ...]:
        v = raw.get(key)
        if v is None:
            return ()
        if isinstance(v, list) and all(isinstance(x, Mapping) for x in v):
            return tuple(parse(x, nested=True) for x in v)
        bad.append(key)
        return ()

    node.type = get_str("type")
    node.nullable = get_bool("nullable")
    node.description = get_str("description")
    node.title = get_str("title")
    if "default" in raw and raw["default"] is not None:
        node.default = raw["default"]

    props = raw.get("properties")
    if props is not None:
        if isinstance(props, Mapping) and all(isinstance(v, Mapping) for v in props.values()):
            if props:
                node.properties = {str(k): parse(v, nested=nested) for k, v in props.items()}
        else:
            bad.append("properties")

    if "additionalProperties" in raw:
        ap = raw["additionalProperties"]
        if isinstance(ap, bool):
            node.additional_properties = ap
        elif isinstance(ap, Mapping):
            node.additional_properties = parse(ap, nested=nested)
        elif ap is not None:
            bad.append("additionalProperties")

    items = raw.get("items")
    if items is not None:
        if isinstance(items, Mapping):
            node.items = parse(items, nested=nested)
        else:
            bad.append("items")

    pu = raw.get("x-kubernetes-preserve-unknown-fields")
    if pu is True:
        node.preserve_unknown_fields = True
    elif pu is False:
        node.preserve_unknown_fields_false = True
    elif pu is not None:
        bad.append("x-kubernetes-preserve-unknown-fields")
    node.embedded_resource = get_bool("x-kubernetes-embedded-resource")
    node.int_or_string = get_bool("x-kubernetes-int-or-string")
    lt = raw.get("x-kubernetes-list-type")
    if lt is not None:
        if isinstance(lt, str):
            node.list_type = lt
        else:
            bad.append("x-kubernetes-list-type")
    keys = raw.get("x-kubernetes-list-map-keys")
    if keys is not None:
        if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
            node.list_map_keys = tuple(keys)
        else:
            bad.append("x-kubernetes-list-map-keys")
    mt = raw.get("x-kubernetes-map-type")
    if mt is not None:
        if isinstance(mt, str):
            node.map_type = mt
        else:
            bad.append("x-kubernetes-map-type")
    node.validations = _parse_rules(raw.get("x-kubernetes-validations"), bad)

    node.format = get_str("format")
    node.maximum = get_float("maximum")
    node.exclusive_maximum = get_bool("exclusiveMaximum")
    node.minimum = get_float("minimum")
    node.exclusive_minimum = get_bool("exclusiveMinimum")
    node.max_length = get_int("maxLength")
    node.min_length = get_int("minLength")
    node.pattern = get_str("pattern")
    node.max_items = get_int("maxItems")
    node.min_items = get_int("minItems")
    node.unique_items = get_bool("uniqueItems")
    node.multiple_of = get_float("multipleOf")
    node.max_properties = get_int("maxProperties")
    node.min_properties = get_int("minProperties")
    enum = raw.get("enum")
    if enum is not None:
        if isinstance(enum, list):
            # A null enum member is a nil interface{} upstream: it never matches anything.
            node.enum = list(enum)
        else:
            bad.append("enum")
    req = raw.get("required")
    if req is not None:
        if isinstance(req, list) and all(isinstance(r, str) for r in req):
            node.required = tuple(req)
        else:
            bad.append("required")
    node.all_of = get_schema_list("allOf")
    node.any_of = get_schema_list("anyOf")
    node.one_of = get_schema_list("oneOf")
    nt = raw.get("not")
    if nt is not None:
        if isinstance(nt, Mapping):
            node.not_ = parse(nt, nested=True)
        else:
            bad.append("not")
    node.malformed = tuple(bad)
    return node


def _parse_rules(value: Any, bad: list[str]) -> tuple[ValidationRule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        bad.append("x-kubernetes-validations")
        return ()
    rules: list[ValidationRule] = []
    for entry in value:
        if not isinstance(entry, Mapping):
            bad.append("x-kubernetes-validations")
            continue
        oos = entry.get("optionalOldSelf")
        reason = entry.get("reason")
        rules.append(ValidationRule(
            rule=str(entry.get("rule") or ""),
            message=str(entry.get("message") or ""),
            message_expression=str(entry.get("messageExpression") or ""),
            reason=reason if isinstance(reason, str) else None,
            field_path=str(entry.get("fieldPath") or ""),
            optional_old_self=oos if isinstance(oos, bool) else None,
        ))
    return tuple(rules)


def walk(node: Node) -> list[Node]:
    """Every node reachable from ``node`` (structure and junctors), parents before children."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(n.properties.values() if n.properties else ())
        ap = n.additional_schema
        if ap is not None:
            stack.append(ap)
        if n.items is not None:
            stack.append(n.items)
        stack.extend(n.all_of)
        stack.extend(n.any_of)
        stack.extend(n.one_of)
        if n.not_ is not None:
            stack.append(n.not_)
    return out
