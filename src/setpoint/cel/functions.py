"""Function declarations: what the checker resolves and what the interpreter calls.

A :class:`Function` has a name, its typed :class:`Overload` declarations (used only by the
checker) and one Python implementation that takes the evaluated arguments, receiver first for
member calls, and dispatches on their Python types. An implementation raises
:class:`~setpoint.cel.errors.NoSuchOverload` for argument types it does not accept
(what cel-go does when static checking was bypassed through ``dyn``).

``cost(args, result)`` is the runtime cost of one call in cel-go's units (1 unless the
function says otherwise); see :mod:`setpoint.cel.cost`.

A :class:`Library` is an immutable mapping of names to functions; libraries are merged with
``|`` into the environment a rule is compiled against.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from setpoint.cel.errors import CostLimitExceeded, NoSuchOverload
from setpoint.cel.objects import CelList, CelMap, Optional
from setpoint.cel.structs import StructProvider
from setpoint.cel.types import Type

CostFn = Callable[[Sequence[Any], Any], int]
Impl = Callable[..., Any]
# Called by the checker with the argument nodes; returns an error message or None. Used for
# Kubernetes' literal validators (regexes, durations, timestamps given as literals).
LiteralCheck = Callable[[Sequence[Any]], "str | None"]


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    params: tuple[Type, ...]
    result: Type
    member: bool = False


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    overloads: tuple[Overload, ...]
    impl: Impl
    cost: CostFn | None = None
    literal_check: LiteralCheck | None = None
    # When argument ``prepare_arg`` (an index into the call's arguments, receiver excluded;
    # ``None`` for the last one) is a constant, ``prepare(constant)`` may precompile it (a
    # regex), raising CELCompileError if it cannot; ``impl`` then gets the prepared value.
    prepare: Callable[[Any], Any] | None = None
    prepare_arg: int | None = None


@dataclass(frozen=True)
class Library:
    functions: Mapping[str, Function] = field(default_factory=dict)
    #: the message types ``Type{...}`` may build (none unless a library declares them)
    structs: StructProvider | None = None

    def __or__(self, other: Library) -> Library:
        merged = dict(self.functions)
        for name, fn in other.functions.items():
            if name in merged:
                old = merged[name]
                merged[name] = Function(
                    name, old.overloads + fn.overloads, _chain(old.impl, fn.impl),
                    _chain_cost(old.cost, fn.cost), old.literal_check or fn.literal_check,
                    old.prepare or fn.prepare,
                    old.prepare_arg if old.prepare is not None else fn.prepare_arg)
            else:
                merged[name] = fn
        return Library(merged, self.structs if self.structs is not None else other.structs)

    def get(self, name: str) -> Function | None:
        return self.functions.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)


def _chain(first: Impl, second: Impl) -> Impl:
    """Two implementations of one name (from two libraries): try the first, then the second."""

    def impl(*args: Any) -> Any:
        try:
            return first(*args)
        except NoSuchOverload:
            return second(*args)
    return impl


def _chain_cost(first: CostFn | None, second: CostFn | None) -> CostFn | None:
    if first is None:
        return second
    if second is None:
        return first

    def cost(args: Sequence[Any], result: Any) -> int:
        return max(first(args, result), second(args, result))
    return cost


def string_predicate(parse: Callable[[str], object],
                     error: type[Exception]) -> Callable[[Any], bool]:
    """An ``isX(string)`` function: true when ``parse`` accepts the string, false when it
    raises ``error``; any other argument type has no overload."""

    def predicate(value: Any) -> bool:
        if type(value) is not str:
            raise NoSuchOverload()
        try:
            parse(value)
        except error:
            return False
        return True

    return predicate


def library(*functions: Function) -> Library:
    return Library({f.name: f for f in functions})


def member(oid: str, params: Sequence[Type], result: Type) -> Overload:
    return Overload(oid, tuple(params), result, member=True)


def overload(oid: str, params: Sequence[Type], result: Type) -> Overload:
    return Overload(oid, tuple(params), result, member=False)


# -- sizes and costs, in cel-go's units --------------------------------------------------

STRING_TRAVERSAL_FACTOR = 0.1
REGEX_LENGTH_FACTOR = 0.25


def actual_size(value: Any) -> int:
    """cel-go's ``actualSize``: the size of strings, bytes, lists and maps, else 1."""
    if isinstance(value, str | bytes | list | dict | CelList | CelMap):
        return len(value)
    if type(value) is Optional and value.present:
        return actual_size(value.value)
    return 1


def string_cost(size: int, factor: float = 1.0) -> int:
    return math.ceil(size * factor * STRING_TRAVERSAL_FACTOR)


# No single call may build a list or string larger than this: its cost (a tenth of a unit per
# element or character at the least) would exceed the per-call limit anyway, and checking
# before building keeps one call from exhausting memory.
MAX_RESULT_ELEMENTS = 1_000_000
MAX_RESULT_CHARS = 10_000_000


def guard_size(size: int, limit: int) -> None:
    if size > limit:
        raise CostLimitExceeded()
