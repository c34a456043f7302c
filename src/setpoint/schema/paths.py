"""Lazy field paths for traversals that rarely report an error.

Walking an object to check list types or embedded resources must know where it is, but builds
a :class:`~setpoint.apimachinery.fields.FieldPath` only when it reports something. A lazy path
is ``None`` (the root), a ``FieldPath`` (a given starting point), or a ``(parent, kind, name)``
tuple; :func:`resolve` turns it into the ``FieldPath`` the same ``child``/``key``/``index``
calls would have built.

Invariants: creating a lazy path is one tuple allocation; resolving is linear in its depth.
"""

from __future__ import annotations

from typing import Any, TypeAlias

from setpoint.apimachinery.fields import FieldPath

LazyPath: TypeAlias = "tuple[LazyPath, int, Any] | FieldPath | None"

CHILD = 0
KEY = 1
INDEX = 2


def child(parent: LazyPath, name: str) -> LazyPath:
    return (parent, CHILD, name)


def key(parent: LazyPath, name: str) -> LazyPath:
    return (parent, KEY, name)


def index(parent: LazyPath, i: int) -> LazyPath:
    return (parent, INDEX, i)


def resolve(path: LazyPath) -> FieldPath:
    steps: list[tuple[int, Any]] = []
    node = path
    while isinstance(node, tuple):
        parent, kind, name = node
        steps.append((kind, name))
        node = parent
    out = node if isinstance(node, FieldPath) else FieldPath()
    for kind, name in reversed(steps):
        if kind == CHILD:
            out = out.child(name)
        elif kind == KEY:
            out = out.key(name)
        else:
            out = out.index(name)
    return out
