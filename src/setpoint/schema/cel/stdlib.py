"""CEL's standard definitions: equality, ordering, arithmetic, conversions, strings, time.

Semantics follow cel-go as configured by Kubernetes: heterogeneous equality (``1 == 1.0``
is true, ``1 == 'a'`` is false), cross-type numeric ordering (``1 < 1.5``), no cross-type
arithmetic (``1 + 1.0`` is an error), int64/uint64 overflow errors, truncated division,
``size`` of strings in code points, RFC 3339 timestamps with nanoseconds.

The helpers :func:`equals`, :func:`compare`, :func:`add`, :func:`index` are also used by the
interpreter and the libraries; every function raises
:class:`~setpoint.schema.cel.errors.EvalError` (or ``NoSuchOverload``) and returns a value.

Regular expressions are RE2 (Go's ``regexp``). Patterns are first checked with
:mod:`setpoint.schema.regex`, so an invalid one fails with Go's message; matching then uses
Google's RE2 through the ``google-re2`` package when it is installed (exact semantics, linear
time). Without it, patterns are translated to Python's ``re``, which backtracks: a pattern
such as ``(a+)+$`` can then take exponential time, and the cost limit cannot interrupt it.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from setpoint.schema import regex
from setpoint.schema.cel import types as t
from setpoint.schema.cel.errors import EvalError, NoSuchOverload
from setpoint.schema.cel.functions import (
    REGEX_LENGTH_FACTOR,
    Function,
    Library,
    actual_size,
    library,
    member,
    overload,
    string_cost,
)
from setpoint.schema.cel.objects import (
    INT64_MAX,
    INT64_MIN,
    NANOS,
    NONE,
    UINT64_MAX,
    CelList,
    CelMap,
    Duration,
    Opaque,
    Optional,
    Timestamp,
    TypedList,
    TypeValue,
    UInt,
    check_int,
    check_uint,
    type_of,
)
from setpoint.schema.cel.timevals import (
    format_duration,
    format_timestamp,
    local_fields,
    parse_duration,
    parse_timestamp,
)

_NUMERIC: Final = (int, UInt, float)


def is_list(v: Any) -> bool:
    return type(v) is list or isinstance(v, CelList)


def is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, CelMap)


def _is_number(v: Any) -> bool:
    return type(v) in _NUMERIC


# -- equality -----------------------------------------------------------------------------

def equals(a: Any, b: Any) -> bool:
    """CEL ``==``: heterogeneous, numeric across int/uint/double, deep for lists and maps."""
    ta, tb = type(a), type(b)
    if ta is tb and ta in (str, int, bool, float, bytes, UInt):
        return bool(a == b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return bool(a == b)
    if a is None or b is None:
        return a is None and b is None
    if is_list(a) and is_list(b):
        return _list_equals(a, b)
    if is_map(a) and is_map(b):
        return _map_equals(a, b)
    if ta is tb and ta in (Timestamp, Duration, TypeValue):
        return bool(a == b)
    if ta is Optional and tb is Optional:
        if a.present != b.present:
            return False
        return not a.present or equals(a.value, b.value)
    if isinstance(a, Opaque) and ta is tb:
        return a.equals(b)
    return False


def _list_equals(a: Any, b: Any) -> bool:
    if len(a) != len(b):
        return False
    for lst, other in ((a, b), (b, a)):
        if isinstance(lst, CelList) and lst.list_type == "set":
            return _set_list_equals(lst, other)
        if isinstance(lst, CelList) and lst.list_type == "map" and lst.map_keys:
            return _map_list_equals(lst, other)
    return all(equals(x, y) for x, y in zip(a, b, strict=True))


def _set_key(v: Any) -> Any:
    if type(v) in (str, int, float, bool, UInt) or v is None:
        return (type(v) is bool, v)
    if is_list(v) or is_map(v):
        raise EvalError("listSet operations are only supported on lists of scalar values")
    return (False, repr(v))


def _set_list_equals(a: CelList, b: Any) -> bool:
    mine = {_set_key(x) for x in a}
    theirs = {_set_key(x) for x in b}
    return mine == theirs


def _map_key_of(element: Any, keys: tuple[str, ...]) -> tuple[Any, ...]:
    out = []
    for k in keys:
        found, v = find(element, k) if is_map(element) else (False, None)
        out.append(_set_key(v) if found and v is not None else None)
    return tuple(out)


def _map_list_equals(a: CelList, b: Any) -> bool:
    by_key = {_map_key_of(x, a.map_keys): x for x in a}
    seen = set()
    for y in b:
        k = _map_key_of(y, a.map_keys)
        x = by_key.get(k, _ABSENT)
        if x is _ABSENT or not equals(x, y):
            return False
        seen.add(k)
    return len(seen) == len(by_key)


_ABSENT: Final = object()


def _map_equals(a: Any, b: Any) -> bool:
    if len(a) != len(b):
        return False
    for k in a:
        found_a, va = find(a, k)
        found_b, vb = find(b, k)
        if found_a != found_b:
            return False
        if found_a and not equals(va, vb):
            return False
    if isinstance(a, CelMap):
        # Unknown fields of an object count too, compared as JSON (Kubernetes' DeepEqual).
        other = dict(b.hidden()) if isinstance(b, CelMap) else {}
        for k, va in a.hidden():
            if k not in other or other[k] != va or type(other[k]) is not type(va):
                return False
    return True


# -- maps, lists and indexing --------------------------------------------------------------

def find(m: Any, key: Any) -> tuple[bool, Any]:
    """Look ``key`` up in a map, numeric keys matching across int/uint/double."""
    if type(m) is dict:
        if type(key) is str:
            if key in m:
                return True, m[key]
            return False, None
        if type(key) is bool:
            for k, v in m.items():
                if type(k) is bool and k == key:
                    return True, v
            return False, None
        if type(key) in _NUMERIC:
            if type(key) is float and not key.is_integer():
                return False, None
            for k, v in m.items():
                if type(k) in _NUMERIC and type(k) is not bool and k == key:
                    return True, v
            return False, None
        if key in m:
            return True, m[key]
        return False, None
    if isinstance(m, CelMap):
        return m.find(key)
    raise NoSuchOverload()


def _index_int(key: Any) -> int:
    tk = type(key)
    if tk is int or tk is UInt:
        return int(key)
    if tk is float and key.is_integer():
        return int(key)
    if tk is float:
        raise EvalError(f"unsupported index value {key} in list")
    raise EvalError(f"unsupported index type '{type_of(key)}' in list")


def index(container: Any, key: Any) -> Any:
    """``container[key]``."""
    if type(container) is dict or isinstance(container, CelMap):
        found, v = find(container, key)
        if not found:
            raise EvalError(f"no such key: {format_key(key)}")
        return v
    if type(container) is list:
        i = _index_int(key)
        if not 0 <= i < len(container):
            raise EvalError(f"index '{i}' out of range in list size '{len(container)}'")
        return container[i]
    if isinstance(container, CelList):
        i = _index_int(key)
        if not 0 <= i < len(container):
            raise EvalError(f"index out of bounds: {i}")
        return container[i]
    if type(container) is Optional:
        # Indexing an optional chains: none stays none, a value is indexed and re-wrapped.
        return Optional.of(index(container.value, key)) if container.present else NONE
    raise NoSuchOverload()


def optional_index(container: Any, key: Any) -> Optional:
    """``container[?key]``."""
    if type(container) is Optional:
        if not container.present:
            return NONE
        container = container.value
    if is_map(container):
        found, v = find(container, key)
        return Optional.of(v) if found else NONE
    if is_list(container):
        i = _index_int(key)
        return Optional.of(container[i]) if 0 <= i < len(container) else NONE
    raise NoSuchOverload()


def format_key(key: Any) -> str:
    if type(key) is str:
        return key
    return to_string(key)


def contains_value(container: Any, value: Any) -> bool:
    """``value in container``."""
    if is_list(container):
        return any(equals(x, value) for x in container)
    if is_map(container):
        return find(container, value)[0]
    raise NoSuchOverload()


def concat_lists(a: Any, b: Any) -> list[Any] | TypedList:
    """``a + b`` for lists; a set list unions and a map list merges by key, as Kubernetes."""
    if isinstance(a, CelList) and a.list_type == "set":
        out = list(a)
        keys = {_set_key(x) for x in out}
        for y in b:
            k = _set_key(y)
            if k not in keys:
                keys.add(k)
                out.append(y)
        return TypedList(out, "set")
    if isinstance(a, CelList) and a.list_type == "map" and a.map_keys:
        out = list(a)
        positions = {_map_key_of(x, a.map_keys): i for i, x in enumerate(out)}
        for y in b:
            k = _map_key_of(y, a.map_keys)
            if k in positions:
                out[positions[k]] = y
            else:
                positions[k] = len(out)
                out.append(y)
        return TypedList(out, "map", a.map_keys)
    return [*a, *b]


# -- ordering -----------------------------------------------------------------------------

def compare(a: Any, b: Any) -> int:
    """-1, 0 or 1; numbers compare across int/uint/double."""
    ta, tb = type(a), type(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        if (ta is float and math.isnan(a)) or (tb is float and math.isnan(b)):
            raise EvalError("NaN values cannot be ordered")
        return int((a > b) - (a < b))
    if ta is not tb:
        raise NoSuchOverload()
    if ta in (str, bytes, bool, Timestamp, Duration):
        return int((a > b) - (a < b))
    raise NoSuchOverload()


def less(a: Any, b: Any) -> bool:
    return compare(a, b) < 0


def less_equal(a: Any, b: Any) -> bool:
    return compare(a, b) <= 0


def greater(a: Any, b: Any) -> bool:
    return compare(a, b) > 0


def greater_equal(a: Any, b: Any) -> bool:
    return compare(a, b) >= 0


# -- arithmetic ---------------------------------------------------------------------------

def add(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return check_int(a + b)
    if ta is UInt and tb is UInt:
        return check_uint(a + b)
    if ta is float and tb is float:
        return a + b
    if ta is str and tb is str:
        return a + b
    if ta is bytes and tb is bytes:
        return a + b
    if is_list(a) and is_list(b):
        return concat_lists(a, b)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.nanos + b.nanos, a.offset)
    if ta is Duration and tb is Timestamp:
        return Timestamp(a.nanos + b.nanos, b.offset)
    if ta is Duration and tb is Duration:
        return Duration(a.nanos + b.nanos)
    raise NoSuchOverload()


def subtract(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return check_int(a - b)
    if ta is UInt and tb is UInt:
        return check_uint(a - b)
    if ta is float and tb is float:
        return a - b
    if ta is Timestamp and tb is Timestamp:
        return Duration(a.nanos - b.nanos)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.nanos - b.nanos, a.offset)
    if ta is Duration and tb is Duration:
        return Duration(a.nanos - b.nanos)
    raise NoSuchOverload()


def multiply(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        return check_int(a * b)
    if ta is UInt and tb is UInt:
        return check_uint(a * b)
    if ta is float and tb is float:
        return a * b
    raise NoSuchOverload()


def _truncated_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def divide(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if b == 0:
            raise EvalError("division by zero")
        return check_int(_truncated_div(a, b))
    if ta is UInt and tb is UInt:
        if b == 0:
            raise EvalError("division by zero")
        return UInt(a // b)
    if ta is float and tb is float:
        if b == 0.0:
            if a == 0.0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1.0, b)
        return a / b
    raise NoSuchOverload()


def modulo(a: Any, b: Any) -> Any:
    ta, tb = type(a), type(b)
    if ta is int and tb is int:
        if b == 0:
            raise EvalError("modulus by zero")
        if a == INT64_MIN and b == -1:
            raise EvalError("integer overflow")
        return a - b * _truncated_div(a, b)
    if ta is UInt and tb is UInt:
        if b == 0:
            raise EvalError("modulus by zero")
        return UInt(a % b)
    raise NoSuchOverload()


def negate(a: Any) -> Any:
    ta = type(a)
    if ta is int:
        return check_int(-a)
    if ta is float:
        return -a
    raise NoSuchOverload()


def logical_not(a: Any) -> bool:
    if type(a) is bool:
        return not a
    raise NoSuchOverload()


# -- conversions --------------------------------------------------------------------------

_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT_TEXT: Final = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.ASCII | re.IGNORECASE)
_BOOL_TEXT: Final = {"1": True, "t": True, "T": True, "TRUE": True, "true": True,
                     "True": True, "0": False, "f": False, "F": False, "FALSE": False,
                     "false": False, "False": False}


def to_int(v: Any) -> int:
    tv = type(v)
    if tv is int:
        return int(v)
    if tv is UInt:
        if v > INT64_MAX:
            raise EvalError("integer overflow")
        return int(v)
    if tv is float:
        if math.isnan(v) or not -9.223372036854776e18 < v < 9.223372036854776e18:
            raise EvalError("integer overflow")
        return int(v)
    if tv is str:
        if not _INT_TEXT.fullmatch(v):
            raise EvalError(f'strconv.ParseInt: parsing "{v}": invalid syntax')
        n = int(v)
        if not INT64_MIN <= n <= INT64_MAX:
            raise EvalError(f'strconv.ParseInt: parsing "{v}": value out of range')
        return n
    if tv is Timestamp:
        return int(v.nanos // NANOS)
    raise NoSuchOverload()


def to_uint(v: Any) -> UInt:
    tv = type(v)
    if tv is UInt:
        return UInt(v)
    if tv is int:
        if v < 0:
            raise EvalError("unsigned integer overflow")
        return UInt(v)
    if tv is float:
        if math.isnan(v) or not -1.0 < v < 1.8446744073709552e19:
            raise EvalError("unsigned integer overflow")
        return UInt(int(v))
    if tv is str:
        if not _INT_TEXT.fullmatch(v) or v.startswith("-"):
            raise EvalError(f'strconv.ParseUint: parsing "{v}": invalid syntax')
        n = int(v)
        if n > UINT64_MAX:
            raise EvalError(f'strconv.ParseUint: parsing "{v}": value out of range')
        return UInt(n)
    raise NoSuchOverload()


def to_double(v: Any) -> float:
    tv = type(v)
    if tv is float:
        return float(v)
    if tv is int or tv is UInt:
        return float(v)
    if tv is str:
        if not _FLOAT_TEXT.fullmatch(v):
            raise EvalError(f'strconv.ParseFloat: parsing "{v}": invalid syntax')
        return float(v)
    raise NoSuchOverload()


def format_double(d: float) -> str:
    """Go's ``strconv.FormatFloat(d, 'g', -1, 64)``, as cel-go prints doubles: the shortest
    digits that round-trip, in exponent form when the exponent is below -4 or at least 6."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == 0:
        return "-0" if math.copysign(1.0, d) < 0 else "0"
    mantissa, _, e = repr(abs(d)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    all_digits = int_part + frac
    stripped = all_digits.lstrip("0")
    point = len(int_part) + int(e or "0") - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0") or "0"
    exp = point - 1
    sign = "-" if d < 0 else ""
    if exp < -4 or exp >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return f"{sign}{digits}{'0' * (exp + 1 - len(digits))}"
    return f"{sign}{digits[:exp + 1]}.{digits[exp + 1:]}"


def to_string(v: Any) -> str:
    tv = type(v)
    if tv is str:
        return str(v)
    if tv is bool:
        return "true" if v else "false"
    if tv is int or tv is UInt:
        return str(int(v))
    if tv is float:
        return format_double(v)
    if tv is bytes:
        try:
            return str(v.decode("utf-8"))
        except UnicodeDecodeError:
            raise EvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    if tv is Timestamp:
        return format_timestamp(v)
    if tv is Duration:
        return format_duration(v)
    if tv is TypeValue:
        return str(v.name)
    if isinstance(v, Opaque):
        text = getattr(v, "cel_string", None)
        if text is not None:
            return str(text())
    raise NoSuchOverload()


def to_bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if type(v) is str:
        return v.encode("utf-8")
    raise NoSuchOverload()


def to_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str:
        if v in _BOOL_TEXT:
            return _BOOL_TEXT[v]
        raise EvalError(f'strconv.ParseBool: parsing "{v}": invalid syntax')
    raise NoSuchOverload()


def to_timestamp(v: Any) -> Timestamp:
    if type(v) is Timestamp:
        return v
    if type(v) is str:
        return parse_timestamp(v)
    if type(v) is int:
        return Timestamp(v * NANOS)
    raise NoSuchOverload()


def to_duration(v: Any) -> Duration:
    if type(v) is Duration:
        return v
    if type(v) is str:
        return parse_duration(v)
    if type(v) is int:
        return Duration(v * NANOS)
    raise NoSuchOverload()


def size(v: Any) -> int:
    if isinstance(v, str | bytes | list | dict | CelList | CelMap):
        return len(v)
    raise NoSuchOverload()


# -- strings ------------------------------------------------------------------------------

def _load_re2() -> Any:
    try:
        return importlib.import_module("re2")
    except ImportError:
        return None


# Google's RE2 bindings when installed: RE2 semantics exactly, in linear time. Without them,
# patterns are translated to Python's backtracking ``re`` (see module docstring).
_RE2: Final = _load_re2()


@dataclass(frozen=True, slots=True)
class Regex:
    """A compiled RE2 pattern; ``source`` is the pattern as written (it sizes the cost)."""

    source: str
    compiled: Any  # an ``re2`` regexp or a ``re.Pattern``: both have ``search(text, pos)``

    def search(self, text: str, pos: int = 0) -> Any:
        return self.compiled.search(text, pos)


def compile_regex(pattern: str) -> Regex:
    """Compile with Go's rules; invalid patterns fail with Go's ``error parsing regexp``."""
    tr = regex.translate(pattern)
    if tr.error is not None:
        raise EvalError(tr.error)
    if _RE2 is not None:
        try:
            return Regex(pattern, _RE2.compile(pattern))
        except _RE2.error as e:
            raise EvalError(f"error parsing regexp: {e}") from None
    compiled = regex.compile_pattern(pattern)
    if compiled is None:
        raise EvalError(f"error parsing regexp: unsupported by this implementation: `{pattern}`")
    return Regex(pattern, compiled)


def _pattern(p: Any) -> Regex:
    if type(p) is Regex:
        return p
    if type(p) is str:
        return compile_regex(p)
    raise NoSuchOverload()


def matches(s: Any, p: Any) -> bool:
    if type(s) is not str:
        raise NoSuchOverload()
    return _pattern(p).search(s) is not None


def prepare_regex(p: Any) -> Any:
    """Precompile a constant pattern; leave anything else (or a bad pattern) for run time."""
    if type(p) is str:
        try:
            return compile_regex(p)
        except EvalError:
            return p
    return p


def regex_size(p: Any) -> int:
    return len(p.source) if type(p) is Regex else actual_size(p)


def _str_args(*args: Any) -> None:
    if any(type(a) is not str for a in args):
        raise NoSuchOverload()


def contains(s: Any, sub: Any) -> bool:
    _str_args(s, sub)
    return bool(sub in s)


def starts_with(s: Any, prefix: Any) -> bool:
    _str_args(s, prefix)
    return bool(s.startswith(prefix))


def ends_with(s: Any, suffix: Any) -> bool:
    _str_args(s, suffix)
    return bool(s.endswith(suffix))


# -- time ---------------------------------------------------------------------------------

def _timestamp_getter(field: str) -> Any:
    def get(ts: Any, zone: Any = "UTC") -> int:
        if type(ts) is Duration and field in _DURATION_FIELDS and zone == "UTC":
            return _DURATION_FIELDS[field](ts)
        if type(ts) is not Timestamp or type(zone) is not str:
            raise NoSuchOverload()
        f = local_fields(ts, zone)
        return {
            "getFullYear": f.year, "getMonth": f.month - 1, "getDate": f.day,
            "getDayOfMonth": f.day - 1, "getDayOfWeek": f.weekday,
            "getDayOfYear": f.yearday - 1, "getHours": f.hour, "getMinutes": f.minute,
            "getSeconds": f.second, "getMilliseconds": f.millisecond,
        }[field]
    return get


_DURATION_FIELDS: Final = {
    "getHours": lambda d: int(d.nanos / (3600 * NANOS)),
    "getMinutes": lambda d: int(d.nanos / (60 * NANOS)),
    "getSeconds": lambda d: int(d.nanos / NANOS),
    "getMilliseconds": lambda d: int(d.nanos / 1_000_000),
}


# -- declarations -------------------------------------------------------------------------

def _eq_cost(args: Sequence[Any], result: Any) -> int:
    """cel-go charges equality by the smaller operand's size (0 for two empty strings)."""
    return string_cost(min(actual_size(args[0]), actual_size(args[1])))


def _cmp_cost(args: Sequence[Any], result: Any) -> int:
    a, b = args
    if type(a) in (str, bytes):
        return string_cost(min(actual_size(a), actual_size(b)))
    return 1


def _add_cost(args: Sequence[Any], result: Any) -> int:
    a, b = args
    if type(a) in (str, bytes):
        return string_cost(actual_size(a) + actual_size(b))
    if is_list(result):
        # cel-go charges 1; charging a tenth per element beyond ten keeps repeated
        # concatenation of large lists bounded (identical for lists of up to ten elements).
        return max(1, string_cost(len(result)))
    return 1


def _in_cost(args: Sequence[Any], result: Any) -> int:
    container = args[1]
    return actual_size(container) if is_list(container) else 1


def _matches_cost(args: Sequence[Any], result: Any) -> int:
    s, p = args
    return math.ceil((1 + actual_size(s)) * 0.1) * math.ceil(regex_size(p) * REGEX_LENGTH_FACTOR)


def _contains_cost(args: Sequence[Any], result: Any) -> int:
    return string_cost(actual_size(args[0])) * string_cost(actual_size(args[1]))


def _prefix_cost(args: Sequence[Any], result: Any) -> int:
    # Kubernetes' cost tests charge startsWith/endsWith by the prefix, not the receiver.
    return string_cost(actual_size(args[1]))


def _regex_literal_check(args: Sequence[Any]) -> str | None:
    if args and type(args[0]) is str:
        tr = regex.translate(args[0])
        if tr.error is not None:
            return "invalid matches argument"
    return None


def _eval_literal_check(name: str, fn: Any) -> Any:
    def check(args: Sequence[Any]) -> str | None:
        if args and type(args[0]) is str:
            try:
                fn(args[0])
            except EvalError:
                return f"invalid {name} argument"
        return None
    return check


_A, _B = t.A, t.B
_NUMS: Final = (t.INT, t.UINT, t.DOUBLE)


def _relational(name: str, impl: Any) -> Function:
    ovs = [overload(f"{name}_{x}", (x, x), t.BOOL) for x in t.COMPARABLE]
    ovs += [overload(f"{name}_{x}_{y}", (x, y), t.BOOL) for x in _NUMS for y in _NUMS if x != y]
    return Function(name, tuple(ovs), impl, _cmp_cost)


def _time_accessor(name: str) -> Function:
    ovs = [member(f"timestamp_{name}", (t.TIMESTAMP,), t.INT),
           member(f"timestamp_{name}_with_tz", (t.TIMESTAMP, t.STRING), t.INT)]
    if name in _DURATION_FIELDS:
        ovs.append(member(f"duration_{name}", (t.DURATION,), t.INT))
    return Function(name, tuple(ovs), _timestamp_getter(name))


def _equals_fn(a: Any, b: Any) -> bool:
    return equals(a, b)


def _not_equals_fn(a: Any, b: Any) -> bool:
    return not equals(a, b)


def _type_fn(v: Any) -> TypeValue:
    return type_of(v)


def _dyn_fn(v: Any) -> Any:
    return v


STANDARD: Final[Library] = library(
    Function("_==_", (overload("equals", (_A, _A), t.BOOL),), _equals_fn, _eq_cost),
    Function("_!=_", (overload("not_equals", (_A, _A), t.BOOL),), _not_equals_fn, _eq_cost),
    _relational("_<_", less),
    _relational("_<=_", less_equal),
    _relational("_>_", greater),
    _relational("_>=_", greater_equal),
    Function("_+_", (
        overload("add_int64", (t.INT, t.INT), t.INT),
        overload("add_uint64", (t.UINT, t.UINT), t.UINT),
        overload("add_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE),
        overload("add_string", (t.STRING, t.STRING), t.STRING),
        overload("add_bytes", (t.BYTES, t.BYTES), t.BYTES),
        overload("add_list", (t.list_of(_A), t.list_of(_A)), t.list_of(_A)),
        overload("add_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP),
        overload("add_duration_timestamp", (t.DURATION, t.TIMESTAMP), t.TIMESTAMP),
        overload("add_duration_duration", (t.DURATION, t.DURATION), t.DURATION),
    ), add, _add_cost),
    Function("_-_", (
        overload("subtract_int64", (t.INT, t.INT), t.INT),
        overload("subtract_uint64", (t.UINT, t.UINT), t.UINT),
        overload("subtract_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE),
        overload("subtract_timestamp_timestamp", (t.TIMESTAMP, t.TIMESTAMP), t.DURATION),
        overload("subtract_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP),
        overload("subtract_duration_duration", (t.DURATION, t.DURATION), t.DURATION),
    ), subtract),
    Function("_*_", tuple(overload(f"multiply_{x}", (x, x), x) for x in _NUMS), multiply),
    Function("_/_", tuple(overload(f"divide_{x}", (x, x), x) for x in _NUMS), divide),
    Function("_%_", tuple(overload(f"modulo_{x}", (x, x), x) for x in (t.INT, t.UINT)), modulo),
    Function("-_", (overload("negate_int64", (t.INT,), t.INT),
                    overload("negate_double", (t.DOUBLE,), t.DOUBLE)), negate),
    Function("!_", (overload("logical_not", (t.BOOL,), t.BOOL),), logical_not),
    Function("@in", (overload("in_list", (_A, t.list_of(_A)), t.BOOL),
                     overload("in_map", (_A, t.map_of(_A, _B)), t.BOOL)),
             lambda v, c: contains_value(c, v), _in_cost),
    Function("size", (
        overload("size_string", (t.STRING,), t.INT), member("string_size", (t.STRING,), t.INT),
        overload("size_bytes", (t.BYTES,), t.INT), member("bytes_size", (t.BYTES,), t.INT),
        overload("size_list", (t.list_of(_A),), t.INT),
        member("list_size", (t.list_of(_A),), t.INT),
        overload("size_map", (t.map_of(_A, _B),), t.INT),
        member("map_size", (t.map_of(_A, _B),), t.INT),
    ), size),
    Function("int", (overload("int64_to_int64", (t.INT,), t.INT),
                     overload("uint64_to_int64", (t.UINT,), t.INT),
                     overload("double_to_int64", (t.DOUBLE,), t.INT),
                     overload("string_to_int64", (t.STRING,), t.INT),
                     overload("timestamp_to_int64", (t.TIMESTAMP,), t.INT)), to_int),
    Function("uint", (overload("uint64_to_uint64", (t.UINT,), t.UINT),
                      overload("int64_to_uint64", (t.INT,), t.UINT),
                      overload("double_to_uint64", (t.DOUBLE,), t.UINT),
                      overload("string_to_uint64", (t.STRING,), t.UINT)), to_uint),
    Function("double", (overload("double_to_double", (t.DOUBLE,), t.DOUBLE),
                        overload("int64_to_double", (t.INT,), t.DOUBLE),
                        overload("uint64_to_double", (t.UINT,), t.DOUBLE),
                        overload("string_to_double", (t.STRING,), t.DOUBLE)), to_double),
    Function("string", (overload("string_to_string", (t.STRING,), t.STRING),
                        overload("int64_to_string", (t.INT,), t.STRING),
                        overload("uint64_to_string", (t.UINT,), t.STRING),
                        overload("double_to_string", (t.DOUBLE,), t.STRING),
                        overload("bool_to_string", (t.BOOL,), t.STRING),
                        overload("bytes_to_string", (t.BYTES,), t.STRING),
                        overload("timestamp_to_string", (t.TIMESTAMP,), t.STRING),
                        overload("duration_to_string", (t.DURATION,), t.STRING)), to_string,
             lambda args, result: string_cost(actual_size(args[0]))
             if type(args[0]) is bytes else 1),
    Function("bytes", (overload("bytes_to_bytes", (t.BYTES,), t.BYTES),
                       overload("string_to_bytes", (t.STRING,), t.BYTES)), to_bytes,
             lambda args, result: string_cost(actual_size(args[0])) if type(args[0]) is str
             else 1),
    Function("bool", (overload("bool_to_bool", (t.BOOL,), t.BOOL),
                      overload("string_to_bool", (t.STRING,), t.BOOL)), to_bool),
    Function("timestamp", (overload("timestamp_to_timestamp", (t.TIMESTAMP,), t.TIMESTAMP),
                           overload("string_to_timestamp", (t.STRING,), t.TIMESTAMP),
                           overload("int64_to_timestamp", (t.INT,), t.TIMESTAMP)),
             to_timestamp, literal_check=_eval_literal_check("timestamp", parse_timestamp)),
    Function("duration", (overload("duration_to_duration", (t.DURATION,), t.DURATION),
                          overload("string_to_duration", (t.STRING,), t.DURATION),
                          overload("int64_to_duration", (t.INT,), t.DURATION)),
             to_duration, literal_check=_eval_literal_check("duration", parse_duration)),
    Function("dyn", (overload("to_dyn", (t.DYN,), t.DYN),), _dyn_fn),
    Function("type", (overload("type", (_A,), t.type_of(_A)),), _type_fn),
    Function("matches", (overload("matches", (t.STRING, t.STRING), t.BOOL),
                         member("matches_string", (t.STRING, t.STRING), t.BOOL)),
             matches, _matches_cost, _regex_literal_check, prepare_regex),
    Function("contains", (member("contains_string", (t.STRING, t.STRING), t.BOOL),),
             contains, _contains_cost),
    Function("startsWith", (member("starts_with_string", (t.STRING, t.STRING), t.BOOL),),
             starts_with, _prefix_cost),
    Function("endsWith", (member("ends_with_string", (t.STRING, t.STRING), t.BOOL),),
             ends_with, _prefix_cost),
    *(_time_accessor(name) for name in (
        "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds")),
)
