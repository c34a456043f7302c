"""Runtime values of the CEL engine.

CEL values are plain Python values where the two agree:

============  ===============================================================
CEL           Python
============  ===============================================================
int           ``int`` (exactly ``int``, never ``bool``), within int64
uint          :class:`UInt` (an ``int`` subclass), within uint64
double        ``float``
bool          ``bool``
string        ``str``
bytes         ``bytes``
null          ``None``
list          ``list``, or a :class:`CelList` view of schema-typed JSON
map           ``dict``, or a :class:`CelMap` view of schema-typed JSON
timestamp     :class:`Timestamp` (nanoseconds since the Unix epoch)
duration      :class:`Duration` (nanoseconds)
optional      :class:`Optional`
type          :class:`TypeValue`
opaque        an :class:`Opaque` subclass (Quantity, IP, CIDR, URL, Format, Semver)
============  ===============================================================

Invariants: values are never mutated after creation (lists and dicts built by the engine
are fresh, and views never write through); ``UInt`` hashes as its ``int`` value, so map keys
compare across numeric types as CEL's heterogeneous equality requires.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from setpoint.cel.errors import EvalError

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
UINT64_MAX: Final = (1 << 64) - 1

# The range of google.protobuf.Timestamp: 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59.999999999Z.
MIN_UNIX_SECONDS: Final = -62135596800
MAX_UNIX_SECONDS: Final = 253402300799
NANOS: Final = 1_000_000_000


class UInt(int):
    """A CEL ``uint``. Arithmetic on it goes through the engine's functions, never ``+``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """An instant with nanosecond precision, in the range of ``google.protobuf.Timestamp``.

    ``offset`` (seconds east of UTC) is the zone offset it was written with; like Go's
    ``time.Time`` location it only affects ``string(ts)``, never equality or ordering.
    """

    nanos: int
    offset: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not MIN_UNIX_SECONDS * NANOS <= self.nanos < (MAX_UNIX_SECONDS + 1) * NANOS:
            raise EvalError("timestamp overflow")


@dataclass(frozen=True, slots=True, order=True)
class Duration:
    """A signed span of nanoseconds, within Go's ``time.Duration`` (int64 nanoseconds)."""

    nanos: int

    def __post_init__(self) -> None:
        if not INT64_MIN <= self.nanos <= INT64_MAX:
            raise EvalError("duration overflow")


@dataclass(frozen=True, slots=True)
class Optional:
    """``optional.of(value)`` when ``present``, else ``optional.none()``."""

    present: bool
    value: Any = None

    @staticmethod
    def of(value: Any) -> Optional:
        return Optional(True, value)

    @staticmethod
    def none() -> Optional:
        return NONE


NONE: Final = Optional(False)


@dataclass(frozen=True, slots=True)
class TypeValue:
    """A CEL type used as a value: what ``type(x)`` returns and what ``int`` names."""

    name: str

    def __str__(self) -> str:
        return self.name


class Opaque:
    """Base of library types (Quantity, IP, ...). Subclasses define ``equals`` and ``type_name``."""

    __slots__ = ()
    type_name: ClassVar[str] = "opaque"

    def equals(self, other: Any) -> bool:
        return self is other


class CelList:
    """A read-only list view. ``list_type`` is Kubernetes' ``x-kubernetes-list-type``."""

    __slots__ = ()
    list_type: str = "atomic"
    map_keys: tuple[str, ...] = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def element_zero(self) -> Any:
        """The zero of the element type (what ``sum()`` of an empty list is), if known."""
        return 0


class TypedList(CelList):
    """A computed list that keeps set or map-list semantics (the result of ``set + list``)."""

    __slots__ = ("items", "list_type", "map_keys")

    def __init__(self, items: list[Any], list_type: str, map_keys: tuple[str, ...] = ()) -> None:
        self.items = items
        self.list_type = list_type
        self.map_keys = map_keys

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


class CelMap:
    """A read-only map view; ``find`` returns ``(found, value)``."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError

    def find(self, key: Any) -> tuple[bool, Any]:
        raise NotImplementedError

    def hidden(self) -> Iterator[tuple[str, Any]]:
        """Entries CEL cannot select but equality still compares (unknown fields), as JSON."""
        return iter(())

    def items(self) -> Iterator[tuple[Any, Any]]:
        for k in self:
            found, v = self.find(k)
            if found:
                yield k, v


class StructValue(CelMap):
    """A message built by ``Type{field: value}`` (only for the types a library declares,
    :mod:`setpoint.cel.structs`): a map of its set fields that knows its type name."""

    __slots__ = ("fields", "type_name")

    def __init__(self, type_name: str, fields: dict[str, Any]) -> None:
        self.type_name = type_name
        self.fields = fields

    def __len__(self) -> int:
        return len(self.fields)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fields)

    def find(self, key: Any) -> tuple[bool, Any]:
        if type(key) is str and key in self.fields:
            return True, self.fields[key]
        return False, None


# Type values, named as cel-go names them.
INT_TYPE: Final = TypeValue("int")
UINT_TYPE: Final = TypeValue("uint")
DOUBLE_TYPE: Final = TypeValue("double")
BOOL_TYPE: Final = TypeValue("bool")
STRING_TYPE: Final = TypeValue("string")
BYTES_TYPE: Final = TypeValue("bytes")
NULL_TYPE: Final = TypeValue("null_type")
LIST_TYPE: Final = TypeValue("list")
MAP_TYPE: Final = TypeValue("map")
TIMESTAMP_TYPE: Final = TypeValue("google.protobuf.Timestamp")
DURATION_TYPE: Final = TypeValue("google.protobuf.Duration")
OPTIONAL_TYPE: Final = TypeValue("optional_type")
TYPE_TYPE: Final = TypeValue("type")


def type_of(value: Any) -> TypeValue:
    """``type(value)``."""
    t = type(value)
    if t is bool:
        return BOOL_TYPE
    if t is int:
        return INT_TYPE
    if t is UInt:
        return UINT_TYPE
    if t is float:
        return DOUBLE_TYPE
    if t is str:
        return STRING_TYPE
    if t is bytes:
        return BYTES_TYPE
    if value is None:
        return NULL_TYPE
    if t is StructValue:
        return TypeValue(value.type_name)
    if t is list or isinstance(value, CelList):
        return LIST_TYPE
    if t is dict or isinstance(value, CelMap):
        return MAP_TYPE
    if t is Timestamp:
        return TIMESTAMP_TYPE
    if t is Duration:
        return DURATION_TYPE
    if t is Optional:
        return OPTIONAL_TYPE
    if t is TypeValue:
        return TYPE_TYPE
    if isinstance(value, Opaque):
        return TypeValue(value.type_name)
    raise EvalError(f"unsupported value type {t.__name__}")


def check_int(v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise EvalError("integer overflow")
    return v


def check_uint(v: int) -> UInt:
    if not 0 <= v <= UINT64_MAX:
        raise EvalError("unsigned integer overflow")
    return UInt(v)
