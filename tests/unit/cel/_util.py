"""Shared by the CEL tests: compile and evaluate an expression, render outcomes."""

from __future__ import annotations

from typing import Any

from setpoint.cel import types as t
from setpoint.cel.compile import _compile_expression
from setpoint.cel.errors import CELCompileError, CostLimitExceeded, EvalError
from setpoint.cel.interpreter import Activation
from setpoint.cel.library import KUBERNETES


class Err:
    """Expect an evaluation error whose text contains ``text``."""

    def __init__(self, text: str = "") -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Err({self.text!r})"


def compile_expr(expr: str, **types: t.Type) -> Any:
    return _compile_expression(expr, types, KUBERNETES, t.DYN, "rule")[1]


def evaluate(expr: str, *, limit: int = 1_000_000, types: dict[str, t.Type] | None = None,
             **variables: Any) -> Any:
    declared = dict(types or {})
    for name in variables:
        declared.setdefault(name, t.DYN)
    program = compile_expr(expr, **declared)
    return program.evaluate(Activation(dict(variables), limit))


def cost_of(expr: str, **variables: Any) -> int:
    program = compile_expr(expr, **{name: t.DYN for name in variables})
    activation = Activation(dict(variables), 10**9)
    program.evaluate(activation)
    return activation.cost


def outcome(expr: str, **variables: Any) -> Any:
    """The value, or ``Err(text)`` for an evaluation error."""
    try:
        return evaluate(expr, **variables)
    except (EvalError, CostLimitExceeded) as e:
        return Err(str(e))


def compile_error(expr: str, **types: t.Type) -> str:
    """The first line after ``ERROR: <input>:l:c:`` of the compile error, or ``""``."""
    try:
        compile_expr(expr, **types)
    except CELCompileError as e:
        return e.detail
    return ""


def same(got: Any, want: Any) -> bool:
    """Equality that tells ``1`` from ``1.0`` and ``True`` from ``1``, deeply."""
    if isinstance(want, Err):
        return isinstance(got, Err) and want.text in got.text
    if type(got) is not type(want):
        return False
    if isinstance(want, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(want, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return bool(got == want)
