"""Go types of the large built-in kinds (Pod, Node, Service, ...), read from the protobuf tables.

Kubernetes' protobuf tables (:mod:`setpoint.apimachinery.prototables`) name every field of
every message a kind reaches, with its JSON name and type: enough to decode a JSON body as Go
would and to drop the fields Go's decoder would drop. :func:`go_type` turns a message into a
:class:`~setpoint.apimachinery.gotypes.GoType`; :func:`prune` removes the unknown fields of a
value at every depth and returns their paths as Kubernetes' strict decoding names them
(``spec.containers[0].colour``).

Invariants: a message becomes one shared :class:`Struct` per :class:`TypeBuilder` (recursive
messages are fine), and :func:`kind_type` builds each kind of the shipped tables once per
process, as :func:`setpoint.apimachinery.protobuf.tables` loads them once; ``inline``
members are the parent's; values of the special forms are not pruned inside (quantities,
int-or-strings and raw JSON are leaves).

Non-guarantees: named string types (``v1.RestartPolicy``) print as ``string`` in type errors,
since the tables do not keep Go's type names for scalars; unsigned integers are checked as
``int64``.
"""

from __future__ import annotations

import functools
from typing import Any

from setpoint.apimachinery import gotypes as go
from setpoint.apimachinery import protobuf, prototables, quantity
from setpoint.apimachinery.prototables import Message, Tables

_SCALARS: dict[int, go.GoType] = {
    prototables.STRING: go.STRING, prototables.BOOL: go.BOOL, prototables.INT32: go.INT32,
    prototables.INT64: go.INT64, prototables.UINT32: go.INT64, prototables.UINT64: go.INT64,
    prototables.DOUBLE: go.FLOAT64, prototables.FLOAT: go.FLOAT64, prototables.BYTES: go.BYTES,
}


def _check_quantity(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return "json: cannot unmarshal into Go value of type resource.Quantity"
    try:
        quantity.parse_quantity(str(value))
    except (quantity.QuantityError, ValueError) as e:
        return str(e) or quantity.ERR_FORMAT
    return None


def _check_int_or_string(value: Any) -> str | None:
    if isinstance(value, str):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if -(1 << 31) <= value < (1 << 31):
            return None
        return (f"json: cannot unmarshal number {value} into Go value of type int32")
    what = "bool" if isinstance(value, bool) else "number" if isinstance(value, float) \
        else "object" if isinstance(value, dict) else "array"
    return f"json: cannot unmarshal {what} into Go value of type int32"


QUANTITY = go.Custom("resource.Quantity", _check_quantity)
INT_OR_STRING = go.Custom("intstr.IntOrString", _check_int_or_string)


def _go_name(message: str) -> str:
    parts = message.rsplit(".", 2)
    return ".".join(parts[-2:])


class TypeBuilder:
    """Builds (and shares) the Go types of the messages of one set of tables."""

    def __init__(self, tables: Tables | None = None) -> None:
        self.tables = tables if tables is not None else protobuf.tables()
        self._built: dict[str, go.GoType] = {}

    def kind(self, api_version: str, kind: str) -> go.Struct:
        """The Go type of a kind (``("v1", "Pod")``)."""
        built = self.message(self.tables.kinds[(api_version, kind)].name)
        assert isinstance(built, go.Struct)
        return built

    def message(self, name: str) -> go.GoType:
        if name in self._built:
            return self._built[name]
        msg = self.tables.messages[name]
        form = msg.form
        if form is not None:
            special = _form_type(form)
            self._built[name] = special
            return special
        struct = go.Struct(_go_name(name))
        self._built[name] = struct
        struct.fields.update(self._fields(msg))
        return struct

    def _fields(self, msg: Message) -> dict[str, go.GoType]:
        out: dict[str, go.GoType] = {}
        for f in msg.fields.values():
            if f.inline and f.message is not None:
                out.update(self._fields(self.tables.messages[f.message]))
                continue
            elem = self._elem(f.kind if f.kind != prototables.MAP else f.value, f.message)
            if f.kind == prototables.MAP:
                elem = go.MapOf(elem)
            out[f.json] = go.SliceOf(elem) if f.repeated else elem
        return out

    def _elem(self, kind: int, message: str | None) -> go.GoType:
        if kind == prototables.MESSAGE and message is not None:
            return self.message(message)
        return _SCALARS.get(kind, go.ANY)


def _form_type(form: str) -> go.GoType:
    if form == "time":
        return go.TIME
    if form == "microtime":
        return go.MICRO_TIME
    if form == "quantity":
        return QUANTITY
    if form == "intorstring":
        return INT_OR_STRING
    if form == "duration":
        return go.STRING
    if form == "list":
        return go.SliceOf(go.STRING)
    return go.AnyValue("runtime.RawExtension")


@functools.cache
def kind_type(api_version: str, kind: str) -> go.Struct:
    """The Go type of a kind in the tables shipped with the package, built once per process
    and shared (types and their compiled checks are never changed after they are built)."""
    return TypeBuilder().kind(api_version, kind)


def prune(value: Any, go_type: go.GoType, path: str = "") -> list[str]:
    """Remove (in place) the members of ``value`` that ``go_type`` does not declare, at every
    depth; returns their paths in the order met. ``apiVersion``, ``kind`` and ``metadata``
    at the top are the caller's (the store prunes ObjectMeta itself)."""
    pruned: list[str] = []
    _prune(value, go_type, path, pruned, top=True)
    return pruned


def _prune(value: Any, t: go.GoType, path: str, pruned: list[str], *, top: bool = False
           ) -> None:
    if isinstance(t, go.Struct):
        if not isinstance(value, dict):
            return
        for key in list(value):
            if top and key in ("apiVersion", "kind", "metadata"):
                continue
            child = f"{path}.{key}" if path else key
            sub = t.fields.get(key)
            if sub is None:
                del value[key]
                pruned.append(child)
            elif value[key] is not None:
                _prune(value[key], sub, child, pruned)
    elif isinstance(t, go.SliceOf):
        if isinstance(value, list):
            for i, item in enumerate(value):
                _prune(item, t.elem, f"{path}[{i}]", pruned)
    elif isinstance(t, go.MapOf) and isinstance(value, dict):
        for key, item in value.items():
            _prune(item, t.elem, f"{path}[{key}]", pruned)
