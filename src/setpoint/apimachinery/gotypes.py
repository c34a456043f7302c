"""Typed decoding of built-in kinds: which JSON values Kubernetes' Go types accept.

The API server decodes a body of a built-in kind (ConfigMap, Lease, CustomResourceDefinition)
into Go structs before anything else; a value of the wrong JSON type is refused there, and the
client gets a 400 whose message is Go's ``encoding/json`` error::

    json: cannot unmarshal string into Go struct field ConfigMap.data of type map[string]string

A :class:`GoType` describes a Go type as far as decoding goes, and :func:`decode_error` says
why a JSON value would not decode into it (or ``None``). Go's rules, as reproduced here:

* ``null`` decodes into anything (it leaves the zero value);
* a struct ignores fields it does not declare (pruning removes them later);
* the message names the innermost struct being decoded and the path of JSON field names from
  the root (map keys and list indices are not part of it), and the Go type of the target;
  numbers that do not fit an integer type are quoted (``number 1.5``, ``number 3000000000``);
* ``[]byte`` takes base64 (standard alphabet, padding required, ``\\r`` and ``\\n`` ignored, as
  Go's decoder does): :func:`decode_base64` gives the bytes or Go's ``illegal base64 data at
  input byte N``; :func:`canonical_base64` is what the server then stores and answers;
* ``metav1.Time`` and ``metav1.MicroTime`` take RFC 3339 strings. Unlike Go, MicroTime also
  accepts fewer than six fractional digits (the whole-second form every Time has).
* types with their own decoding (a schema that may be a boolean) are :class:`Custom` checks.

The first error in document order is reported. Invariants: pure and total on JSON values
(never raises, whatever the value); nothing is mutated.
"""

from __future__ import annotations

import binascii
import math
from collections.abc import Callable, Mapping
from typing import Any

from setpoint.apimachinery import regexp

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"
INT_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


#: a compiled check: (value, innermost struct's short name or None, path) -> the error or None;
#: the path is a linked pair ``(parent, name)`` (``()`` at the root), flattened only on error
Check = Callable[[Any, "str | None", Any], "str | None"]


class GoType:
    """A Go type, as decoding sees it; ``name`` is how Go's errors print it."""

    __slots__ = ("compiled", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        #: the check :func:`decode_error` compiles from this type on first use
        self.compiled: Check | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


class Scalar(GoType):
    """``string``, ``bool``, ``int32``, ``int64`` or ``float64`` (or a named type of one:
    ``Scalar("v1.SecretType", "string")``)."""

    __slots__ = ("kind",)

    def __init__(self, name: str, kind: str | None = None) -> None:
        super().__init__(name)
        self.kind = kind or name
        if self.kind not in ("string", "bool", "int32", "int64", "float64"):
            raise ValueError(f"not a scalar kind: {self.kind}")


class Bytes(GoType):
    """``[]byte``: a base64 string."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__("[]uint8")


class Time(GoType):
    """``v1.Time`` or ``v1.MicroTime``: an RFC 3339 string."""

    __slots__ = ("layout",)

    def __init__(self, *, micro: bool = False) -> None:
        super().__init__("v1.MicroTime" if micro else "v1.Time")
        self.layout = RFC3339_MICRO if micro else RFC3339


class MapOf(GoType):
    __slots__ = ("elem",)

    def __init__(self, elem: GoType) -> None:
        super().__init__(f"map[string]{elem.name}")
        self.elem = elem


class SliceOf(GoType):
    __slots__ = ("elem",)

    def __init__(self, elem: GoType) -> None:
        super().__init__(f"[]{elem.name}")
        self.elem = elem


class Struct(GoType):
    """A struct; ``fields`` maps JSON names to types and may be filled after creation (for
    recursive types), before the type is first used to decode."""

    __slots__ = ("fields", "short")

    def __init__(self, name: str, fields: Mapping[str, GoType] | None = None) -> None:
        super().__init__(name)
        self.short = name.rsplit(".", 1)[-1]
        self.fields: dict[str, GoType] = dict(fields or {})


class AnyValue(GoType):
    """``interface{}``, ``apiextensionsv1.JSON``, ``runtime.RawExtension``: anything."""

    __slots__ = ()

    def __init__(self, name: str = "interface {}") -> None:
        super().__init__(name)


class Custom(GoType):
    """A type with its own ``UnmarshalJSON``: ``check(value)`` returns its error, or None.
    Its errors carry no struct context, as Go's do not."""

    __slots__ = ("check",)

    def __init__(self, name: str, check: Callable[[Any], str | None]) -> None:
        super().__init__(name)
        self.check = check


STRING = Scalar("string")
BOOL = Scalar("bool")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
FLOAT64 = Scalar("float64")
BYTES = Bytes()
TIME = Time()
MICRO_TIME = Time(micro=True)
ANY = AnyValue()


def decode_error(value: Any, go_type: GoType) -> str | None:
    """Why ``value`` does not decode into ``go_type``; ``None`` when it does.

    The type is compiled into checks on first use (a struct's fields must be complete by
    then); later calls reuse them."""
    return _compiled(go_type)(value, None, ())


def _compiled(t: GoType) -> Check:
    return t.compiled if t.compiled is not None else _compile(t)


def _remember(t: GoType, check: Check) -> Check:
    t.compiled = check
    return check


def _accept(value: Any, struct: str | None, path: Any) -> str | None:
    return None


def _compile(t: GoType) -> Check:
    if isinstance(t, AnyValue):
        return _remember(t, _accept)
    if isinstance(t, Custom):
        custom = t.check

        def check_custom(value: Any, struct: str | None, path: Any) -> str | None:
            return None if value is None else custom(value)
        return _remember(t, check_custom)
    if isinstance(t, Scalar):
        return _remember(t, _scalar_check(t))
    if isinstance(t, Bytes):
        def check_bytes(value: Any, struct: str | None, path: Any) -> str | None:
            if value is None:
                return None
            if type(value) is not str:
                return _type_error(value, t, struct, path)
            try:
                decode_base64(value)
            except ValueError as e:
                return str(e)
            return None
        return _remember(t, check_bytes)
    if isinstance(t, Time):
        layout = t.layout

        def check_time(value: Any, struct: str | None, path: Any) -> str | None:
            if value is None:
                return None
            if type(value) is not str:
                return f"json: cannot unmarshal {_describe(value)} into Go value of type string"
            return time_error(value, layout)
        return _remember(t, check_time)
    if isinstance(t, MapOf | SliceOf):
        container = dict if isinstance(t, MapOf) else list
        elem_holder: list[Check] = []

        def check_container(value: Any, struct: str | None, path: Any) -> str | None:
            if type(value) is not container:
                return None if value is None else _type_error(value, t, struct, path)
            elem = elem_holder[0]
            items = value.values() if isinstance(value, dict) else value
            for item in items:
                if item is not None:
                    problem = elem(item, struct, path)
                    if problem is not None:
                        return problem
            return None
        _remember(t, check_container)
        elem_holder.append(_compiled(t.elem))
        return check_container
    if isinstance(t, Struct):
        table: dict[str, Check] = {}
        short = t.short

        def check_struct(value: Any, struct: str | None, path: Any) -> str | None:
            if type(value) is not dict:
                return None if value is None else _type_error(value, t, struct, path)
            for name, item in value.items():
                field_check = table.get(name)
                if field_check is not None and item is not None:
                    problem = field_check(item, short, (path, name))
                    if problem is not None:
                        return problem
            return None
        _remember(t, check_struct)  # before the fields: the type may contain itself
        table.update({name: _compiled(ft) for name, ft in t.fields.items()})
        return check_struct
    raise TypeError(f"unknown Go type {t!r}")  # pragma: no cover - a defect in a table


def _scalar_check(t: Scalar) -> Check:
    kind = t.kind
    if kind in ("string", "bool"):
        expected = str if kind == "string" else bool

        def check_exact(value: Any, struct: str | None, path: Any) -> str | None:
            if value is None or type(value) is expected:
                return None
            return _type_error(value, t, struct, path)
        return check_exact
    if kind == "float64":
        def check_float(value: Any, struct: str | None, path: Any) -> str | None:
            if value is None:
                return None
            kind_of = type(value)
            if kind_of is float:
                ok = math.isfinite(value)
            elif kind_of is int:
                ok = abs(value) <= 1.7976931348623157e308
            else:
                return _type_error(value, t, struct, path)
            return None if ok else _type_error(value, t, struct, path, literal=True)
        return check_float
    low, high = INT_RANGES[kind]

    def check_int(value: Any, struct: str | None, path: Any) -> str | None:
        if value is None:
            return None
        kind_of = type(value)
        if kind_of is int:
            return None if low <= value <= high else _type_error(value, t, struct, path,
                                                                 literal=True)
        if kind_of is float:
            return _type_error(value, t, struct, path, literal=True)
        return _type_error(value, t, struct, path)
    return check_int


def _describe(value: Any, *, literal: bool = False) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if literal:
        return f"number {_number(value)}"
    return "number"


def _number(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    text = repr(value)
    return text[:-2] if text.endswith(".0") else text


def _type_error(value: Any, t: GoType, struct: str | None, path: Any, *,
                literal: bool = False) -> str:
    what = _describe(value, literal=literal)
    if struct is None:
        return f"json: cannot unmarshal {what} into Go value of type {t.name}"
    names: list[str] = []
    while path:
        path, name = path
        names.append(name)
    return (f"json: cannot unmarshal {what} into Go struct field {struct}."
            f"{'.'.join(reversed(names))} of type {t.name}")


# --- base64 ----------------------------------------------------------------------------------

_ALPHABET = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES = frozenset(b"\r\n")


def decode_base64(text: str) -> bytes:
    """Go's ``base64.StdEncoding.DecodeString``: ``\\r`` and ``\\n`` anywhere are skipped,
    padding is required. ``ValueError("illegal base64 data at input byte N")`` otherwise,
    ``N`` counted in the UTF-8 bytes of ``text`` as Go counts it."""
    src = text.encode("utf-8", "surrogatepass")
    kept = bytearray()
    i = 0
    n = len(src)
    while i < n:
        # one quantum of four characters (newlines skipped)
        j = 0
        quantum = bytearray()
        while j < 4:
            if i == n:
                if j == 0:
                    return _finish(kept)
                raise _corrupt(i - j)
            c = src[i]
            i += 1
            if c in _NEWLINES:
                continue
            if c in _ALPHABET:
                quantum.append(c)
                j += 1
                continue
            if c != ord("="):
                raise _corrupt(i - 1)
            # padding: only after two or three characters of the quantum
            if j in (0, 1):
                raise _corrupt(i - 1)
            if j == 2:
                while i < n and src[i] in _NEWLINES:
                    i += 1
                if i == n:
                    raise _corrupt(n)
                if src[i] != ord("="):
                    raise _corrupt(i - 1)
                i += 1
            while i < n and src[i] in _NEWLINES:
                i += 1
            if i < n:
                raise _corrupt(i)
            kept += quantum + b"=" * (4 - j)
            return _finish(kept)
        kept += quantum
    return _finish(kept)


def _finish(data: bytearray) -> bytes:
    # every quantum is complete and well padded here; Go ignores non-zero trailing bits
    try:
        return binascii.a2b_base64(bytes(data))
    except binascii.Error as e:  # pragma: no cover - excluded by the checks above
        raise ValueError(f"illegal base64 data: {e}") from None


def _corrupt(offset: int) -> ValueError:
    return ValueError(f"illegal base64 data at input byte {offset}")


def canonical_base64(text: str) -> str:
    """The standard base64 of what ``text`` decodes to (``ValueError`` as
    :func:`decode_base64`): the form Kubernetes stores and answers."""
    return binascii.b2a_base64(decode_base64(text), newline=False).decode("ascii")


# --- time --------------------------------------------------------------------------------------

# (layout element, pattern) in the order Go's parser meets them
_TIME_STEPS: tuple[tuple[str, regexp.Regexp], ...] = tuple(
    (elem, regexp.Regexp(pattern)) for elem, pattern in (
        ("2006", r"\d{4}"), ("-", "-"), ("01", r"\d{2}"), ("-", "-"), ("02", r"\d{2}"),
        ("T", "T"), ("15", r"\d{2}"), (":", ":"), ("04", r"\d{2}"), (":", ":"),
        ("05", r"\d{2}"), ("", r"(?:[.,]\d+)?"), ("Z07:00", r"(?:Z|[+-]\d{2}:\d{2})"))
)
_RANGES = (("month", 2, 1, 12), ("day", 4, 1, 31), ("hour", 6, 0, 23), ("minute", 8, 0, 59),
           ("second", 10, 0, 59))


_TIME_FAST = regexp.Regexp(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):"
                           r"[0-5]\d:[0-5]\d(?:[.,]\d+)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)")


def _plain_utc_time(text: str) -> bool:
    """Whether ``text`` is ``YYYY-MM-DDTHH:MM:SSZ`` with every field in its range but the
    day's fit in its month: the form the server writes, and what :data:`_TIME_FAST` accepts
    of that length, decided without a call into RE2 (whose every call lets go of the GIL,
    and waits for it again behind the storage thread)."""
    return (len(text) == 20 and text.isascii() and text[4] == "-" and text[7] == "-"
            and text[10] == "T" and text[13] == ":" and text[16] == ":" and text[19] == "Z"
            and (text[0:4] + text[5:7] + text[8:10] + text[11:13] + text[14:16]
                 + text[17:19]).isdigit()
            and "01" <= text[5:7] <= "12" and "01" <= text[8:10] <= "31"
            and text[11:13] <= "23" and text[14] <= "5" and text[17] <= "5")


def time_error(text: str, layout: str = RFC3339) -> str | None:
    """Why ``text`` is not an RFC 3339 time (Go's ``time.Parse`` message), or ``None``."""
    if _plain_utc_time(text) or _TIME_FAST.fullmatch(text):
        if text[8:10] <= "28" or _day_fits(text):
            return None
        return f'parsing time "{text}": day out of range'
    rest = text
    parts: list[str] = []
    for elem, pattern in _TIME_STEPS:
        match = pattern.prefix(rest)
        if match is None:
            shown = ".000000" if elem == "" else elem
            return (f'parsing time "{text}" as "{layout}": cannot parse "{rest}" as '
                    f'"{shown}"')
        parts.append(match)
        rest = rest[len(match):]
    if rest:
        return f'parsing time "{text}": extra text: "{rest}"'
    for what, index, low, high in _RANGES:
        if not low <= int(parts[index]) <= high:
            return f'parsing time "{text}": {what} out of range'
    offset = parts[-1]
    if offset != "Z" and (int(offset[1:3]) > 23 or int(offset[4:6]) > 59):
        return f'parsing time "{text}": time zone offset out of range'
    if not _day_fits(text):
        return f'parsing time "{text}": day out of range'
    return None


def _day_fits(text: str) -> bool:
    """Whether the day of a well-formed ``YYYY-MM-DD...`` exists in its month and year (Go
    checks it last: February 30th, April 31st and February 29th of a common year do not)."""
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return day <= (29 if leap else 28)
    return day <= (30 if month in (4, 6, 9, 11) else 31)
