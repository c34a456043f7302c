"""Null dropping and defaulting, compiled: apiextensions' ``defaulting`` package.

:func:`compile_defaulter` returns one function doing, in Kubernetes' order:

1. ``PruneNonNullableNullsWithoutDefaults``: a ``null`` whose schema (property, or
   ``additionalProperties`` schema) is not ``nullable`` and has no ``default`` is removed from
   its object; nulls in lists stay;
2. ``Default``: a missing property, or a ``null`` non-nullable property, gets a deep copy of its
   default; then defaulting recurses into every property, ``additionalProperties`` value and
   list item that exists (a default never creates a parent). A ``null`` non-nullable map value
   or list item is replaced by its schema's default (which may itself be absent: it stays null).

Defaults are pruned once at compile time (``PruneDefaults``), so defaulting never introduces
fields pruning would remove. Subtrees without any default are skipped by step 2.

Invariants: defaults are never shared with the object (deep copies of containers), the
function mutates in place, and it never raises on values of an unexpected type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.schema import pruning
from setpoint.schema.structural import MISSING, Node

DefaultFn = Callable[[Any], None]


def _noop(value: Any) -> None:
    return None


def prune_defaults(node: Node) -> None:
    """Prune every default under ``node`` by its own schema (``defaulting.PruneDefaults``)."""
    if node.default is not MISSING and type(node.default) in (dict, list):
        copy = deep_copy(node.default)
        pruning.compile_pruner(node)(copy, "", [])
        node.default = copy
    for child in (node.properties or {}).values():
        prune_defaults(child)
    ap = node.additional_schema
    if ap is not None:
        prune_defaults(ap)
    if node.items is not None:
        prune_defaults(node.items)


def _has_defaults(node: Node | None) -> bool:
    if node is None:
        return False
    if node.default is not MISSING:
        return True
    if node.properties and any(_has_defaults(c) for c in node.properties.values()):
        return True
    return _has_defaults(node.additional_schema) or _has_defaults(node.items)


def _copier(value: Any) -> Callable[[], Any]:
    if type(value) in (dict, list):
        return lambda: deep_copy(value)
    return lambda: value


def compile_prune_nulls(node: Node | None) -> DefaultFn:
    """``PruneNonNullableNullsWithoutDefaults`` for ``node``."""
    return _prune_nulls(node) or _noop


def _prune_nulls(node: Node | None) -> DefaultFn | None:
    """The pruner, or ``None`` where it has nothing to do (no schema below ``node``)."""
    if node is None:
        return None
    ap = node.additional_schema
    if not node.properties and ap is None and node.items is None:
        return None
    drop: dict[str, bool] = {}
    recurse: dict[str, DefaultFn | None] = {}
    for k, child in (node.properties or {}).items():
        drop[k] = not child.nullable and child.default is MISSING
        recurse[k] = _prune_nulls(child)
    add_drop = ap is not None and not ap.nullable and ap.default is MISSING
    add_fn = _prune_nulls(ap)
    items = _prune_nulls(node.items)

    def prune_nulls(value: Any) -> None:
        t = type(value)
        if t is dict:
            doomed: list[str] | None = None
            for k, v in value.items():
                if v is None:
                    if drop.get(k, add_drop):
                        if doomed is None:
                            doomed = []
                        doomed.append(k)
                else:
                    tv = type(v)
                    if tv is dict or tv is list:
                        f = recurse.get(k, add_fn)
                        if f is not None:
                            f(v)
            if doomed is not None:
                for k in doomed:
                    del value[k]
        elif t is list and items is not None:
            for v in value:
                tv = type(v)
                if tv is dict or tv is list:
                    items(v)

    return prune_nulls


def compile_apply_defaults(node: Node | None) -> DefaultFn:
    """``Default`` for ``node`` (skipping subtrees without defaults)."""
    if node is None or not _has_defaults(node):
        return _noop
    with_defaults: list[tuple[str, bool, Callable[[], Any]]] = []
    recurse: dict[str, DefaultFn] = {}
    if node.properties:
        for k, child in node.properties.items():
            if child.default is not MISSING:
                with_defaults.append((k, child.nullable, _copier(child.default)))
            if _has_defaults(child):
                recurse[k] = compile_apply_defaults(child)
    ap = node.additional_schema
    add_fn: DefaultFn | None = None
    add_null: Callable[[], Any] | None = None
    if ap is not None:
        if _has_defaults(ap):
            add_fn = compile_apply_defaults(ap)
        if not ap.nullable and ap.default is not MISSING:
            add_null = _copier(ap.default)
    items_node = node.items
    items_fn: DefaultFn | None = None
    items_null: Callable[[], Any] | None = None
    if items_node is not None:
        if _has_defaults(items_node):
            items_fn = compile_apply_defaults(items_node)
        if not items_node.nullable and items_node.default is not MISSING:
            items_null = _copier(items_node.default)
    props = frozenset(node.properties or ())

    def apply(value: Any) -> None:
        t = type(value)
        if t is dict:
            for k, nullable, make in with_defaults:
                if k not in value or (value[k] is None and not nullable):
                    value[k] = make()
            if recurse:
                for k, f in recurse.items():
                    if k in value:
                        f(value[k])
            if add_fn is not None or add_null is not None:
                for k in list(value):
                    if k in props:
                        continue
                    if add_null is not None and value[k] is None:
                        value[k] = add_null()
                    if add_fn is not None:
                        add_fn(value[k])
        elif t is list:
            if items_null is not None:
                for i, v in enumerate(value):
                    if v is None:
                        value[i] = items_null()
            if items_fn is not None:
                for v in value:
                    items_fn(v)

    return apply


def compile_defaulter(node: Node | None) -> DefaultFn:
    """Both steps, in order: drop unwanted nulls, then apply defaults."""
    prune_nulls = compile_prune_nulls(node)
    apply = compile_apply_defaults(node)
    if apply is _noop:
        return prune_nulls

    def default(value: Any) -> None:
        prune_nulls(value)
        apply(value)

    return default
