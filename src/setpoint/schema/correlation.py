"""Correlation of list-map items between a new and an old object (for ratcheting).

apiextensions' ``CorrelatedObject`` pairs a new value with its old counterpart: map entries by
key, and items of an ``x-kubernetes-list-type: map`` list by their
``x-kubernetes-list-map-keys`` values (the first old item with a key wins). Items of any other
list are never correlated. Keys compare as Go interface values (``1`` and ``1.0`` differ; with
several key fields, floats compare by their ``%f`` rendering).

Invariants: pure functions; :data:`NO_MATCH` marks "no correlated old value" (``None`` is a
valid old value).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from setpoint.apimachinery import govalues
from setpoint.schema.structural import Node

_I64_MIN = govalues.INT64_MIN
_I64_MAX = govalues.INT64_MAX

class _NoMatch:
    __slots__ = ()


NO_MATCH: Any = _NoMatch()
KeyFn = Callable[[Mapping[str, Any]], Any]


def _scalar_key(v: Any) -> Any:
    t = type(v)
    if t is str or t is bool:
        return (t.__name__, v)
    if t is int:
        return ("int", v) if _I64_MIN <= v <= _I64_MAX else ("float", float(v))
    if t is float:
        return ("float", v)
    return None


def list_key_fn(node: Node) -> KeyFn | None:
    """The map-list key of an item (``None`` = not keyable), or ``None`` for other lists."""
    if node.type != "array" or node.list_type != "map" or not node.list_map_keys:
        return None
    keys = node.list_map_keys
    if len(keys) == 1:
        key = keys[0]

        def single(item: Mapping[str, Any]) -> Any:
            if key not in item:
                return None
            return _scalar_key(item[key])

        return single

    def multi(item: Mapping[str, Any]) -> Any:
        parts = []
        for key in keys:
            if key not in item:
                return None
            v = item[key]
            t = type(v)
            if t is float or (t is int and not (_I64_MIN <= v <= _I64_MAX)):
                parts.append(("f", f"{float(v):f}"))
            elif t is int or t is str or t is bool:
                parts.append((t.__name__, v))
            else:
                return None
        return tuple(parts)

    return multi


def index_list(old: Any, key_fn: KeyFn) -> dict[Any, Any]:
    index: dict[Any, Any] = {}
    if type(old) is not list:
        return index
    for item in old:
        if type(item) is dict:
            k = key_fn(item)
            if k is not None and k not in index:
                index[k] = item
    return index


def correlate(value: Any, index: dict[Any, Any] | None, key_fn: KeyFn | None) -> Any:
    if index is None or key_fn is None or type(value) is not dict:
        return NO_MATCH
    k = key_fn(value)
    if k is None:
        return NO_MATCH
    return index.get(k, NO_MATCH)
