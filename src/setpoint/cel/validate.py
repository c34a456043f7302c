"""Evaluating a schema node's rules against a value: Kubernetes' ``validateExpressions``.

For each rule, in order:

* a rule that failed to compile gives ``Invalid: rule compile error: ...``;
* a transition rule (uses ``oldSelf``) is skipped when there is no old value, unless it sets
  ``optionalOldSelf`` (then ``oldSelf`` is ``optional.none()``);
* the evaluation's cost is charged to the :class:`~setpoint.cel.cost.Budget`; running
  out ends this node's validation and every later one (``budget.exhausted``);
* ``false`` (or any non-``true`` value) gives an error at the node's path, or at the path plus
  the rule's ``fieldPath``: ``Invalid`` by default, or per ``reason`` ``Forbidden``,
  ``Required`` or ``Duplicate``; the detail is the ``messageExpression``'s result, else
  ``message``, else ``failed rule: <rule>``;
* an evaluation error gives ``Invalid`` at the node's path with the error's text and the rule.

As in Kubernetes, the bad value of an ``Invalid`` or ``Duplicate`` error is the node's schema
type (``spec: Invalid value: "object": ...``, ``spec.name: Invalid value: "string": ...``),
never the data, and the root path (an empty :class:`FieldPath`) prints as ``<nil>``.

A ``null`` value runs no rules (rules on nullable fields see only non-null values).
Errors are returned in rule order; sorting is the caller's (``sort_errors``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from setpoint.apimachinery.fields import (
    ErrorType,
    FieldError,
    FieldPath,
    duplicate,
    forbidden,
    required,
)
from setpoint.cel import cost
from setpoint.cel.compile import (
    NO_DECL_TYPE,
    OLD_SELF,
    SELF,
    CompiledRule,
    Rule,
    RuleCache,
)
from setpoint.cel.errors import CELCompileError, CostLimitExceeded, EvalError
from setpoint.cel.interpreter import Activation, Program
from setpoint.cel.objects import NONE, Optional
from setpoint.cel.schemas import RuleEntry, Schema
from setpoint.cel.values import to_cel


class _Stop(Exception):
    """Budget exhausted: no further rules run for this object."""


def validate_rules(rules: Sequence[Rule | RuleEntry], value: Any, old: Any | None, *,
                   path: FieldPath | Callable[[], FieldPath], has_old: bool,
                   budget: cost.Budget, node: Schema,
                   cache: RuleCache, resource_root: bool = False,
                   ratchet: list[str] | None = None,
                   unchanged: Callable[[], bool] | None = None) -> list[FieldError]:
    """Evaluate ``rules`` (those of ``node``) on the JSON ``value`` at ``path``.

    ``path`` may be given as a function returning it, called only if an error is reported.

    ``old``/``has_old``: the correlated old value on update (``has_old=False`` on create, or
    when the node has no correlatable old value). ``resource_root``: ``node`` is the root of a
    custom resource (``self.metadata.name`` is visible). ``ratchet``: when given, the node is
    unchanged from the old object, so failures of rules that do not use ``oldSelf`` are
    appended to it as warnings instead of being returned (CRD validation ratcheting).
    ``unchanged``: with ``ratchet``, asked on the first such failure (and only then) whether
    the node is unchanged; failures are ratcheted only if it answers true.
    """
    if value is None or not rules:
        return []
    has_old = has_old and old is not None
    errors: list[FieldError] = []
    schema_type = "object" if resource_root else node.type
    if cache.self_type(node, resource_root=resource_root) is None:
        return [_invalid(_where(path)(), schema_type,
                         f"rule compiler initialization error: {NO_DECL_TYPE}")]
    if budget.remaining <= 0:
        budget.exhaust()
        return [_invalid(_where(path)(), schema_type, cost.OUT_OF_BUDGET)]
    activations = _Activations(value, old if has_old else None, has_old, node, resource_root)
    where = _where(path)
    try:
        for rule in rules:
            r = Rule.of(rule)
            try:
                compiled = cache.get(r, node, resource_root=resource_root)
            except CELCompileError as e:
                errors.append(_invalid(where(), schema_type, f"rule compile error: {e.detail}"))
                continue
            _one(compiled, activations, where, schema_type, budget, errors, ratchet, unchanged)
    except _Stop:
        budget.exhaust()
    return errors


class _Activations:
    """The variables for the rules of one node: converted once, shared by its rules."""

    __slots__ = ("_self", "has_old", "node", "old", "resource_root", "value")

    def __init__(self, value: Any, old: Any, has_old: bool, node: Schema,
                 resource_root: bool) -> None:
        self.value, self.old, self.has_old = value, old, has_old
        self.node, self.resource_root = node, resource_root
        self._self: tuple[Any, Any] | None = None

    def converted(self) -> tuple[Any, Any]:
        if self._self is None:
            new = to_cel(self.value, self.node, resource_root=self.resource_root)
            old = to_cel(self.old, self.node, resource_root=self.resource_root) \
                if self.has_old and self.old is not None else None
            self._self = (new, old)
        return self._self

    def variables(self, *, optional: bool) -> dict[str, Any]:
        new, old = self.converted()
        if optional:
            return {SELF: new, OLD_SELF: Optional.of(old) if self.has_old else NONE}
        if self.has_old:
            return {SELF: new, OLD_SELF: old}
        return {SELF: new}


def _where(path: FieldPath | Callable[[], FieldPath]) -> Callable[[], FieldPath]:
    """``path`` as a function that computes it at most once."""
    if isinstance(path, FieldPath):
        return lambda: path
    resolved: list[FieldPath] = []

    def get() -> FieldPath:
        if not resolved:
            resolved.append(path())
        return resolved[0]
    return get


def _field(path: FieldPath) -> str:
    """A path as Kubernetes prints it: the root (a nil ``*field.Path``) is ``<nil>``."""
    return str(path) or "<nil>"


def _invalid(path: FieldPath, schema_type: str, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, _field(path), detail, schema_type)


def _evaluate(program: Program, variables: dict[str, Any], budget: cost.Budget) \
        -> tuple[Any, EvalError | None, int, bool]:
    """(result, error, cost, stopped): ``stopped`` when the per-call limit was reached."""
    limit = budget.call_limit()
    activation = Activation(variables, limit)
    try:
        result = program.evaluate(activation)
    except EvalError as e:
        return None, e, activation.cost, False
    except CostLimitExceeded:
        return None, None, activation.cost, True
    return result, None, activation.cost, False


def _one(compiled: CompiledRule, acts: _Activations, where: Callable[[], FieldPath],
         schema_type: str, budget: cost.Budget, errors: list[FieldError],
         ratchet: list[str] | None, unchanged: Callable[[], bool] | None) -> None:
    rule = compiled.rule
    program = compiled.program
    if program is None:
        return
    if compiled.uses_old_self and not acts.has_old and not compiled.optional_old_self:
        return
    try:
        variables = acts.variables(optional=compiled.optional_old_self)
    except EvalError as e:
        errors.append(_invalid(where(), schema_type, f"{e} evaluating rule: {rule.error_text}"))
        return
    result, error, spent, stopped = _evaluate(program, variables, budget)
    if stopped:
        if budget.remaining < budget.per_call_limit:
            errors.append(_invalid(where(), schema_type, cost.OUT_OF_BUDGET))
        else:
            errors.append(_invalid(
                where(), schema_type,
                "'operation cancelled: actual cost limit exceeded': no further validation rules "
                f"will be run due to call cost exceeds limit for rule: {rule.error_text}"))
        raise _Stop
    if spent > budget.remaining:
        errors.append(_invalid(where(), schema_type, cost.OUT_OF_BUDGET))
        raise _Stop
    budget.spend(spent)
    if error is not None:
        errors.append(_invalid(where(), schema_type, _runtime_detail(str(error), rule)))
        return
    if result is True:
        return
    path = where()
    at = path.child(compiled.field_path) if compiled.field_path else path
    detail = None
    if compiled.message_program is not None:
        # Kubernetes evaluates messageExpression with the non-optional oldSelf, even for
        # optionalOldSelf rules; kept so messages match.
        detail = _message(compiled, acts.variables(optional=False), at, schema_type, budget,
                          errors)
    text = detail if detail is not None else (
        rule.message.strip() or f"failed rule: {rule.rule.strip()}")
    error_out = _error_for_reason(rule.reason, _field(at), schema_type, text)
    if ratchet is not None and not compiled.uses_old_self and (unchanged is None or unchanged()):
        ratchet.append(error_out.error())
    else:
        errors.append(error_out)


def _runtime_detail(text: str, rule: Rule) -> str:
    if text.startswith("no such overload"):
        return (f"'{text}': call arguments did not match a supported operator, function or "
                f"macro signature for rule: {rule.error_text}")
    return f"{text} evaluating rule: {rule.error_text}"


def _message(compiled: CompiledRule, variables: dict[str, Any], at: FieldPath,
             schema_type: str, budget: cost.Budget, errors: list[FieldError]) -> str | None:
    """The messageExpression's text, or ``None`` to fall back to ``message``."""
    program = compiled.message_program
    assert program is not None
    result, error, spent, stopped = _evaluate(program, variables, budget)
    source = compiled.rule.message_expression
    if stopped:
        if budget.remaining < budget.per_call_limit:
            errors.append(_invalid(at, schema_type, cost.MESSAGE_OUT_OF_BUDGET))
        else:
            errors.append(_invalid(
                at, schema_type, "no further validation rules will be run due to call cost "
                f"exceeds limit for messageExpression: {json.dumps(source)}"))
        raise _Stop
    if spent > budget.remaining:
        errors.append(_invalid(at, schema_type, cost.MESSAGE_OUT_OF_BUDGET))
        raise _Stop
    budget.spend(spent)
    if error is not None or type(result) is not str:
        return None
    text = result.strip()
    if not text or "\n" in text or len(text.encode()) > cost.MAX_MESSAGE_EXPRESSION_BYTES:
        return None
    return text


def _error_for_reason(reason: str | None, at: str, schema_type: str,
                      detail: str) -> FieldError:
    """``fieldErrorForReason``: the bad value is the schema type, as Kubernetes reports it."""
    if reason == "FieldValueForbidden":
        return forbidden(at, detail)
    if reason == "FieldValueRequired":
        return required(at, detail)
    if reason == "FieldValueDuplicate":
        return duplicate(at, schema_type)
    return FieldError(ErrorType.INVALID, at, detail, schema_type)
