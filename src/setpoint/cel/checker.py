"""A gradual type checker: the compile-time errors Kubernetes reports when a CRD is written.

:func:`check` walks the syntax tree with the declared variable types (``self`` typed from the
schema) and returns the expression's type and the list of issues, worded as cel-go words them:

* ``undeclared reference to 'x' (in container '')``
* ``undefined field 'x'`` (a property the schema does not declare)
* ``found no matching overload for '_+_' applied to '(int, string)'``
  (member calls print the receiver first: ``'string.(int)'``)
* ``type 'int' does not support field selection``
* ``expression of type 'int' cannot be range of a comprehension (must be list, map, or
  dynamic)``
* ``expected type 'int' but found 'string'`` (mixed list or map literals)
* ``invalid duration argument`` / ``invalid timestamp argument`` / ``invalid matches
  argument`` (bad literals, Kubernetes' AST validators)

Gradual means ``dyn`` matches anything, so a rule the checker cannot fully type is accepted
and checked at run time. Where this checker is unsure it is lenient (a list literal may mix
``dyn`` with typed elements); it does not reject a rule for a reason cel-go would not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from setpoint.cel import ast
from setpoint.cel import types as t
from setpoint.cel.functions import Library, Overload
from setpoint.cel.interpreter import qualified_name
from setpoint.cel.objects import UInt
from setpoint.cel.values import RESERVED_SYMBOLS


@dataclass(slots=True)
class Issue:
    pos: int
    message: str


@dataclass(slots=True)
class _State:
    functions: Library
    issues: list[Issue] = field(default_factory=list)

    def error(self, pos: int, message: str) -> t.Type:
        self.issues.append(Issue(pos, message))
        return t.ERROR


def check(node: ast.Node, functions: Library,
          variables: Mapping[str, t.Type]) -> tuple[t.Type, list[Issue]]:
    state = _State(functions)
    result = _check(state, node, dict(variables), in_format=False)
    return result, state.issues


def _literal_type(value: Any) -> t.Type:
    if type(value) is bool:
        return t.BOOL
    if type(value) is UInt:
        return t.UINT
    if type(value) is int:
        return t.INT
    if type(value) is float:
        return t.DOUBLE
    if type(value) is str:
        return t.STRING
    if type(value) is bytes:
        return t.BYTES
    return t.NULL


def _check(s: _State, node: ast.Node, scope: dict[str, t.Type], *, in_format: bool) -> t.Type:
    if isinstance(node, ast.Literal):
        return _literal_type(node.value)
    if isinstance(node, ast.Ident):
        if node.name in scope:
            return scope[node.name]
        if node.name in t.NAMED_TYPES:
            return t.type_of(t.NAMED_TYPES[node.name])
        return s.error(node.pos, f"undeclared reference to '{node.name}' (in container '')")
    if isinstance(node, ast.Select):
        return _select(s, node, scope, in_format=in_format)
    if isinstance(node, ast.Call):
        return _call(s, node, scope, in_format=in_format)
    if isinstance(node, ast.CreateList):
        return _create_list(s, node, scope, in_format=in_format)
    if isinstance(node, ast.CreateMap):
        return _create_map(s, node, scope, in_format=in_format)
    if isinstance(node, ast.Comprehension):
        return _comprehension(s, node, scope, in_format=in_format)
    if isinstance(node, ast.CreateStruct):
        return _create_struct(s, node, scope, in_format=in_format)
    return t.DYN


def _field_type(s: _State, pos: int, operand: t.Type, name: str) -> t.Type:
    if operand.kind == "object":
        fields = operand.fields or {}
        if name in fields:
            return fields[name]
        # Since Kubernetes 1.31 a reserved word may name its (escaped) field: self.namespace.
        if f"__{name}__" in fields and name in RESERVED_SYMBOLS:
            return fields[f"__{name}__"]
        return s.error(pos, f"undefined field '{name}'")
    if operand.kind == "map":
        return operand.params[1]
    if t.is_dyn_like(operand):
        return t.DYN
    return s.error(pos, f"type '{operand}' does not support field selection")


def _select(s: _State, node: ast.Select, scope: dict[str, t.Type], *, in_format: bool) -> t.Type:
    if not node.test_only and not node.optional:
        name = qualified_name(node, frozenset(scope))
        if name is not None and name in t.NAMED_TYPES:
            return t.type_of(t.NAMED_TYPES[name])
    operand = _check(s, node.operand, scope, in_format=in_format)
    if node.test_only:
        if operand.kind == "optional":
            operand = operand.params[0]
        _field_type(s, node.pos, operand, node.field)
        return t.BOOL
    if operand.kind == "optional":
        inner = _field_type(s, node.pos, operand.params[0], node.field)
        return t.optional_of(inner)
    field_type = _field_type(s, node.pos, operand, node.field)
    return t.optional_of(field_type) if node.optional else field_type


def _signature(args: Sequence[t.Type], member: bool) -> str:
    if member:
        return f"{args[0]}.({', '.join(str(a) for a in args[1:])})"
    return f"({', '.join(str(a) for a in args)})"


def _resolve(s: _State, pos: int, name: str, overloads: Sequence[Overload],
             args: Sequence[t.Type], member: bool) -> t.Type:
    results: list[t.Type] = []
    for ov in overloads:
        if ov.member != member or len(ov.params) != len(args):
            continue
        bindings: dict[str, t.Type] = {}
        if all(t.assignable(p, a, bindings) for p, a in zip(ov.params, args, strict=True)):
            results.append(t.substitute(ov.result, bindings))
    if not results:
        if any(a.kind == "error" for a in args):
            return t.ERROR
        return s.error(pos, f"found no matching overload for '{name}' applied to "
                            f"'{_signature(args, member)}'")
    return t.join(results)


_LOGICAL = (Overload("logical", (t.BOOL, t.BOOL), t.BOOL),)
_CONDITIONAL = (Overload("conditional", (t.BOOL, t.A, t.A), t.A),)
_INDEX = (Overload("index_list", (t.list_of(t.A), t.INT), t.A),
          Overload("index_list_uint", (t.list_of(t.A), t.UINT), t.A),
          Overload("index_map", (t.map_of(t.A, t.B), t.A), t.B))


def _call(s: _State, node: ast.Call, scope: dict[str, t.Type], *, in_format: bool) -> t.Type:
    name = node.function
    target = node.target
    if target is not None:
        qualified = qualified_name(target, frozenset(scope))
        if qualified is not None and f"{qualified}.{name}" in s.functions.functions:
            name, target = f"{qualified}.{name}", None
    inner_format = in_format or name == "format"
    arg_types = [_check(s, a, scope, in_format=inner_format) for a in node.args]
    if target is not None:
        arg_types.insert(0, _check(s, target, scope, in_format=inner_format))
    if name in ("_&&_", "_||_"):
        return _resolve(s, node.pos, name, _LOGICAL, arg_types, member=False)
    if name == "_?_:_":
        return _resolve(s, node.pos, name, _CONDITIONAL, arg_types, member=False)
    if name in ("_[_]", "_[?_]"):
        container = arg_types[0]
        optional = name == "_[?_]" or container.kind == "optional"
        if container.kind == "optional":
            container = container.params[0]
        elem = _resolve(s, node.pos, "_[_]", _INDEX, [container, arg_types[1]], member=False)
        return t.optional_of(elem) if optional else elem
    fn = s.functions.get(name)
    if fn is None:
        return s.error(node.pos, f"undeclared reference to '{name}' (in container '')")
    if fn.literal_check is not None:
        literals = [a.value if isinstance(a, ast.Literal) else None for a in node.args]
        problem = fn.literal_check(literals)
        if problem is not None:
            first = node.args[0] if node.args else node
            return s.error(first.pos, problem)
    return _resolve(s, node.pos, name, fn.overloads, arg_types, member=target is not None)


def _homogeneous(s: _State, nodes: Sequence[ast.Node], types: Sequence[t.Type],
                 in_format: bool) -> t.Type:
    """The element type of a literal; mixed element types are an error (outside ``format``)."""
    known = [(n, ty) for n, ty in zip(nodes, types, strict=True) if not t.is_dyn_like(ty)]
    if not known:
        return t.DYN
    first = known[0][1]
    for n, ty in known[1:]:
        if ty == first:
            continue
        if not in_format and not _same_shape(ty, first):
            s.error(n.pos, f"expected type '{first}' but found '{ty}'")
        return t.DYN
    return first if len(known) == len(types) else t.DYN


def _same_shape(a: t.Type, b: t.Type) -> bool:
    """Types that differ only in dyn parts (``list(dyn)`` and ``list(int)``)."""
    return t.assignable(a, b, {}) and t.assignable(b, a, {})


def _create_list(s: _State, node: ast.CreateList, scope: dict[str, t.Type], *,
                 in_format: bool) -> t.Type:
    types: list[t.Type] = []
    for i, e in enumerate(node.elements):
        ty = _check(s, e, scope, in_format=in_format)
        if i in node.optional_indices:
            ty = ty.params[0] if ty.kind == "optional" else t.DYN
        types.append(ty)
    return t.list_of(_homogeneous(s, node.elements, types, in_format))


def _create_map(s: _State, node: ast.CreateMap, scope: dict[str, t.Type], *,
                in_format: bool) -> t.Type:
    keys = [_check(s, e.key, scope, in_format=in_format) for e in node.entries]
    values: list[t.Type] = []
    for e in node.entries:
        ty = _check(s, e.value, scope, in_format=in_format)
        if e.optional:
            ty = ty.params[0] if ty.kind == "optional" else t.DYN
        values.append(ty)
    key = _homogeneous(s, [e.key for e in node.entries], keys, in_format)
    value = _homogeneous(s, [e.value for e in node.entries], values, in_format)
    return t.map_of(key, value)


def _create_struct(s: _State, node: ast.CreateStruct, scope: dict[str, t.Type], *,
                   in_format: bool) -> t.Type:
    struct = s.functions.structs(node.type_name) if s.functions.structs is not None else None
    values = [_check(s, value, scope, in_format=in_format) for _, value, _ in node.fields]
    if struct is None:
        return s.error(node.pos, f"undeclared reference to '{node.type_name}' (in container '')")
    seen: set[str] = set()
    for (name, value, optional), ty in zip(node.fields, values, strict=True):
        if name in seen:
            s.error(value.pos, f"field '{name}' is set twice")
        seen.add(name)
        expected = struct.field(name)
        if expected is None:
            s.error(value.pos, f"undefined field '{name}'")
            continue
        if optional:
            ty = ty.params[0] if ty.kind == "optional" else t.DYN
        if ty.kind != "error" and not t.assignable(expected, ty, {}):
            s.error(value.pos, f"expected type of field '{name}' is '{expected}' but provided "
                               f"type is '{ty}'")
    return struct.type


def _comprehension(s: _State, node: ast.Comprehension, scope: dict[str, t.Type], *,
                   in_format: bool) -> t.Type:
    rng = _check(s, node.range, scope, in_format=in_format)
    kind = node.kind
    if kind in (ast.Kind.OPT_MAP, ast.Kind.OPT_FLAT_MAP):
        inner = rng.params[0] if rng.kind == "optional" else t.DYN
        if rng.kind not in ("optional",) and not t.is_dyn_like(rng):
            s.error(node.pos, f"found no matching overload for '{kind.value}' applied to "
                              f"'{rng}.(dyn)'")
        body = _check(s, node.step, {**scope, node.var: inner}, in_format=in_format)
        if kind is ast.Kind.OPT_MAP:
            return t.optional_of(body)
        return body if body.kind == "optional" else t.optional_of(t.DYN)
    if rng.kind == "list":
        first, second = (t.INT, rng.params[0]) if node.var2 else (rng.params[0], t.DYN)
    elif rng.kind == "map":
        first, second = rng.params[0], rng.params[1]
    elif t.is_dyn_like(rng):
        first, second = t.DYN, t.DYN
    else:
        s.error(node.range.pos, f"expression of type '{rng}' cannot be range of a comprehension "
                                "(must be list, map, or dynamic)")
        first, second = t.DYN, t.DYN
    inner_scope = {**scope, node.var: first}
    if node.var2:
        inner_scope[node.var2] = second
    if node.guard is not None:
        g = _check(s, node.guard, inner_scope, in_format=in_format)
        _resolve(s, node.guard.pos, "_?_:_", _CONDITIONAL, [g, t.DYN, t.DYN], member=False)
    step = _check(s, node.step, inner_scope, in_format=in_format)
    if kind in (ast.Kind.ALL, ast.Kind.EXISTS, ast.Kind.EXISTS_ONE, ast.Kind.FILTER):
        op = "_||_" if kind is ast.Kind.EXISTS else "_&&_"
        if kind in (ast.Kind.EXISTS_ONE, ast.Kind.FILTER):
            _resolve(s, node.step.pos, "_?_:_", _CONDITIONAL, [step, t.DYN, t.DYN], member=False)
        else:
            _resolve(s, node.step.pos, op, _LOGICAL, [t.BOOL, step], member=False)
        if kind is ast.Kind.FILTER:
            return t.list_of(first) if rng.kind in ("list", "map") else t.LIST_DYN
        return t.BOOL
    if kind in (ast.Kind.MAP, ast.Kind.TRANSFORM_LIST):
        return t.list_of(step)
    if kind is ast.Kind.TRANSFORM_MAP:
        return t.map_of(first if rng.kind == "map" else t.INT if rng.kind == "list" else t.DYN,
                        step)
    if kind is ast.Kind.TRANSFORM_MAP_ENTRY:
        return step if step.kind == "map" else t.MAP_DYN
    if kind is ast.Kind.SORT_BY:
        return rng if rng.kind == "list" else t.LIST_DYN
    return t.DYN
