"""A ValidatingAdmissionPolicy compiled, and evaluated for one request, binding and param.

:func:`compile_policy` compiles every expression of a stored policy once (an expression that
does not compile becomes an error of that expression at evaluation, Kubernetes'
``compilation error: ...``). :func:`evaluate` runs, in Kubernetes' order:

1. ``matchConditions``: any ``false`` means the policy does not apply; errors (with none
   false) fail the request under ``failurePolicy: Fail`` and skip the policy under ``Ignore``;
2. ``validations``: ``true`` admits; anything else is a failure with the message of
   ``messageExpression`` (if it gives a non-empty single-line string of at most 5 KiB), else
   ``message``, else ``failed expression: <expression>``, and the ``reason`` (default
   ``Invalid``); an evaluation error is a failure under ``Fail`` and ignored under ``Ignore``;
3. ``auditAnnotations``: a non-empty string is published as ``<policy>/<key>``, null or an
   empty string is left out, an error fails under ``Fail``.

All of it shares one cost budget (:data:`~setpoint.admission.expressions.RUNTIME_BUDGET`);
running out fails the whole evaluation under ``Fail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint.admission import expressions as ex
from setpoint.apimachinery.jsonshape import as_dict, objects_in
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError

#: the longest message a messageExpression may give (Kubernetes'
#: ``MaxEvaluatedMessageExpressionSizeBytes``)
MAX_MESSAGE_BYTES: Final = 5 * 1024
#: the longest audit annotation value published (longer ones are cut)
MAX_AUDIT_VALUE: Final = 10 * 1024


@dataclass(frozen=True, slots=True)
class Compiled:
    """One expression, compiled, or why it did not compile."""

    source: str
    expression: ex.Expression | None
    error: str = ""


@dataclass(frozen=True, slots=True)
class Validation:
    expression: Compiled
    message: str
    message_expression: Compiled | None
    reason: str


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    name: str
    generation: int
    failure_policy: str
    #: ``(apiVersion, kind)`` of the params, or None
    param_kind: tuple[str, str] | None
    match_constraints: Mapping[str, Any] | None
    match_conditions: tuple[tuple[str, Compiled], ...]
    variables: tuple[tuple[str, Compiled], ...]
    validations: tuple[Validation, ...]
    audit_annotations: tuple[tuple[str, Compiled], ...]

    @property
    def fails_closed(self) -> bool:
        return self.failure_policy != "Ignore"


@dataclass(slots=True)
class Decision:
    """A failed validation (or an error that fails the request)."""

    message: str
    reason: str = "Invalid"
    #: which validation (``-1`` for an error of the whole evaluation)
    index: int = -1
    error: bool = False


@dataclass(slots=True)
class Result:
    """What one evaluation found: failures to act on and audit annotations to publish."""

    decisions: list[Decision] = field(default_factory=list)
    annotations: list[tuple[str, str]] = field(default_factory=list)
    #: errors of audit annotations (they deny under Fail, whatever the validation actions)
    errors: list[str] = field(default_factory=list)


def _compile(source: Any, declarations: ex.Declarations,
             results: tuple[t.Type, ...]) -> Compiled:
    text = source if isinstance(source, str) else ""
    try:
        return Compiled(text, ex.compile_expression(text, declarations, results))
    except ex.CompileError as e:
        return Compiled(text, None, f"compilation error: {e.detail}")


def param_kind(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    kind = spec.get("paramKind")
    if not isinstance(kind, Mapping):
        return None
    return str(kind.get("apiVersion") or ""), str(kind.get("kind") or "")


def declarations(spec: Mapping[str, Any], *, object_type: t.Type = t.DYN,
                 params_type: t.Type = t.DYN) -> tuple[ex.Declarations, dict[str, t.Type],
                                                      list[tuple[str, str, ex.Declarations]]]:
    """The declarations of a policy's expressions after its variables, the variables'
    types, and each variable's ``(name, source, declarations)`` in order."""
    has_params = param_kind(spec) is not None
    types: dict[str, t.Type] = {}
    steps: list[tuple[str, str, ex.Declarations]] = []
    for var in objects_in(spec.get("variables")):
        name = str(var.get("name") or "")
        source = str(var.get("expression") or "")
        decl = ex.Declarations(has_params=has_params, variables=dict(types),
                               object_type=object_type, params_type=params_type)
        steps.append((name, source, decl))
        try:
            types[name] = ex.compile_expression(source, decl, ex.ANY_RESULT).type
        except ex.CompileError:
            types[name] = t.DYN
    final = ex.Declarations(has_params=has_params, variables=dict(types) if steps else None,
                            object_type=object_type, params_type=params_type)
    return final, types, steps


def compile_policy(obj: Mapping[str, Any]) -> CompiledPolicy:
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    decl, _types, steps = declarations(spec)
    variables = tuple((name, _compile(source, d, ex.ANY_RESULT)) for name, source, d in steps)
    no_authz = ex.Declarations(has_params=decl.has_params, has_authorizer=False,
                               variables=decl.variables)
    conditions = tuple(
        (str(c.get("name") or ""), _compile(c.get("expression"), decl, ex.BOOL_RESULT))
        for c in objects_in(spec.get("matchConditions")))
    validations: list[Validation] = []
    for v in objects_in(spec.get("validations")):
        message_expression = v.get("messageExpression")
        validations.append(Validation(
            _compile(v.get("expression"), decl, ex.BOOL_RESULT),
            str(v.get("message") or "").strip(),
            _compile(message_expression, no_authz, ex.STRING_RESULT)
            if isinstance(message_expression, str) and message_expression.strip() else None,
            str(v.get("reason") or "Invalid")))
    audits = tuple((str(a.get("key") or ""),
                    _compile(a.get("valueExpression"), decl, ex.AUDIT_RESULT))
                   for a in objects_in(spec.get("auditAnnotations")))
    failure = spec.get("failurePolicy")
    generation = meta.get("generation")
    return CompiledPolicy(
        name=str(meta.get("name") or ""),
        generation=generation if isinstance(generation, int) else 0,
        failure_policy=failure if failure in ("Fail", "Ignore") else "Fail",
        param_kind=param_kind(spec),
        match_constraints=spec.get("matchConstraints")
        if isinstance(spec.get("matchConstraints"), Mapping) else None,
        match_conditions=conditions, variables=variables, validations=tuple(validations),
        audit_annotations=audits)


def _run(evaluation: ex.Evaluation, compiled: Compiled, *, authorizer: bool = True) -> Any:
    if compiled.expression is None:
        raise EvalError(compiled.error)
    return evaluation.run(compiled.expression, with_authorizer=authorizer)


def _aggregate(messages: list[str]) -> str:
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def evaluate(policy: CompiledPolicy, inputs: dict[str, Any]) -> Result | None:
    """Evaluate ``policy`` on ``inputs`` (the CEL variables: ``object``, ``oldObject``,
    ``request``, ``params``, ``namespaceObject``, ``authorizer``). ``None`` when a match
    condition excludes the request."""
    variables = {name: c.expression for name, c in policy.variables
                 if c.expression is not None}
    broken = {name: c.error for name, c in policy.variables if c.expression is None}
    evaluation = ex.Evaluation(inputs, variables, broken=broken)
    fail = policy.fails_closed
    try:
        errors: list[str] = []
        for _name, condition in policy.match_conditions:
            try:
                if _run(evaluation, condition) is False:
                    return None
            except EvalError as e:
                errors.append(str(e))
        if errors:
            if not fail:
                return None
            return Result([Decision(_aggregate(errors), error=True)])
        result = Result()
        for i, validation in enumerate(policy.validations):
            try:
                value = _run(evaluation, validation.expression)
            except EvalError as e:
                if fail:
                    result.decisions.append(Decision(str(e), index=i, error=True))
                continue
            if value is True:
                continue
            message = ""
            if validation.message_expression is not None:
                try:
                    text = _run(evaluation, validation.message_expression, authorizer=False)
                except EvalError:
                    text = None
                if isinstance(text, str):
                    text = text.strip()
                    if len(text.encode()) <= MAX_MESSAGE_BYTES and "\n" not in text:
                        message = text
            if not message:
                message = validation.message or \
                    f"failed expression: {validation.expression.source.strip()}"
            result.decisions.append(Decision(message, validation.reason, i))
        for key, audit in policy.audit_annotations:
            try:
                value = _run(evaluation, audit)
            except EvalError as e:
                if fail:
                    result.errors.append(str(e))
                continue
            if isinstance(value, str) and value.strip():
                result.annotations.append((key, value.strip()[:MAX_AUDIT_VALUE]))
            elif value is not None and not isinstance(value, str) and fail:
                result.errors.append(
                    f"valueExpression '{audit.source}' resulted in unsupported return "
                    "type. Return type must be either string or null.")
        return result
    except ex.OutOfBudget as e:
        if not fail:
            return Result()
        return Result([Decision(str(e), error=True)])
