"""A compiled policy evaluated: messages, reasons, failure policy, variables, budgets, audit
annotations and the authorizer library."""

from __future__ import annotations

from typing import Any

from setpoint.admission import policy as pol
from setpoint.admission.authz import Authorizer
from setpoint.auth.attributes import Attributes
from setpoint.auth.user import UserInfo


def compiled(*validations: dict[str, Any], **spec: Any) -> pol.CompiledPolicy:
    return pol.compile_policy({"metadata": {"name": "p", "generation": 2},
                               "spec": {"validations": list(validations), **spec}})


def inputs(obj: Any, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"object": obj, "oldObject": None,
                            "request": {"operation": "CREATE"}, "namespaceObject": None}
    base.update(extra)
    return base


def messages(result: pol.Result | None) -> list[str]:
    assert result is not None
    return [d.message for d in result.decisions]


def test_message_precedence() -> None:
    p = compiled({"expression": "object.n < 1"},
                 {"expression": "object.n < 2", "message": " too many "},
                 {"expression": "object.n < 3", "message": "m",
                  "messageExpression": "'n is ' + string(object.n)"},
                 {"expression": "object.n < 4", "message": "fallback",
                  "messageExpression": "''"},
                 {"expression": "object.n < 5", "reason": "Forbidden"})
    result = pol.evaluate(p, inputs({"n": 9}))
    assert messages(result) == ["failed expression: object.n < 1", "too many", "n is 9",
                                "fallback", "failed expression: object.n < 5"]
    assert result is not None
    assert [d.reason for d in result.decisions] == ["Invalid"] * 4 + ["Forbidden"]
    assert [d.index for d in result.decisions] == [0, 1, 2, 3, 4]
    assert messages(pol.evaluate(p, inputs({"n": 0}))) == []


def test_runtime_errors_follow_the_failure_policy() -> None:
    spec = ({"expression": "object.missing == 1"},)
    fail = pol.evaluate(compiled(*spec), inputs({}))
    assert messages(fail) == [
        "expression 'object.missing == 1' resulted in error: no such key: missing"]
    assert messages(pol.evaluate(compiled(*spec, failurePolicy="Ignore"), inputs({}))) == []


def test_match_conditions() -> None:
    p = compiled({"expression": "false"}, matchConditions=[
        {"name": "a", "expression": "object.kind == 'X'"},
        {"name": "b", "expression": "object.missing == 1"}])
    assert pol.evaluate(p, inputs({"kind": "Y"})) is None  # a false condition wins
    errored = pol.evaluate(p, inputs({"kind": "X"}))
    assert messages(errored) == [
        "expression 'object.missing == 1' resulted in error: no such key: missing"]
    lenient = compiled({"expression": "false"}, failurePolicy="Ignore",
                       matchConditions=[{"name": "b", "expression": "object.missing == 1"}])
    assert pol.evaluate(lenient, inputs({})) is None


def test_variables_are_lazy_and_compose() -> None:
    p = compiled({"expression": "variables.double > 10"},
                 {"expression": "object.skip || variables.broken"},
                 variables=[{"name": "n", "expression": "object.n"},
                            {"name": "double", "expression": "variables.n * 2"},
                            {"name": "broken", "expression": "object.nope"}])
    assert messages(pol.evaluate(p, inputs({"n": 6, "skip": True}))) == []
    result = messages(pol.evaluate(p, inputs({"n": 1, "skip": False})))
    assert result[0] == "failed expression: variables.double > 10"
    assert result[1].startswith("expression 'object.skip || variables.broken' resulted in "
                                "error: composited variable evaluation failed")


def test_per_call_limit_and_budget() -> None:
    heavy = "object.items.all(x, object.items.all(y, x + y >= 0))"
    p = compiled({"expression": heavy})
    result = messages(pol.evaluate(p, inputs({"items": list(range(2000))})))
    assert result == [f"expression '{heavy}' resulted in error: operation cancelled: actual "
                      "cost limit exceeded"]
    # many expressions each under the per-call limit exhaust the policy's budget
    medium = "object.items.all(x, x >= 0)"
    many = compiled(*[{"expression": medium}] * 40)
    out = messages(pol.evaluate(many, inputs({"items": list(range(100_000))})))
    assert out[-1] == ("validation failed due to running out of cost budget, no further "
                       "validation rules will be run")


def test_audit_annotations() -> None:
    p = compiled(auditAnnotations=[
        {"key": "size", "valueExpression": "'n=' + string(object.n)"},
        {"key": "skip", "valueExpression": "null"},
        {"key": "empty", "valueExpression": "'  '"}])
    result = pol.evaluate(p, inputs({"n": 3}))
    assert result is not None
    assert result.annotations == [("size", "n=3")]


def test_params_and_request() -> None:
    p = compiled({"expression": "params == null || object.n <= params.max"},
                 {"expression": "request.operation == 'CREATE'"},
                 paramKind={"apiVersion": "v1", "kind": "ConfigMap"})
    assert messages(pol.evaluate(p, inputs({"n": 5}, params={"max": 3}))) == [
        "failed expression: params == null || object.n <= params.max"]
    assert messages(pol.evaluate(p, inputs({"n": 5}, params=None))) == []


def test_authorizer_checks_the_user() -> None:
    asked: list[Attributes] = []

    def authorize(attrs: Attributes) -> tuple[bool, str]:
        asked.append(attrs)
        return attrs.verb == "get", "because"

    p = compiled({"expression": "authorizer.group('apps').resource('deployments')"
                                ".subresource('scale').namespace('ns').name('web')"
                                ".check('get').allowed()"},
                 {"expression": "authorizer.serviceAccount('ns', 'sa').path('/x')"
                                ".check('post').allowed()",
                  "messageExpression": "'no'"},
                 {"expression": "authorizer.group('').resource('pods').check('list')"
                                ".reason() == 'because'"})
    a = Authorizer(authorize, UserInfo("alice"))
    assert messages(pol.evaluate(p, inputs({}, authorizer=a))) == ["no"]
    first = asked[0]
    assert (first.user.name, first.api_group, first.resource, first.subresource,
            first.namespace, first.name, first.verb) == \
        ("alice", "apps", "deployments", "scale", "ns", "web", "get")
    assert asked[1].user.name == "system:serviceaccount:ns:sa"
    assert asked[1].path == "/x"


def test_a_policy_stored_with_a_broken_expression_fails_that_expression() -> None:
    p = compiled({"expression": "object.x +"}, {"expression": "true"})
    out = messages(pol.evaluate(p, inputs({})))
    assert len(out) == 1
    assert out[0].startswith("compilation error: compilation failed:")
