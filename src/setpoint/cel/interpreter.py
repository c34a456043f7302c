"""Turns a checked syntax tree into a tree of Python closures, and runs it with cost tracking.

:func:`plan` is done once per rule; a :class:`Program` is then evaluated any number of times,
concurrently if need be (all per-evaluation state lives in the :class:`Activation`).

Semantics that differ from plain Python and are implemented here:

* ``&&`` and ``||`` are commutative over errors: ``error || true`` is ``true`` and
  ``error && false`` is ``false``; otherwise the left error wins. ``all``/``exists`` behave
  the same way over their elements.
* A comprehension variable shadows an outer name only inside the comprehension.
* ``a.b.c()`` where ``a`` is not a variable is a call of the qualified function ``a.b.c``
  (``optional.of``, ``format.dns1123Label``, ``sets.contains`` ...).

Cost: every evaluation step adds cel-go's cost for it to ``Activation.cost``: variables and
field selections 1 (presence tests 0, a variable used as an index 0), function calls 1 or the
function's own cost, list literals 10 and map literals 30 (0 when all their entries are
constants), and the accumulator steps of each macro iteration as cel-go's expansion of the
macro performs them. The totals equal Kubernetes' cost stability expectations on the cases
in the tests, but are not guaranteed identical in general (error paths differ most). Every
loop iteration costs at least 1. ``Activation.limit`` is checked after every function call
and every loop iteration (between them, work is bounded by the size of the expression);
exceeding it raises :class:`~setpoint.cel.errors.CostLimitExceeded`, which no
operator absorbs, so no loop outlives the limit by more than one iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from setpoint.cel import ast, values
from setpoint.cel import types as t
from setpoint.cel.errors import CostLimitExceeded, EvalError, NoSuchOverload
from setpoint.cel.functions import Function, Library
from setpoint.cel.objects import (
    NONE,
    CelList,
    CelMap,
    Duration,
    Optional,
    StructValue,
    Timestamp,
    TypeValue,
    UInt,
)
from setpoint.cel.operators import (
    compare,
    find,
    index,
    is_list,
    is_map,
    optional_index,
)

LIST_CREATE_COST: Final = 10
MAP_CREATE_COST: Final = 30
#: cel-go's cost of building a message
STRUCT_CREATE_COST: Final = 40



class Activation:
    """The variables and the running cost of one evaluation."""

    __slots__ = ("cost", "limit", "vars")

    def __init__(self, variables: dict[str, Any], limit: int) -> None:
        self.vars = variables
        self.cost = 0
        self.limit = limit

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise CostLimitExceeded()


Eval = Callable[[Activation], Any]


class Program:
    """A planned expression. ``evaluate`` returns the value or raises."""

    __slots__ = ("_root",)

    def __init__(self, root: Eval) -> None:
        self._root = root

    def evaluate(self, activation: Activation) -> Any:
        try:
            return self._root(activation)
        except RecursionError:
            raise EvalError("max recursion depth exceeded") from None


def plan(node: ast.Node, functions: Library, variables: Iterable[str]) -> Program:
    return Program(_Planner(functions).plan(node, frozenset(variables)))


def qualified_name(node: ast.Node, scope: frozenset[str]) -> str | None:
    """``a.b.c`` as a dotted name when ``a`` is not a variable in scope, else ``None``."""
    parts: list[str] = []
    while isinstance(node, ast.Select) and not node.test_only and not node.optional:
        parts.append(node.field)
        node = node.operand
    if isinstance(node, ast.Ident) and node.name not in scope:
        parts.append(node.name)
        return ".".join(reversed(parts))
    return None


_MISSING: Final = object()


def _no_such_key(field: str) -> EvalError:
    return EvalError(f"no such key: {field}")


def select_field(obj: Any, field: str) -> Any:
    if type(obj) is dict:
        v = obj.get(field, _MISSING)
        if v is _MISSING:
            raise _no_such_key(field)
        return v
    if isinstance(obj, CelMap):
        found, v = obj.find(field)
        if not found:
            raise _no_such_key(field)
        return v
    if type(obj) is Optional:
        if not obj.present:
            return NONE
        return Optional.of(select_field(obj.value, field))
    raise NoSuchOverload()


def _has_field(obj: Any, field: str) -> bool:
    if type(obj) is dict:
        return field in obj
    if isinstance(obj, CelMap):
        return obj.find(field)[0]
    if type(obj) is Optional:
        return obj.present and _has_field(obj.value, field)
    raise NoSuchOverload()


def _optional_select(obj: Any, field: str) -> Optional:
    if type(obj) is Optional:
        if not obj.present:
            return NONE
        obj = obj.value
    if is_map(obj):
        found, v = find(obj, field)
        return Optional.of(v) if found else NONE
    raise NoSuchOverload()


def _iterable(value: Any) -> list[Any]:
    if type(value) is list:
        return value
    if isinstance(value, CelList):
        return list(value)
    if type(value) is dict:
        return list(value)
    if isinstance(value, CelMap):
        return list(value)
    raise EvalError(f"got '{type(value).__name__}', expected iterable type")


def _pairs(value: Any) -> list[tuple[Any, Any]]:
    if is_list(value):
        return list(enumerate(value))
    if type(value) is dict:
        return list(value.items())
    if isinstance(value, CelMap):
        return list(value.items())
    raise EvalError(f"got '{type(value).__name__}', expected iterable type")


def _map_key(k: Any) -> Any:
    if type(k) in (str, int, UInt, bool):
        return k
    raise EvalError(f"unsupported key type: {type(k).__name__}")


class _Planner:
    def __init__(self, functions: Library) -> None:
        self.functions = functions

    def plan(self, node: ast.Node, scope: frozenset[str]) -> Eval:
        if isinstance(node, ast.Literal):
            value = node.value
            return lambda a: value
        if isinstance(node, ast.Ident):
            return self.ident(node.name, scope)
        if isinstance(node, ast.Select):
            name = qualified_name(node, scope)
            if name is not None and name in t.NAMED_TYPES:
                tv = TypeValue(t.runtime_name(t.NAMED_TYPES[name]))
                return lambda a: tv
            return self.select(node, scope)
        if isinstance(node, ast.Call):
            return self.call(node, scope)
        if isinstance(node, ast.CreateList):
            return self.create_list(node, scope)
        if isinstance(node, ast.CreateMap):
            return self.create_map(node, scope)
        if isinstance(node, ast.Comprehension):
            return self.comprehension(node, scope)
        if isinstance(node, ast.CreateStruct):
            return self.create_struct(node, scope)
        raise EvalError(f"unsupported expression {type(node).__name__}")

    # -- names --------------------------------------------------------------------------

    def ident(self, name: str, scope: frozenset[str]) -> Eval:
        if name not in scope and name in t.NAMED_TYPES:
            tv = TypeValue(t.runtime_name(t.NAMED_TYPES[name]))
            return lambda a: tv

        def ident(a: Activation) -> Any:
            a.cost += 1
            try:
                return a.vars[name]
            except KeyError:
                raise EvalError(f"no such attribute(s): {name}") from None
        return ident

    def select(self, node: ast.Select, scope: frozenset[str]) -> Eval:
        operand = self.plan(node.operand, scope)
        field = node.field
        if node.test_only:
            def has(a: Activation) -> bool:
                return _has_field(operand(a), field)
            return has
        if node.optional:
            def opt_select(a: Activation) -> Any:
                obj = operand(a)
                a.cost += 1
                return _optional_select(obj, field)
            return opt_select

        prop = values.unescape(field)

        def select(a: Activation) -> Any:
            obj = operand(a)
            a.cost += 1
            tobj = type(obj)
            if tobj is values.ObjectView and prop is not None and not obj.type_meta:
                # The common case, inlined: a declared, non-null property of a schema object.
                v = obj.raw.get(prop)
                schema = obj.props.get(prop)
                if v is not None and schema is not None:
                    return values.to_cel(v, schema)
            elif tobj is dict:
                v = obj.get(field, _MISSING)
                if v is _MISSING:
                    raise _no_such_key(field)
                return v
            return select_field(obj, field)
        return select

    # -- calls --------------------------------------------------------------------------

    def call(self, node: ast.Call, scope: frozenset[str]) -> Eval:
        name = node.function
        if name == "_&&_":
            return self.logical(node, scope, short=False)
        if name == "_||_":
            return self.logical(node, scope, short=True)
        if name == "_?_:_":
            return self.conditional(node, scope)
        if name in ("_[_]", "_[?_]"):
            container = self.plan(node.args[0], scope)
            key_node = node.args[1]
            if isinstance(key_node, ast.Ident) and key_node.name in scope:
                # cel-go charges a variable used as an index as part of the qualifier.
                key = _free_ident(key_node.name)
            else:
                key = self.plan(key_node, scope)
            getter = index if name == "_[_]" else optional_index

            def index_(a: Activation) -> Any:
                c = container(a)
                k = key(a)
                a.cost += 1
                return getter(c, k)
            return index_
        target = node.target
        if target is not None:
            qualified = qualified_name(target, scope)
            if qualified is not None and f"{qualified}.{name}" in self.functions.functions:
                name, target = f"{qualified}.{name}", None
        fn = self.functions.get(name)
        if fn is None:
            def missing(a: Activation) -> Any:
                raise EvalError(f"no such overload: {name}")
            return missing
        args = [self.plan(arg, scope) for arg in node.args]
        if target is not None:
            args.insert(0, self.plan(target, scope))
        if fn.prepare is not None and node.args:
            at = len(node.args) - 1 if fn.prepare_arg is None else fn.prepare_arg
            constant = node.args[at] if at < len(node.args) else None
            if isinstance(constant, ast.Literal):
                prepared = fn.prepare(constant.value)
                args[at + (1 if target is not None else 0)] = lambda a: prepared
        fast = _FAST_BINARY.get(name)
        if fast is not None and len(args) == 2:
            return self.binary(fn, fast, args[0], args[1])
        return _generic_call(fn, args)

    def binary(self, fn: Function, fast: Callable[[Any, Any], Any], left: Eval,
               right: Eval) -> Eval:
        """Operators on two ints, floats or short strings skip dispatch and cost functions."""
        impl, cost = fn.impl, fn.cost

        def op(a: Activation) -> Any:
            try:
                lv = left(a)
                rv = right(a)
            except EvalError:
                a.cost += 1  # cel-go charges the call even when an argument failed
                raise
            tl = type(lv)
            if tl is type(rv) and (tl is int or tl is float):
                a.cost += 1
                return fast(lv, rv)
            result = impl(lv, rv)
            a.charge(cost((lv, rv), result) if cost is not None else 1)
            return result
        return op

    def logical(self, node: ast.Call, scope: frozenset[str], *, short: bool) -> Eval:
        """``||`` (``short=True``: true decides) and ``&&`` (false decides)."""
        left = self.plan(node.args[0], scope)
        right = self.plan(node.args[1], scope)
        decisive = short

        def logical(a: Activation) -> bool:
            try:
                lv = left(a)
            except EvalError as e:
                lerr: EvalError | None = e
                lv = None
            else:
                if lv is decisive:
                    return bool(decisive)
                lerr = None if type(lv) is bool else NoSuchOverload()
            try:
                rv = right(a)
            except EvalError:
                if lerr is not None:
                    raise lerr from None
                raise
            if rv is decisive:
                return bool(decisive)
            if lerr is not None:
                raise lerr
            if type(rv) is not bool:
                raise NoSuchOverload()
            return not decisive
        return logical

    def conditional(self, node: ast.Call, scope: frozenset[str]) -> Eval:
        cond, yes, no = (self.plan(arg, scope) for arg in node.args)

        def conditional(a: Activation) -> Any:
            c = cond(a)
            if c is True:
                return yes(a)
            if c is False:
                return no(a)
            raise NoSuchOverload()
        return conditional

    # -- literals -----------------------------------------------------------------------

    def create_list(self, node: ast.CreateList, scope: frozenset[str]) -> Eval:
        optional = node.optional_indices
        if not optional and all(isinstance(e, ast.Literal) for e in node.elements):
            # cel-go folds constant literals when planning: no cost at run time.
            constant = [e.value for e in node.elements if isinstance(e, ast.Literal)]
            return lambda a: list(constant)
        elements = [self.plan(e, scope) for e in node.elements]
        if not optional:
            def create(a: Activation) -> list[Any]:
                a.cost += LIST_CREATE_COST
                return [e(a) for e in elements]
            return create

        def create_optional(a: Activation) -> list[Any]:
            a.cost += LIST_CREATE_COST
            out: list[Any] = []
            for i, e in enumerate(elements):
                v = e(a)
                if i in optional:
                    if type(v) is not Optional:
                        raise EvalError(
                            f"cannot initialize optional list element from non-optional value {v}")
                    if v.present:
                        out.append(v.value)
                else:
                    out.append(v)
            return out
        return create_optional

    def create_map(self, node: ast.CreateMap, scope: frozenset[str]) -> Eval:
        if all(isinstance(e.key, ast.Literal) and isinstance(e.value, ast.Literal)
               and not e.optional for e in node.entries):
            folded = self._constant_map(node)
            if folded is not None:
                return lambda a: dict(folded)
        entries = [(self.plan(e.key, scope), self.plan(e.value, scope), e.optional)
                   for e in node.entries]

        def create(a: Activation) -> dict[Any, Any]:
            a.cost += MAP_CREATE_COST
            out: dict[Any, Any] = {}
            for key, value, optional in entries:
                k = _map_key(key(a))
                v = value(a)
                if optional:
                    if type(v) is not Optional:
                        raise EvalError(
                            f"cannot initialize optional entry '{k}' from non-optional value {v}")
                    if not v.present:
                        continue
                    v = v.value
                if find(out, k)[0]:
                    raise EvalError(f"Failed with repeated key: {k}")
                out[k] = v
            return out
        return create

    def create_struct(self, node: ast.CreateStruct, scope: frozenset[str]) -> Eval:
        type_name = node.type_name
        known = self.functions.structs is not None and \
            self.functions.structs(type_name) is not None
        entries = [(name, self.plan(value, scope), optional)
                   for name, value, optional in node.fields]

        def create(a: Activation) -> StructValue:
            if not known:
                raise EvalError(f"unknown type: {type_name}")
            a.cost += STRUCT_CREATE_COST
            out: dict[str, Any] = {}
            for name, value, optional in entries:
                v = value(a)
                if optional:
                    if type(v) is not Optional:
                        raise EvalError(
                            f"cannot initialize optional entry '{name}' from non-optional "
                            f"value {v}")
                    if not v.present:
                        continue
                    v = v.value
                out[name] = v
            return StructValue(type_name, out)
        return create

    @staticmethod
    def _constant_map(node: ast.CreateMap) -> dict[Any, Any] | None:
        out: dict[Any, Any] = {}
        for e in node.entries:
            if not isinstance(e.key, ast.Literal) or not isinstance(e.value, ast.Literal):
                return None
            k = e.key.value
            if type(k) not in (str, int, UInt, bool) or find(out, k)[0]:
                return None  # left to fail at run time, with cel-go's message
            out[k] = e.value.value
        return out

    # -- comprehensions -----------------------------------------------------------------

    def comprehension(self, node: ast.Comprehension, scope: frozenset[str]) -> Eval:
        rng = self.plan(node.range, scope)
        inner = scope | {node.var} | ({node.var2} if node.var2 else set())
        step = self.plan(node.step, inner)
        guard = self.plan(node.guard, inner) if node.guard is not None else None
        kind = node.kind
        var, var2 = node.var, node.var2
        if kind in (ast.Kind.OPT_MAP, ast.Kind.OPT_FLAT_MAP):
            return _optional_map(rng, step, var, flat=kind is ast.Kind.OPT_FLAT_MAP)
        body = _BODIES[kind]

        def comprehension(a: Activation) -> Any:
            r = rng(a)
            items: list[Any] = _pairs(r) if var2 is not None else _iterable(r)
            vs = a.vars
            saved = (vs.get(var, _MISSING), vs.get(var2, _MISSING) if var2 else _MISSING)
            try:
                return body(a, items, var, var2, step, guard, r)
            finally:
                for name, old in ((var, saved[0]), (var2, saved[1])):
                    if name is None:
                        continue
                    if old is _MISSING:
                        vs.pop(name, None)
                    else:
                        vs[name] = old
        return comprehension


def _free_ident(name: str) -> Eval:
    def ident(a: Activation) -> Any:
        try:
            return a.vars[name]
        except KeyError:
            raise EvalError(f"no such attribute(s): {name}") from None
    return ident


def _generic_call(fn: Function, args: list[Eval]) -> Eval:
    impl, cost = fn.impl, fn.cost
    if len(args) == 1:
        (arg0,) = args

        def call1(a: Activation) -> Any:
            try:
                v = arg0(a)
            except EvalError:
                a.cost += 1
                raise
            result = impl(v)
            a.charge(cost((v,), result) if cost is not None else 1)
            return result
        return call1

    def call(a: Activation) -> Any:
        try:
            values = [arg(a) for arg in args]
        except EvalError:
            a.cost += 1
            raise
        result = impl(*values)
        a.charge(cost(values, result) if cost is not None else 1)
        return result
    return call


def _compare_fast(op: Callable[[int], bool]) -> Callable[[Any, Any], Any]:
    return lambda x, y: op((x > y) - (x < y)) if x == x and y == y else op(compare(x, y))


_FAST_BINARY: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "_==_": lambda x, y: x == y,
    "_!=_": lambda x, y: x != y,
    "_<_": _compare_fast(lambda c: c < 0),
    "_<=_": _compare_fast(lambda c: c <= 0),
    "_>_": _compare_fast(lambda c: c > 0),
    "_>=_": _compare_fast(lambda c: c >= 0),
}


def _bind(a: Activation, var: str, var2: str | None, item: Any) -> None:
    if var2 is None:
        a.vars[var] = item
    else:
        a.vars[var], a.vars[var2] = item


def _tick(a: Activation, since: int) -> None:
    """End of one iteration: charge at least one unit (so that even a constant predicate
    bounds a loop), then enforce the limit."""
    if a.cost == since:
        a.cost += 1
    if a.cost > a.limit:
        raise CostLimitExceeded()


Body = Callable[[Activation, list[Any], str, "str | None", Eval, "Eval | None", Any], Any]

# The costs below reproduce cel-go's expansion of each macro into a fold (accumulator reads,
# loop-condition calls, list and map insertions), as measured by Kubernetes' cost tests.


def _quantify(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval, *,
              stop_on: bool, step_cost: int) -> bool:
    """``all`` (stops on False) and ``exists`` (stops on True), as cel-go folds them.

    An error or a non-bool result is held back: a later element that decides the answer
    wins over it, as in cel-go; otherwise the first error is raised at the end.
    """
    err: EvalError | None = None
    last = len(items) - 1
    variables = a.vars
    for i, item in enumerate(items):
        a.cost += step_cost
        if var2 is None:
            variables[var] = item
        else:
            variables[var], variables[var2] = item
        try:
            v = step(a)
        except EvalError as e:
            err = err or e
            v = None
        if a.cost > a.limit:
            raise CostLimitExceeded()
        if v is stop_on:
            # cel-go checks the loop condition once more when elements remain.
            a.cost += step_cost if i < last else 1
            return bool(stop_on)
        if v is not (not stop_on) and err is None:
            err = NoSuchOverload()
    a.cost += 1
    if err is not None:
        raise err
    return not stop_on


def _all(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
         guard: Eval | None, rng: Any) -> Any:
    return _quantify(a, items, var, var2, step, stop_on=False, step_cost=3)


def _exists(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
            guard: Eval | None, rng: Any) -> Any:
    return _quantify(a, items, var, var2, step, stop_on=True, step_cost=4)


def _exists_one(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
                guard: Eval | None, rng: Any) -> Any:
    count = 0
    for item in items:
        since = a.cost
        _bind(a, var, var2, item)
        v = step(a)
        if v is True:
            count += 1
            a.cost += 2
        elif v is not False:
            raise NoSuchOverload()
        _tick(a, since)
    a.cost += 2
    return count == 1


def _keep(a: Activation, guard: Eval | None) -> bool:
    if guard is None:
        return True
    g = guard(a)
    if g is True:
        return True
    if g is False:
        return False
    raise NoSuchOverload()


def _map(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
         guard: Eval | None, rng: Any) -> Any:
    out: list[Any] = []
    for item in items:
        since = a.cost
        _bind(a, var, var2, item)
        if _keep(a, guard):
            a.cost += LIST_CREATE_COST + 2
            out.append(step(a))
        _tick(a, since)
    a.cost += 1
    return out


def _filter(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
            guard: Eval | None, rng: Any) -> Any:
    out: list[Any] = []
    for item in items:
        since = a.cost
        _bind(a, var, var2, item)
        v = step(a)
        if v is True:
            a.cost += LIST_CREATE_COST + 3
            out.append(item)
        elif v is not False:
            raise NoSuchOverload()
        _tick(a, since)
    a.cost += 1
    return out


def _transform_map(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
                   guard: Eval | None, rng: Any, *, entry: bool = False) -> Any:
    out: dict[Any, Any] = {}
    for item in items:
        since = a.cost
        _bind(a, var, var2, item)
        if _keep(a, guard):
            a.cost += 2 if entry else 3
            v = step(a)
            if entry:
                if not is_map(v):
                    raise NoSuchOverload()
                for k in v:
                    k = _map_key(k)
                    if find(out, k)[0]:
                        raise EvalError(f"insert failed: key {k} already exists")
                    out[k] = find(v, k)[1]
            else:
                out[_map_key(item[0])] = v
        _tick(a, since)
    a.cost += 1
    return out


def _transform_map_entry(a: Activation, items: list[Any], var: str, var2: str | None,
                         step: Eval, guard: Eval | None, rng: Any) -> Any:
    return _transform_map(a, items, var, var2, step, guard, rng, entry=True)


def _sort_by(a: Activation, items: list[Any], var: str, var2: str | None, step: Eval,
             guard: Eval | None, rng: Any) -> Any:
    keyed: list[tuple[Any, Any]] = []
    for item in items:
        since = a.cost
        a.cost += LIST_CREATE_COST + 2
        _bind(a, var, var2, item)
        keyed.append((step(a), item))
        _tick(a, since)
    key_types = {type(k) for k, _ in keyed}
    if len(key_types) > 1:
        raise EvalError("list elements must have the same type")
    if key_types and key_types.pop() not in (int, UInt, float, bool, str, bytes,
                                              Timestamp, Duration):
        raise EvalError("list elements must be comparable")
    a.charge(len(keyed) * max(1, len(keyed).bit_length()))
    return [item for _, item in sorted(keyed, key=lambda pair: pair[0])]


_BODIES: Final[dict[ast.Kind, Body]] = {
    ast.Kind.ALL: _all,
    ast.Kind.EXISTS: _exists,
    ast.Kind.EXISTS_ONE: _exists_one,
    ast.Kind.MAP: _map,
    ast.Kind.TRANSFORM_LIST: _map,
    ast.Kind.FILTER: _filter,
    ast.Kind.TRANSFORM_MAP: _transform_map,
    ast.Kind.TRANSFORM_MAP_ENTRY: _transform_map_entry,
    ast.Kind.SORT_BY: _sort_by,
}


def _optional_map(rng: Eval, step: Eval, var: str, *, flat: bool) -> Eval:
    def optional_map(a: Activation) -> Any:
        opt = rng(a)
        if type(opt) is not Optional:
            raise NoSuchOverload()
        if not opt.present:
            return NONE
        vs = a.vars
        saved = vs.get(var, _MISSING)
        vs[var] = opt.value
        try:
            v = step(a)
        finally:
            if saved is _MISSING:
                vs.pop(var, None)
            else:
                vs[var] = saved
        if flat:
            if type(v) is not Optional:
                raise NoSuchOverload()
            return v
        return Optional.of(v)
    return optional_map
