"""The syntax tree of a parsed CEL expression.

Nodes are immutable. Operators are :class:`Call` nodes named as cel-go names them (``_+_``,
``_&&_``, ``!_``, ``_?_:_``, ``@in``, ``_[_]``), so messages about them read as Kubernetes'
do. Macros (``has``, ``all``, ``exists``, ``map`` ...) are expanded by the parser into
:class:`Select` with ``test_only`` and :class:`Comprehension` nodes; nothing later in the
pipeline sees a macro as a call.

Every node carries ``pos``, the offset of its first character in the source, used for the
``<input>:line:column`` of compile errors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Node:
    pos: int


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """A constant: ``int``, ``UInt``, ``float``, ``str``, ``bytes``, ``bool`` or ``None``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Ident(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Select(Node):
    """``operand.field``; ``test_only`` for ``has(...)``; ``optional`` for ``operand.?field``."""

    operand: Node
    field: str
    test_only: bool = False
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A global call (``target is None``) or a member call ``target.function(args)``."""

    function: str
    args: tuple[Node, ...]
    target: Node | None = None


@dataclass(frozen=True, slots=True)
class CreateList(Node):
    elements: tuple[Node, ...]
    optional_indices: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class MapEntry:
    key: Node
    value: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class CreateMap(Node):
    entries: tuple[MapEntry, ...]


@dataclass(frozen=True, slots=True)
class CreateStruct(Node):
    """``Type{field: value}``: a message of a type the library declares
    (:mod:`setpoint.cel.structs`); without one the checker rejects it."""

    type_name: str
    fields: tuple[tuple[str, Node, bool], ...]


class Kind(enum.Enum):
    """What a comprehension computes; one kind per macro."""

    ALL = "all"
    EXISTS = "exists"
    EXISTS_ONE = "exists_one"
    MAP = "map"
    FILTER = "filter"
    TRANSFORM_LIST = "transformList"
    TRANSFORM_MAP = "transformMap"
    TRANSFORM_MAP_ENTRY = "transformMapEntry"
    OPT_MAP = "optMap"
    OPT_FLAT_MAP = "optFlatMap"
    SORT_BY = "sortBy"


@dataclass(frozen=True, slots=True)
class Comprehension(Node):
    """A macro over ``range``, binding ``var`` (and ``var2`` for the two-variable forms).

    ``step`` is the predicate (all/exists/exists_one/filter) or the transform (map and the
    transform* forms); ``guard`` is the optional filter of ``map(x, guard, step)`` and of the
    four-argument transforms.
    """

    kind: Kind
    var: str
    range: Node
    step: Node
    var2: str | None = None
    guard: Node | None = None


def children(node: Node) -> list[Node]:
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, CreateList):
        return list(node.elements)
    if isinstance(node, CreateMap):
        return [n for e in node.entries for n in (e.key, e.value)]
    if isinstance(node, CreateStruct):
        return [v for _, v, _ in node.fields]
    if isinstance(node, Comprehension):
        return [n for n in (node.range, node.guard, node.step) if n is not None]
    return []


def references(node: Node, name: str) -> bool:
    """Whether a free identifier ``name`` occurs (not shadowed by a comprehension variable)."""
    if isinstance(node, Ident):
        return node.name == name
    if isinstance(node, Comprehension):
        if references(node.range, name):
            return True
        if name in (node.var, node.var2):
            return False
        return any(references(n, name) for n in (node.guard, node.step) if n is not None)
    return any(references(c, name) for c in children(node))
