"""JSON values as CEL sees them, guided by the structural schema node they validate against.

Two views of one schema node, mirroring Kubernetes' ``SchemaDeclType`` (static types, for the
checker) and ``UnstructuredToVal`` (runtime values):

================================  =========================  ===============================
schema                            CEL type                   runtime value
================================  =========================  ===============================
``x-kubernetes-int-or-string``    ``dyn``                    the ``int`` or ``str``
object with ``properties``        object with those fields   :class:`ObjectView`
object, ``additionalProperties``  ``map(string, V)``         :class:`MapView`
array                             ``list(E)``                :class:`ListView` (or the list)
string, ``format: date-time``     ``timestamp``              :class:`~.objects.Timestamp`
string, ``format: date``          ``timestamp``              midnight UTC of that date
string, ``format: duration``      ``duration``               :class:`~.objects.Duration`
string, ``format: byte``          ``bytes``                  the base64-decoded bytes
number                            ``double``                 ``float`` (also for ``1``)
integer / boolean / string        ``int`` / ``bool`` / ...   the JSON value itself
================================  =========================  ===============================

Views are lazy: a child is converted when a rule reads it, so ``self.a < self.b`` on a large
object costs two lookups. Invariants of :class:`ObjectView` (Kubernetes' ``unstructuredMap``):
only declared properties are visible; a property whose JSON value is ``null`` is absent
(``has()`` is false); CEL names are escaped property names (``foo-bar`` is
``self.foo__dash__bar``, ``namespace`` is ``self.__namespace__``). The root of a resource and
every ``x-kubernetes-embedded-resource`` object also show ``apiVersion``, ``kind`` and
``metadata.name``/``metadata.generateName`` (and no other metadata).

A JSON value that does not fit its schema (which schema validation reports separately)
becomes an :class:`~setpoint.cel.errors.EvalError` when a rule reads it, with
Kubernetes' wording (``invalid data, expected ...``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any, Final

from setpoint.apimachinery import regexp
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.objects import NANOS, CelList, CelMap, Duration, Timestamp
from setpoint.cel.schemas import PlainSchema, Schema
from setpoint.cel.timevals import (
    parse_openapi_datetime,
    parse_openapi_duration,
    parse_timestamp,
)

# -- property-name escaping (k8s.io/apiserver/pkg/cel/escaping.go) --------------------------

RESERVED_SYMBOLS: Final = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var", "void",
    "while",
})
_PLAIN: Final = regexp.Regexp(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPABLE: Final = regexp.Regexp(r"[A-Za-z_./-][A-Za-z0-9_./-]*")
_DATE: Final = regexp.Regexp(r"\d{4}-\d{2}-\d{2}")
_EXPANSIONS: Final = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_CONTRACTIONS: Final = {"underscores": "__", "dot": ".", "dash": "-", "slash": "/"}


def escape(name: str) -> str | None:
    """The CEL field name of a property, or ``None`` when it cannot be expressed."""
    if not name or name[0].isdigit():
        return None
    if name in RESERVED_SYMBOLS:
        return f"__{name}__"
    if _PLAIN.fullmatch(name) and "__" not in name:
        return name
    if not _ESCAPABLE.fullmatch(name):
        return None
    out: list[str] = []
    i = 0
    while i < len(name):  # left to right, "__" before a single character
        if name.startswith("__", i):
            out.append(_EXPANSIONS["__"])
            i += 2
        else:
            out.append(_EXPANSIONS.get(name[i], name[i]))
            i += 1
    return "".join(out)


def unescape(name: str) -> str | None:
    """The property a CEL field name refers to, or ``None`` when it names none."""
    if "__" not in name:
        return name
    out: list[str] = []
    i = 0
    while i < len(name):
        # an escape is "__", one or more characters other than "_", then "__"
        if name.startswith("__", i):
            end = i + 2
            while end < len(name) and name[end] != "_":
                end += 1
            if end > i + 2 and name.startswith("__", end):
                inner = name[i + 2:end]
                if inner in _CONTRACTIONS:
                    out.append(_CONTRACTIONS[inner])
                elif inner in RESERVED_SYMBOLS and end + 2 - i == len(name):
                    out.append(inner)
                else:
                    return None
                i = end + 2
                continue
        out.append(name[i])
        i += 1
    return "".join(out)


# -- the resource root: apiVersion, kind, metadata.name/generateName -------------------------

_STRING_NODE: Final = PlainSchema(type="string")
_METADATA_NODE: Final = PlainSchema(type="object", properties={
    "name": PlainSchema(type="string"), "generateName": PlainSchema(type="string")})


def _declares_type_meta(node: Schema) -> bool:
    """``WithTypeAndObjectMeta`` keeps a schema that already declares ``apiVersion``, ``kind``
    and ``metadata`` with ``name`` and ``generateName`` (then other declared metadata fields
    stay visible); otherwise those three are replaced by the minimal ones."""
    props = node.properties or {}
    meta = props.get("metadata")
    meta_props = (meta.properties or {}) if meta is not None else {}
    return (all(n in props and props[n].type == "string" for n in ("apiVersion", "kind"))
            and meta is not None and meta.type == "object"
            and all(n in meta_props and meta_props[n].type == "string"
                    for n in ("name", "generateName")))


def _adds_type_meta(node: Schema, resource_root: bool) -> bool:
    return (resource_root or node.embedded_resource) and not _declares_type_meta(node)


def visible_properties(node: Schema, *, resource_root: bool) -> dict[str, Schema]:
    """Declared properties, with ``apiVersion``/``kind``/``metadata`` at a resource root."""
    props = dict(node.properties or {})
    if _adds_type_meta(node, resource_root):
        props["apiVersion"] = _STRING_NODE
        props["kind"] = _STRING_NODE
        props["metadata"] = _METADATA_NODE
    return props


# -- static types --------------------------------------------------------------------------

def decl_type(node: Schema, *, resource_root: bool = False) -> t.Type | None:
    """``SchemaDeclType``: the CEL type of values of ``node``; ``None`` if CEL cannot see them."""
    if node.int_or_string:
        return t.DYN
    kind = node.type
    if resource_root or node.embedded_resource:
        kind = "object"
    if kind == "array":
        if node.items is None:
            return None
        elem = decl_type(node.items)
        return t.list_of(elem) if elem is not None else None
    if kind == "object":
        ap = node.additional_schema
        if ap is not None and not resource_root and not node.embedded_resource:
            value = decl_type(ap)
            return t.map_of(t.STRING, value) if value is not None else None
        fields: dict[str, t.Type] = {}
        for name, prop in visible_properties(node, resource_root=resource_root).items():
            ft = decl_type(prop)
            cel_name = escape(name)
            if ft is not None and cel_name is not None:
                fields[cel_name] = ft
        return t.object_type("object", fields)
    if kind == "string":
        return {"byte": t.BYTES, "duration": t.DURATION, "date": t.TIMESTAMP,
                "date-time": t.TIMESTAMP}.get(node.format, t.STRING)
    return {"boolean": t.BOOL, "number": t.DOUBLE, "integer": t.INT}.get(kind)


# -- runtime values ------------------------------------------------------------------------

def _plain(node: Schema) -> bool:
    """Whether JSON values of ``node`` are already their CEL values (no view, no conversion)."""
    if node.int_or_string:
        return True
    if node.type in ("integer", "boolean"):
        return True
    return node.type == "string" and node.format not in ("byte", "duration", "date", "date-time")


def to_cel(value: Any, node: Schema, *, resource_root: bool = False) -> Any:
    """The CEL value of a JSON value at ``node`` (``UnstructuredToVal``)."""
    tv = type(value)
    kind = node.type
    # Fast path: the scalars whose JSON value is the CEL value.
    scalar = (tv is str and kind == "string" and not node.format) or (
        tv is int and kind == "integer") or (tv is bool and kind == "boolean")
    if scalar and not (resource_root or node.embedded_resource or node.int_or_string):
        return value
    if value is None:
        if node.nullable:
            return None
        raise EvalError("invalid data, got null for schema with nullable=false")
    if node.int_or_string:
        if type(value) in (int, str):
            return value
        raise EvalError("invalid data, expected XIntOrString value to be either a string or "
                        "integer")
    kind = "object" if resource_root or node.embedded_resource else node.type
    if kind == "object":
        if type(value) is not dict:
            raise EvalError("invalid data, expected a map for the provided schema with "
                            "type=object")
        ap = node.additional_schema
        if node.properties or resource_root or node.embedded_resource or ap is None:
            return ObjectView(value, node.properties or _NO_PROPERTIES,
                              _adds_type_meta(node, resource_root))
        return MapView(value, ap)
    if kind == "array":
        if type(value) is not list:
            raise EvalError("invalid data, expected an array for the provided schema with "
                            "type=array")
        items = node.items
        if items is None:
            raise EvalError("invalid array type, expected Items with a non-empty Schema")
        list_type = node.list_type or "atomic"
        if list_type == "atomic" and _plain(items) and (items.nullable or None not in value):
            return value
        return ListView(value, items, list_type, tuple(node.list_map_keys))
    if kind == "string":
        if type(value) is not str:
            raise EvalError(f"invalid data, expected string, got {type(value).__name__}")
        return _string_value(value, node.format)
    if kind == "number":
        if type(value) in (int, float):
            return float(value)
        raise EvalError(f"invalid data, expected float, got {type(value).__name__}")
    if kind == "integer":
        if type(value) is int:
            return value
        if type(value) is float and value.is_integer():
            return int(value)
        raise EvalError(f"invalid data, expected int, got {type(value).__name__}")
    if kind == "boolean":
        if type(value) is bool:
            return value
        raise EvalError(f"invalid data, expected bool, got {type(value).__name__}")
    if node.preserve_unknown_fields:
        return value
    raise EvalError("invalid type, expected object, array, number, integer, boolean or string, "
                    "or no type with x-kubernetes-int-or-string or "
                    f"x-kubernetes-preserve-unknown-fields is true, got {node.type}")


def _string_value(value: str, fmt: str) -> Any:
    if fmt == "date-time":
        try:
            return parse_openapi_datetime(value)
        except EvalError as e:
            raise EvalError(f"Invalid date-time formatted string {value}: {e}") from None
    if fmt == "date":
        if not _DATE.fullmatch(value):
            raise EvalError(f'Invalid date formatted string {value}: parsing time "{value}" '
                            f'as "2006-01-02": cannot parse "{value}"')
        ts = parse_timestamp(value + "T00:00:00Z")
        return Timestamp(ts.nanos - ts.nanos % NANOS)
    if fmt == "duration":
        try:
            return parse_openapi_duration(value)
        except EvalError as e:
            raise EvalError(f"Invalid duration {value}: {e}") from None
    if fmt == "byte":
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as e:
            raise EvalError(f"Invalid byte formatted string {value}: {e}") from None
    return value


_NO_PROPERTIES: Final[Mapping[str, Schema]] = {}
_TYPE_META: Final = {"apiVersion": _STRING_NODE, "kind": _STRING_NODE, "metadata": _METADATA_NODE}


class ObjectView(CelMap):
    """An object with declared properties; see the module invariants. ``type_meta``: the
    object is a resource (root or embedded), so ``apiVersion``/``kind``/``metadata`` show."""

    __slots__ = ("props", "raw", "type_meta")

    def __init__(self, raw: dict[str, Any], props: Mapping[str, Schema],
                 type_meta: bool = False) -> None:
        self.raw = raw
        self.props = props
        self.type_meta = type_meta

    def _node(self, name: str) -> Schema | None:
        if self.type_meta and name in _TYPE_META:
            return _TYPE_META[name]
        return self.props.get(name)

    def find(self, key: Any) -> tuple[bool, Any]:
        if type(key) is not str:
            raise NoSuchOverload()
        name = unescape(key)
        if name is None:
            return False, None
        value = self.raw.get(name)
        if value is None:
            return False, None
        node = self._node(name)
        if node is None:
            return False, None
        return True, to_cel(value, node)

    def __iter__(self) -> Iterator[str]:
        for name in self.raw:
            if self._node(name) is not None:
                yield escape(name) or name

    def hidden(self) -> Iterator[tuple[str, Any]]:
        for name, value in self.raw.items():
            if self._node(name) is None:
                yield name, value

    def __len__(self) -> int:
        return len(self.raw)


class MapView(CelMap):
    """An object whose values follow ``additionalProperties`` (a CEL map of strings)."""

    __slots__ = ("node", "raw")

    def __init__(self, raw: dict[str, Any], node: Schema) -> None:
        self.raw = raw
        self.node = node

    def find(self, key: Any) -> tuple[bool, Any]:
        if type(key) is not str:
            raise NoSuchOverload()
        if key not in self.raw:
            return False, None
        return True, to_cel(self.raw[key], self.node)

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


class ListView(CelList):
    """An array whose items need converting, or whose list type changes ``==`` and ``+``."""

    __slots__ = ("items", "list_type", "map_keys", "raw")

    def __init__(self, raw: list[Any], items: Schema, list_type: str,
                 map_keys: tuple[str, ...]) -> None:
        self.raw = raw
        self.items = items
        self.list_type = list_type
        self.map_keys = tuple(escape(k) or k for k in map_keys)

    def __len__(self) -> int:
        return len(self.raw)

    def element_zero(self) -> Any:
        items = self.items
        if items.type == "number":
            return 0.0
        if items.type == "string" and items.format == "duration":
            return Duration(0)
        return 0

    def __getitem__(self, index: int) -> Any:
        return to_cel(self.raw[index], self.items)

    def __iter__(self) -> Iterator[Any]:
        items = self.items
        for v in self.raw:
            yield to_cel(v, items)
