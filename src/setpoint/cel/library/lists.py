"""List functions: Kubernetes' ``lists`` library, cel-go's ``ext.Lists`` (v3) and ``ext.Sets``.

Kubernetes: ``isSorted()``, ``sum()``, ``min()``, ``max()``, ``indexOf(x)``,
``lastIndexOf(x)``, ``includes(x)``. cel-go lists: ``slice(i, j)``, ``flatten([depth])``,
``lists.range(n)``, ``reverse()``, ``distinct()``, ``sort()`` (and the ``sortBy`` macro, in
the interpreter). Sets: ``sets.contains(a, b)``, ``sets.equivalent(a, b)``,
``sets.intersects(a, b)``.

``min``/``max`` of an empty list is the error ``min called on empty list``; ``sum`` of an
empty list is the zero of its schema's item type (``0.0``, ``duration('0s')``), else ``0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import (
    MAX_RESULT_ELEMENTS,
    Function,
    actual_size,
    guard_size,
    library,
    member,
    overload,
)
from setpoint.cel.objects import CelList, CelMap, Duration, Timestamp, UInt
from setpoint.cel.operators import add, compare, equals, is_list, is_map


def _items(v: Any) -> list[Any]:
    if not is_list(v):
        raise NoSuchOverload()
    return list(v)


def is_sorted(lst: Any) -> bool:
    items = _items(lst)
    return all(compare(items[i], items[i + 1]) <= 0 for i in range(len(items) - 1))


def sum_list(lst: Any) -> Any:
    items = _items(lst)
    if not items:
        return lst.element_zero() if isinstance(lst, CelList) else 0
    acc = items[0]
    if type(acc) not in (int, UInt, float, Duration):
        raise NoSuchOverload()
    for x in items[1:]:
        acc = add(acc, x)
    return acc


def _extreme(name: str, sign: int) -> Any:
    def extreme(lst: Any) -> Any:
        items = _items(lst)
        if not items:
            raise EvalError(f"{name} called on empty list")
        best = items[0]
        for x in items[1:]:
            if compare(best, x) == sign:
                best = x
        return best
    return extreme


def index_of(lst: Any, item: Any) -> int:
    for i, x in enumerate(_items(lst)):
        if equals(x, item):
            return i
    return -1


def last_index_of(lst: Any, item: Any) -> int:
    items = _items(lst)
    for i in range(len(items) - 1, -1, -1):
        if equals(items[i], item):
            return i
    return -1


def includes(target: Any, item: Any) -> bool:
    if is_list(target):
        return any(equals(x, item) for x in target)
    return equals(target, item)


def slice_list(lst: Any, start: Any, end: Any) -> list[Any]:
    items = _items(lst)
    if type(start) is not int or type(end) is not int:
        raise NoSuchOverload()
    if start < 0 or end < 0:
        raise EvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise EvalError(f"cannot slice({start}, {end}), start index must be less than or "
                        f"equal to end index")
    if end > len(items):
        raise EvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def _flat_size(items: list[Any], depth: int) -> int:
    return sum(_flat_size(list(x), depth - 1) if is_list(x) and depth > 0 else 1 for x in items)


def flatten(lst: Any, depth: Any = 1) -> list[Any]:
    items = _items(lst)
    if type(depth) is not int:
        raise NoSuchOverload()
    if depth < 0:
        raise EvalError("level must be non-negative")
    guard_size(_flat_size(items, depth), MAX_RESULT_ELEMENTS)
    out: list[Any] = []
    for x in items:
        if is_list(x) and depth > 0:
            out.extend(flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def lists_range(n: Any) -> list[int]:
    if type(n) is not int:
        raise NoSuchOverload()
    guard_size(n, MAX_RESULT_ELEMENTS)
    return list(range(n))


def reverse(lst: Any) -> list[Any]:
    return _items(lst)[::-1]


def distinct(lst: Any) -> list[Any]:
    out: list[Any] = []
    for x in _items(lst):
        if not any(equals(x, y) for y in out):
            out.append(x)
    return out


_SORTABLE: Final = (int, UInt, float, bool, str, bytes, Timestamp, Duration)


def sort_list(lst: Any) -> list[Any]:
    items = _items(lst)
    kinds = {type(x) for x in items}
    if len(kinds) > 1:
        raise EvalError("list elements must have the same type")
    if kinds and kinds.pop() not in _SORTABLE:
        raise EvalError("list elements must be comparable")
    return sorted(items)


def sets_contains(a: Any, b: Any) -> bool:
    first = _items(a)
    return all(any(equals(x, y) for x in first) for y in _items(b))


def sets_equivalent(a: Any, b: Any) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Any, b: Any) -> bool:
    first = _items(a)
    return any(any(equals(x, y) for x in first) for y in _items(b))


def traversal_cost(v: Any) -> int:
    """Kubernetes' ``traversalCost``: a tenth per string byte, one per scalar, summed."""
    if type(v) in (str, bytes):
        return int(len(v) * 0.1)
    if is_list(v):
        return sum(traversal_cost(x) for x in v)
    if is_map(v):
        total = 0
        entries = v.items() if isinstance(v, dict | CelMap) else ()
        for k, x in entries:
            total += traversal_cost(k) + traversal_cost(x)
        return total
    return 1


def _traverse_first(args: Sequence[Any], result: Any) -> int:
    return traversal_cost(args[0]) if args else 1


def _result_size(args: Sequence[Any], result: Any) -> int:
    return max(1, actual_size(result))


def _sort_cost(args: Sequence[Any], result: Any) -> int:
    n = actual_size(args[0])
    return max(1, n * max(1, n.bit_length()))


_A = t.A
_LA = t.list_of(_A)

_SUMMABLE: Final = (t.INT, t.UINT, t.DOUBLE, t.DURATION)

LISTS = library(
    Function("isSorted", tuple(member(f"list_{x}_is_sorted_bool", (t.list_of(x),), t.BOOL)
                               for x in t.COMPARABLE), is_sorted, _traverse_first),
    Function("sum", tuple(member(f"list_{x}_sum_{x}", (t.list_of(x),), x) for x in _SUMMABLE),
             sum_list, _traverse_first),
    Function("min", tuple(member(f"list_{x}_min_{x}", (t.list_of(x),), x)
                          for x in t.COMPARABLE), _extreme("min", 1), _traverse_first),
    Function("max", tuple(member(f"list_{x}_max_{x}", (t.list_of(x),), x)
                          for x in t.COMPARABLE), _extreme("max", -1), _traverse_first),
    Function("indexOf", (member("list_a_index_of_int", (_LA, _A), t.INT),), index_of,
             _traverse_first),
    Function("lastIndexOf", (member("list_a_last_index_of_int", (_LA, _A), t.INT),),
             last_index_of, _traverse_first),
    Function("includes", (member("list_includes_dyn_dyn", (t.DYN, t.DYN), t.BOOL),), includes,
             _traverse_first),
    Function("slice", (member("list_slice", (_LA, t.INT, t.INT), _LA),), slice_list,
             _result_size),
    Function("flatten", (member("list_flatten", (t.list_of(t.LIST_DYN),), t.LIST_DYN),
                         member("list_flatten_int", (t.LIST_DYN, t.INT), t.LIST_DYN)), flatten,
             _result_size),
    Function("lists.range", (overload("lists_range", (t.INT,), t.list_of(t.INT)),), lists_range,
             _result_size),
    Function("reverse", (member("list_reverse", (_LA,), _LA),), reverse, _result_size),
    Function("distinct", (member("list_distinct", (_LA,), _LA),), distinct,
             lambda args, result: max(1, actual_size(args[0]) * max(1, actual_size(result)))),
    Function("sort", tuple(member(f"list_{x}_sort", (t.list_of(x),), t.list_of(x))
                           for x in t.COMPARABLE), sort_list, _sort_cost),
    Function("sets.contains", (overload("list_sets_contains_list", (_LA, _LA), t.BOOL),),
             sets_contains,
             lambda args, result: max(1, actual_size(args[0]) * actual_size(args[1]))),
    Function("sets.equivalent", (overload("list_sets_equivalent_list", (_LA, _LA), t.BOOL),),
             sets_equivalent,
             lambda args, result: max(1, actual_size(args[0]) * actual_size(args[1]))),
    Function("sets.intersects", (overload("list_sets_intersects_list", (_LA, _LA), t.BOOL),),
             sets_intersects,
             lambda args, result: max(1, actual_size(args[0]) * actual_size(args[1]))),
)

__all__ = ["LISTS", "traversal_cost"]
