"""Admission expressions: the CEL environment Kubernetes gives ValidatingAdmissionPolicies.

Variables (as in Kubernetes' admission compiler):

* ``object``, ``oldObject`` — the object and the old object (``null`` on CREATE / DELETE),
  dynamically typed unless type checking gives them a schema;
* ``request`` — the ``AdmissionRequest`` (``kind``, ``resource``, ``subResource``,
  ``requestKind``, ``requestResource``, ``requestSubResource``, ``name``, ``namespace``,
  ``operation``, ``userInfo``, ``dryRun``, ``options``); selecting another field is a compile
  error;
* ``namespaceObject`` — the request's Namespace (``metadata``, ``spec``, ``status``);
* ``params`` — only when the policy has a ``paramKind``;
* ``authorizer`` — only in expressions that may use it (not in ``messageExpression``);
* ``variables`` — the policy's variables, by name, each evaluated at most once per evaluation.

What an expression must evaluate to is checked at compile time, with Kubernetes' errors:
``must evaluate to bool`` (validations, match conditions), ``must evaluate to string``
(``messageExpression``), ``must evaluate to one of [string null_type]`` (audit annotations).
A compile error's detail reads ``compilation failed: ERROR: <input>:1:6: ...``.

Invariants: compiling is pure; an evaluation is bounded by the per-call cost limit (variables
are charged to the expression that first reads them) and never mutates its inputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint.admission.authz import AUTHORIZER, AUTHZ_LIBRARY
from setpoint.cel import checker, interpreter, parser
from setpoint.cel import types as t
from setpoint.cel.errors import CELCompileError, CostLimitExceeded, EvalError
from setpoint.cel.functions import Library
from setpoint.cel.library import KUBERNETES
from setpoint.cel.objects import CelMap

#: the environment of admission expressions: Kubernetes' libraries and the authorizer's
ADMISSION_LIBRARY: Final[Library] = KUBERNETES | AUTHZ_LIBRARY

#: cost one expression may spend (Kubernetes' ``PerCallLimit``)
PER_CALL_LIMIT: Final = 1_000_000
#: cost one policy may spend on one request and binding (Kubernetes' ``RuntimeCELCostBudget``)
RUNTIME_BUDGET: Final = 10_000_000
#: longest expression accepted (Kubernetes bounds the stored field; parsing is linear)
MAX_EXPRESSION_LENGTH: Final = 5 * 1024 * 1024

_GVK: Final = t.object_type("kubernetes.GroupVersionKind",
                            {"group": t.STRING, "version": t.STRING, "kind": t.STRING})
_GVR: Final = t.object_type("kubernetes.GroupVersionResource",
                            {"group": t.STRING, "version": t.STRING, "resource": t.STRING})
_USER: Final = t.object_type("kubernetes.UserInfo", {
    "username": t.STRING, "uid": t.STRING, "groups": t.list_of(t.STRING),
    "extra": t.map_of(t.STRING, t.list_of(t.STRING))})
REQUEST: Final = t.object_type("kubernetes.AdmissionRequest", {
    "kind": _GVK, "resource": _GVR, "subResource": t.STRING, "requestKind": _GVK,
    "requestResource": _GVR, "requestSubResource": t.STRING, "name": t.STRING,
    "namespace": t.STRING, "operation": t.STRING, "userInfo": _USER, "dryRun": t.BOOL,
    "options": t.DYN})
NAMESPACE: Final = t.object_type("kubernetes.Namespace", {
    "metadata": t.DYN, "spec": t.DYN, "status": t.DYN})

BOOL_RESULT: Final = (t.BOOL,)
STRING_RESULT: Final = (t.STRING,)
AUDIT_RESULT: Final = (t.STRING, t.NULL)
ANY_RESULT: Final = ()


class CompileError(Exception):
    """An expression that does not compile; ``detail`` is Kubernetes' text."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Declarations:
    """What an expression may refer to."""

    has_params: bool = False
    has_authorizer: bool = True
    #: the policy's variables declared before this expression, with their types
    variables: Mapping[str, t.Type] | None = None
    object_type: t.Type = t.DYN
    params_type: t.Type = t.DYN

    def types(self) -> dict[str, t.Type]:
        out = {"object": self.object_type, "oldObject": self.object_type,
               "request": REQUEST, "namespaceObject": NAMESPACE}
        if self.has_params:
            out["params"] = self.params_type
        if self.has_authorizer:
            out["authorizer"] = AUTHORIZER
        if self.variables is not None:
            out["variables"] = t.object_type("kubernetes.variables", self.variables)
        return out


@dataclass(frozen=True, slots=True)
class Expression:
    source: str
    program: interpreter.Program
    type: t.Type


def _type_name(ty: t.Type) -> str:
    return str(ty)


def compile_expression(source: str, declarations: Declarations,
                       results: tuple[t.Type, ...] = BOOL_RESULT,
                       library: Library = ADMISSION_LIBRARY) -> Expression:
    """Compile ``source``; raises :class:`CompileError` with Kubernetes' detail."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise CompileError(f"compilation failed: expression is longer than "
                           f"{MAX_EXPRESSION_LENGTH} bytes")
    variables = declarations.types()
    try:
        tree = parser.parse(source)
        result, issues = checker.check(tree, library, variables)
    except CELCompileError as e:
        raise CompileError("compilation failed: " + e.detail) from None
    except RecursionError:
        raise CompileError("compilation failed: expression recursion limit exceeded") \
            from None
    if issues:
        raise CompileError("compilation failed: " + "\n".join(
            parser.format_issue(source, i.pos, i.message) for i in issues))
    if results and not any(result == r for r in results):
        if len(results) == 1:
            raise CompileError(f"must evaluate to {_type_name(results[0])}")
        raise CompileError("must evaluate to one of ["
                           + " ".join(_type_name(r) for r in results) + "]")
    try:
        program = interpreter.plan(tree, library, variables)
    except CELCompileError as e:
        raise CompileError("compilation failed: " + e.detail) from None
    except RecursionError:
        raise CompileError("compilation failed: expression recursion limit exceeded") \
            from None
    return Expression(source, program, result)


class Evaluation:
    """The inputs of one policy evaluation and the cost spent on it so far.

    ``budget`` is what is left of :data:`RUNTIME_BUDGET`; every evaluation charges it.
    """

    __slots__ = ("_activation", "budget", "variables", "vars")

    def __init__(self, inputs: dict[str, Any], variables: Mapping[str, Expression],
                 budget: int = RUNTIME_BUDGET, broken: Mapping[str, str] | None = None
                 ) -> None:
        self.vars = dict(inputs)
        self.budget = budget
        self.variables = _LazyVariables(self, variables, broken or {})
        if variables or broken:
            self.vars["variables"] = self.variables
        self._activation: interpreter.Activation | None = None

    def run(self, expression: Expression, *, with_authorizer: bool = True) -> Any:
        """The value of ``expression``; raises :class:`EvalError` (with Kubernetes' text
        ``expression '...' resulted in error: ...``) or :class:`OutOfBudget`."""
        scope = self.vars if with_authorizer else \
            {k: v for k, v in self.vars.items() if k != "authorizer"}
        activation = interpreter.Activation(scope, min(PER_CALL_LIMIT, max(self.budget, 0)))
        outer = self._activation
        self._activation = activation
        try:
            return expression.program.evaluate(activation)
        except CostLimitExceeded:
            if activation.cost > self.budget:
                raise OutOfBudget() from None
            raise EvalError(f"expression '{expression.source}' resulted in error: "
                            "operation cancelled: actual cost limit exceeded") from None
        except OutOfBudget:
            raise
        except EvalError as e:
            raise EvalError(f"expression '{expression.source}' resulted in error: {e}") \
                from None
        finally:
            self._activation = outer
            self.budget -= activation.cost
            if outer is not None:
                outer.cost += activation.cost

    def variable(self, expression: Expression) -> Any:
        """A variable's value, evaluated inside the expression that reads it."""
        outer = self._activation
        activation = interpreter.Activation(
            self.vars, max(0, (outer.limit - outer.cost) if outer is not None
                           else min(PER_CALL_LIMIT, self.budget)))
        self._activation = activation
        try:
            return expression.program.evaluate(activation)
        except EvalError as e:
            raise EvalError(f"composited variable evaluation failed: {e}") from None
        finally:
            self._activation = outer
            if outer is not None:
                outer.charge(activation.cost)


class OutOfBudget(Exception):
    """The policy's runtime cost budget ran out."""

    def __init__(self) -> None:
        super().__init__("validation failed due to running out of cost budget, no further "
                         "validation rules will be run")


class _LazyVariables(CelMap):
    """``variables``: each evaluated on first access and remembered (errors too)."""

    __slots__ = ("_broken", "_evaluation", "_expressions", "_values")

    def __init__(self, evaluation: Evaluation, expressions: Mapping[str, Expression],
                 broken: Mapping[str, str]) -> None:
        self._evaluation = evaluation
        self._expressions = dict(expressions)
        self._broken = dict(broken)
        self._values: dict[str, tuple[bool, Any]] = {}

    def find(self, key: Any) -> tuple[bool, Any]:
        if type(key) is str and key in self._broken:
            raise EvalError(f"composited variable evaluation failed: {self._broken[key]}")
        if type(key) is not str or key not in self._expressions:
            return False, None
        known = self._values.get(key)
        if known is None:
            try:
                known = (True, self._evaluation.variable(self._expressions[key]))
            except EvalError as e:
                known = (False, e)
            self._values[key] = known
        ok, value = known
        if not ok:
            raise value
        return True, value

    def __iter__(self) -> Iterator[str]:
        return iter([*self._expressions, *self._broken])

    def __len__(self) -> int:
        return len(self._expressions) + len(self._broken)
