"""Static CEL types, for the checker and for declaring functions and variables.

A :class:`Type` is immutable. ``DYN`` is the gradual type: it is assignable to and from every
type, so a value the checker cannot type (``x-kubernetes-int-or-string``, a literal mixing
types) never causes a false compile error; it is checked at runtime instead.

Object types (a schema node with ``properties``) are :class:`Type` values of kind
``object`` whose ``fields`` map escaped CEL field names to types. Two object types are equal
only if they are the same object (identity), as two schema nodes are distinct types in
Kubernetes (each gets a generated name).

Names print as cel-go prints them: ``list(int)``, ``map(string, dyn)``,
``optional_type(string)``, ``google.protobuf.Timestamp``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True, slots=True, eq=False)
class Type:
    kind: str
    params: tuple[Type, ...] = ()
    name: str = ""
    fields: Mapping[str, Type] | None = field(default=None, compare=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Type):
            return NotImplemented
        if self.kind == "object" or other.kind == "object":
            return self is other
        return self.kind == other.kind and self.name == other.name and self.params == other.params

    def __hash__(self) -> int:
        if self.kind == "object":
            return id(self)
        return hash((self.kind, self.name, self.params))

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "optional":
            return f"optional_type({self.params[0]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if self.kind in ("opaque", "object", "param"):
            return self.name
        return _PRINTED.get(self.kind, self.kind)

    @property
    def elem(self) -> Type:
        """The element type of a list, the value type of a map, else ``DYN``."""
        if self.kind == "list":
            return self.params[0]
        if self.kind == "map":
            return self.params[1]
        if self.kind == "optional":
            return self.params[0]
        return DYN


_PRINTED: Final = {
    "timestamp": "google.protobuf.Timestamp",
    "duration": "google.protobuf.Duration",
    "null": "null_type",
}

INT: Final = Type("int")
UINT: Final = Type("uint")
DOUBLE: Final = Type("double")
BOOL: Final = Type("bool")
STRING: Final = Type("string")
BYTES: Final = Type("bytes")
NULL: Final = Type("null")
TIMESTAMP: Final = Type("timestamp")
DURATION: Final = Type("duration")
DYN: Final = Type("dyn")
ERROR: Final = Type("error")
TYPE: Final = Type("type")

A: Final = Type("param", name="A")
B: Final = Type("param", name="B")


def list_of(elem: Type) -> Type:
    return Type("list", (elem,))


def map_of(key: Type, value: Type) -> Type:
    return Type("map", (key, value))


def optional_of(inner: Type) -> Type:
    return Type("optional", (inner,))


def type_of(t: Type) -> Type:
    return Type("type", (t,))


def opaque(name: str) -> Type:
    return Type("opaque", name=name)


def object_type(name: str, fields: Mapping[str, Type]) -> Type:
    return Type("object", name=name, fields=dict(fields))


LIST_DYN: Final = list_of(DYN)
MAP_DYN: Final = map_of(DYN, DYN)

QUANTITY: Final = opaque("kubernetes.Quantity")
URL: Final = opaque("kubernetes.URL")
IP: Final = opaque("net.IP")
CIDR: Final = opaque("net.CIDR")
FORMAT: Final = opaque("kubernetes.NamedFormat")
SEMVER: Final = opaque("kubernetes.Semver")

COMPARABLE: Final = (INT, UINT, DOUBLE, BOOL, DURATION, TIMESTAMP, STRING, BYTES)


def runtime_name(t: Type) -> str:
    """The name ``type(x)`` gives at run time: parameters are erased (``list``, not
    ``list(int)``)."""
    return {"list": "list", "map": "map", "optional": "optional_type", "type": "type"}.get(
        t.kind, str(t))


def is_dyn_like(t: Type) -> bool:
    return t.kind in ("dyn", "error", "param")


def assignable(param: Type, arg: Type, bindings: dict[str, Type]) -> bool:
    """Whether an argument of type ``arg`` can be passed for ``param``, binding type parameters.

    Gradual: ``dyn`` (and an unbound parameter) on either side matches. Objects are not maps:
    as in Kubernetes, ``self.obj == {'a': 1}`` does not type-check.
    """
    if param.kind == "param":
        bound = bindings.get(param.name)
        if bound is None or is_dyn_like(bound):
            bindings[param.name] = arg
            return True
        if is_dyn_like(arg):
            return True
        if bound == arg:
            return True
        # Prefer the more specific binding when a parameter is bound twice, e.g. list(dyn)
        # then list(int).
        trial: dict[str, Type] = {}
        if _generalizes(bound, arg, trial):
            bindings[param.name] = arg
            return True
        return _generalizes(arg, bound, trial)
    if is_dyn_like(arg) or param.kind == "dyn":
        return True
    if param.kind != arg.kind:
        return False
    if param.kind == "object":
        return param is arg
    if param.kind == "opaque":
        return param.name == arg.name
    if param.kind == "type":
        return True  # type values compare with each other whatever they denote
    if len(param.params) != len(arg.params):
        return False
    return all(assignable(p, a, bindings) for p, a in zip(param.params, arg.params, strict=True))


def _generalizes(general: Type, specific: Type, bindings: dict[str, Type]) -> bool:
    if is_dyn_like(general):
        return True
    if general.kind == "type" and specific.kind == "type":
        return True
    if general.kind != specific.kind or len(general.params) != len(specific.params):
        return general == specific
    return all(_generalizes(g, s, bindings)
               for g, s in zip(general.params, specific.params, strict=True))


def substitute(t: Type, bindings: Mapping[str, Type]) -> Type:
    if t.kind == "param":
        bound = bindings.get(t.name)
        return DYN if bound is None or bound.kind == "param" else bound
    if t.params:
        return Type(t.kind, tuple(substitute(p, bindings) for p in t.params), t.name, t.fields)
    return t


def join(types: list[Type]) -> Type:
    """The common type of list elements or ternary branches: the type if all agree, else dyn."""
    if not types:
        return DYN
    first = types[0]
    if all(t == first for t in types[1:]):
        return first
    return DYN


NAMED_TYPES: Final = {
    "int": INT, "uint": UINT, "double": DOUBLE, "bool": BOOL, "string": STRING,
    "bytes": BYTES, "null_type": NULL, "list": LIST_DYN, "map": MAP_DYN, "type": TYPE,
    "google.protobuf.Timestamp": TIMESTAMP, "google.protobuf.Duration": DURATION,
    "dyn": DYN, "optional_type": optional_of(DYN),
    "kubernetes.Quantity": QUANTITY, "kubernetes.URL": URL, "net.IP": IP, "net.CIDR": CIDR,
    "kubernetes.NamedFormat": FORMAT, "kubernetes.Semver": SEMVER,
}
