"""Uniqueness of ``x-kubernetes-list-type: set`` and ``map`` lists: apiextensions' ``listtype``.

* ``set``: every element must be unique. Scalars compare as Go interface values (``1`` and
  ``1.0`` differ), objects and lists by their JSON encoding. Each repeated value is reported
  once, at the index of its second occurrence: ``spec.tags[2]: Duplicate value: "a"``.
* ``map``: elements must be objects (or null) and unique by their ``x-kubernetes-list-map-keys``
  values; a missing key counts as its own value. The duplicate value reported is the map of
  the key fields (``{"port": 80}``), or an empty map for an element without the key.

Invariants: only subtrees whose schema contains such a list are visited; paths use
:class:`~setpoint.apimachinery.fields.FieldPath` semantics (``Key`` for map entries, ``Index``
for items), as upstream does, built lazily (:mod:`setpoint.schema.paths`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from setpoint.apimachinery import fields, govalues
from setpoint.apimachinery.fields import FieldError
from setpoint.schema import paths
from setpoint.schema.paths import LazyPath
from setpoint.schema.structural import Node

CheckFn = Callable[[Any, LazyPath, list[FieldError]], None]

_UNSPECIFIED = ("unspecified",)


def _has_list_types(node: Node | None) -> bool:
    if node is None:
        return False
    if node.list_type in ("set", "map"):
        return True
    if node.properties and any(_has_list_types(c) for c in node.properties.values()):
        return True
    return _has_list_types(node.additional_schema) or _has_list_types(node.items)


def _set_key(value: Any) -> Any:
    k = govalues.kind_of(value)
    if k in (govalues.MAP, govalues.SLICE):
        return ("json", govalues.to_json(value))
    if k == govalues.FLOAT:
        f = float(value)
        return ("float", f) if f == f else ("nan", id(value))
    return (k, value)


def duplicate_indices(values: list[Any]) -> list[int]:
    """Indices of second occurrences, as ``validateListSet`` returns them."""
    if len(values) <= 1:
        return []
    seen: dict[Any, int] = {}
    out: list[int] = []
    for i, v in enumerate(values):
        key = v if type(v) is tuple and v == _UNSPECIFIED else _set_key(v)
        times = seen.get(key, 0)
        if times == 1:
            out.append(i)
        seen[key] = times + 1
    return out


def compile_list_checker(node: Node | None) -> CheckFn | None:
    """The checker for an object schema, or ``None`` if nothing under it needs one."""
    if node is None or not _has_list_types(node):
        return None
    return _object(node)


def _object(node: Node) -> CheckFn:
    props: dict[str, CheckFn] = {}
    if node.properties:
        for k, child in node.properties.items():
            if _has_list_types(child):
                props[k] = _value(child)
    ap = node.additional_schema
    add = _value(ap) if ap is not None and _has_list_types(ap) else None

    def check(value: Any, path: LazyPath, errs: list[FieldError]) -> None:
        if type(value) is not dict:
            return
        if add is not None:
            for k, v in value.items():
                add(v, (path, paths.KEY, k), errs)
        for k, f in props.items():
            if k in value:
                f(value[k], (path, paths.CHILD, k), errs)

    return check


def _value(node: Node) -> CheckFn:
    obj = _object(node)
    items = _value(node.items) if node.items is not None and _has_list_types(node.items) else None
    list_type = node.list_type
    keys = node.list_map_keys

    def check(value: Any, path: LazyPath, errs: list[FieldError]) -> None:
        t = type(value)
        if t is dict:
            obj(value, path, errs)
            return
        if t is not list:
            return
        if list_type == "set":
            dups = duplicate_indices(value)
            if dups:
                base = paths.resolve(path)
                errs.extend(fields.duplicate(base.index(i), value[i]) for i in dups)
        elif list_type == "map":
            errs.extend(_check_map(value, keys, path))
        if items is not None:
            for i, v in enumerate(value):
                items(v, (path, paths.INDEX, i), errs)

    return check


def _check_map(value: list[Any], keys: tuple[str, ...], lazy: LazyPath) -> list[FieldError]:
    for i, x in enumerate(value):
        if x is not None and type(x) is not dict:
            return [fields.invalid(paths.resolve(lazy).index(i), x,
                                   "must be an object for an array of list-type map")]
    if len(value) <= 1:
        return []
    if len(keys) == 1:
        key = keys[0]
        vals: list[Any] = []
        for x in value:
            if x is None or key not in x:
                vals.append(_UNSPECIFIED)
            else:
                vals.append(x[key])
        out = []
        for i in duplicate_indices(vals):
            shown = {} if vals[i] is _UNSPECIFIED else {key: vals[i]}
            out.append(fields.duplicate(paths.resolve(lazy).index(i), shown))
        return out
    composite: list[Any] = []
    for x in value:
        entry: dict[str, Any] = {}
        if x is not None:
            for k in keys:
                if k in x:
                    entry[k] = x[k]
        composite.append(entry)
    return [fields.duplicate(paths.resolve(lazy).index(i), composite[i])
            for i in duplicate_indices(composite)]
