"""CEL's operators on runtime values: equality, ordering, arithmetic, indexing, membership.

Semantics follow cel-go as configured by Kubernetes: heterogeneous equality (``1 == 1.0``
is true, ``1 == 'a'`` is false), cross-type numeric ordering (``1 < 1.5``), no cross-type
arithmetic (``1 + 1.0`` is an error), int64/uint64 overflow errors, truncated division.
Lists with Kubernetes' ``set`` or ``map`` list type compare and concatenate by their
elements' identity, not position. Every function returns a value or raises
:class:`~setpoint.cel.errors.EvalError` (``NoSuchOverload`` for types it does not take).
"""

from __future__ import annotations

import math
from typing import Any, Final

from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.objects import (
    INT64_MIN,
    NONE,
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

_NUMERIC: Final = (int, UInt, float)


def is_list(v: Any) -> bool:
    return type(v) is list or isinstance(v, CelList)


def is_map(v: Any) -> bool:
    return type(v) is dict or isinstance(v, CelMap)


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
    if type(key) is bool:
        return "true" if key else "false"
    return str(int(key)) if isinstance(key, int) else repr(key)


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
