"""ValidatingAdmissionPolicies over the API: storage, validation, status, and enforcement."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget

POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def policy(name: str, *validations: dict[str, Any], resources: tuple[str, ...] = ("configmaps",),
           group: str = "", version: str = "v1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{
                "apiGroups": [group], "apiVersions": [version],
                "operations": ["CREATE", "UPDATE"], "resources": list(resources)}]},
                "validations": list(validations), **spec}}


def binding(name: str, policy_name: str, actions: tuple[str, ...] = ("Deny",),
            **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": policy_name, "validationActions": list(actions), **spec}}


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data}


async def install(http: aiohttp.ClientSession, *objects: dict[str, Any]) -> None:
    for obj in objects:
        path = POLICIES if obj["kind"] == "ValidatingAdmissionPolicy" else BINDINGS
        status, body, _ = await request(http, "POST", path, obj)
        assert status == 201, body


async def test_a_policy_is_stored_defaulted_and_type_checked(http: aiohttp.ClientSession
                                                            ) -> None:
    await install_widgets(http)
    status, body, _ = await request(http, "POST", POLICIES, policy(
        "typed.example.com", {"expression": "object.spec.size > 0"},
        {"expression": "object.spec.nosuchfield == 1"},
        resources=("widgets",), group="example.com"))
    assert status == 201, body
    spec = body["spec"]
    assert spec["failurePolicy"] == "Fail"
    constraints = spec["matchConstraints"]
    assert constraints["matchPolicy"] == "Equivalent"
    assert constraints["namespaceSelector"] == {}
    assert constraints["objectSelector"] == {}
    assert constraints["resourceRules"][0]["scope"] == "*"
    assert body["metadata"]["generation"] == 1
    warnings = body["status"]["typeChecking"]["expressionWarnings"]
    assert [w["fieldRef"] for w in warnings] == ["spec.validations[1].expression"]
    assert warnings[0]["warning"].startswith(
        "example.com/v1, Kind=Widget: compilation failed: ERROR: <input>:1:12: "
        "undefined field 'nosuchfield'")
    assert body["status"]["observedGeneration"] == 1


async def test_an_expression_that_does_not_compile_is_refused(http: aiohttp.ClientSession
                                                             ) -> None:
    status, body, _ = await request(http, "POST", POLICIES, policy(
        "bad", {"expression": "object.data.x +"}, {"expression": "object.data"},
        {"expression": "request.nope == ''"}))
    assert status == 422, body
    assert body["reason"] == "Invalid"
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes["spec.validations[0].expression"].startswith(
        'Invalid value: "object.data.x +": compilation failed: ERROR: <input>:1:16: '
        "Syntax error:")
    assert causes["spec.validations[1].expression"] == \
        'Invalid value: "object.data": must evaluate to bool'
    assert "undefined field 'nope'" in causes["spec.validations[2].expression"]
    status, body, _ = await request(http, "POST", BINDINGS, binding(
        "b", "p", ("Deny", "Warn")))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.validationActions"


async def test_deny_with_kubernetes_message_and_code(http: aiohttp.ClientSession) -> None:
    await install(http, policy("max-keys.example.com", {"expression": "size(object.data) <= 2"}),
                  binding("max-keys-binding.example.com", "max-keys.example.com"))
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("ok", a="1"))
    assert status == 201
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("big", a="1", b="2",
                                                                         c="3"))
    assert status == 422, body
    message = ("ValidatingAdmissionPolicy 'max-keys.example.com' with binding "
               "'max-keys-binding.example.com' denied request: failed expression: "
               "size(object.data) <= 2")
    assert body["message"] == f'configmaps "big" is forbidden: {message}'
    assert body["reason"] == "Invalid"
    assert body["details"] == {"name": "big", "kind": "configmaps",
                               "causes": [{"message": message}]}
    # an update is checked too; the object stays as it was
    status, body, _ = await request(http, "PATCH", f"{CONFIGMAPS}/ok",
                                    {"data": {"b": "2", "c": "3"}},
                                    content_type="application/merge-patch+json")
    assert status == 422
    _, current, _ = await request(http, "GET", f"{CONFIGMAPS}/ok")
    assert current["data"] == {"a": "1"}


async def test_reason_message_expression_and_custom_resources(http: aiohttp.ClientSession
                                                             ) -> None:
    await install_widgets(http)
    await install(http, policy(
        "small.example.com",
        {"expression": "object.spec.size <= 5", "reason": "Forbidden",
         "messageExpression": "'size ' + string(object.spec.size) + ' is above 5'"},
        resources=("widgets",), group="example.com"),
        binding("small-binding", "small.example.com"))
    status, body, _ = await request(http, "POST", WIDGETS, widget("w", size=9))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'widgets.example.com "w" is forbidden: ValidatingAdmissionPolicy '
        "'small.example.com' with binding 'small-binding' denied request: size 9 is above 5")
    assert body["details"]["group"] == "example.com"
    status, _, _ = await request(http, "POST", WIDGETS, widget("w", size=3))
    assert status == 201


async def test_warn_and_audit_actions_admit(http: aiohttp.ClientSession) -> None:
    await install(http, policy("named", {"expression": "object.metadata.name != 'bad'",
                                         "message": "bad is a bad name"}),
                  binding("named-warn", "named", ("Warn", "Audit")))
    status, _, headers = await request(http, "POST", CONFIGMAPS, configmap("bad"))
    assert status == 201
    assert headers.getall("Warning") == [
        '299 - "Validation failed for ValidatingAdmissionPolicy \'named\' with binding '
        '\'named-warn\': bad is a bad name"']


async def test_params_from_a_configmap(http: aiohttp.ClientSession) -> None:
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("limits", max="2"))
    assert status == 201
    await install(http, policy(
        "limited", {"expression": "size(object.data) <= int(params.data.max)",
                    "messageExpression": "'at most ' + params.data.max + ' keys'"},
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        matchConditions=[{"name": "not-the-params",
                          "expression": "object.metadata.name != 'limits'"}]),
        binding("limited-binding", "limited",
                paramRef={"name": "limits", "namespace": "default",
                          "parameterNotFoundAction": "Deny"}))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("x", a="1", b="2",
                                                                         c="3"))
    assert status == 422
    assert body["message"].endswith("denied request: at most 2 keys")
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("y", a="1"))
    assert status == 201
    # params that are gone: Deny refuses every write the binding matches
    status, _, _ = await request(http, "DELETE", f"{CONFIGMAPS}/limits")
    assert status == 200
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("z", a="1"))
    assert status == 422
    assert body["message"].endswith(
        "denied request: failed to configure binding: no params found for policy binding "
        "with `Deny` parameterNotFoundAction")


async def test_failure_policy_governs_runtime_errors(http: aiohttp.ClientSession) -> None:
    await install(http,
                  policy("strict", {"expression": "object.data.missing == 'x'"}),
                  binding("strict-b", "strict"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("a", other="1"))
    assert status == 422
    assert body["message"].endswith(
        "denied request: expression 'object.data.missing == 'x'' resulted in error: "
        "no such key: missing")
    status, _, _ = await request(http, "DELETE", f"{POLICIES}/strict")
    assert status == 200
    await install(http, policy("lenient", {"expression": "object.data.missing == 'x'"},
                               failurePolicy="Ignore"),
                  binding("lenient-b", "lenient"))
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("b", other="1"))
    assert status == 201


async def test_selectors_and_operations(http: aiohttp.ClientSession) -> None:
    await install(http, policy(
        "labelled", {"expression": "false", "message": "no"},
        matchConstraints={"objectSelector": {"matchLabels": {"checked": "yes"}},
                          "resourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
                                             "operations": ["DELETE"],
                                             "resources": ["configmaps"]}]}),
        binding("labelled-b", "labelled"))
    cm = configmap("free")
    status, _, _ = await request(http, "POST", CONFIGMAPS, cm)
    assert status == 201
    cm2 = configmap("kept")
    cm2["metadata"]["labels"] = {"checked": "yes"}
    status, _, _ = await request(http, "POST", CONFIGMAPS, cm2)
    assert status == 201  # only DELETE is checked
    status, _, _ = await request(http, "DELETE", f"{CONFIGMAPS}/free")
    assert status == 200
    status, body, _ = await request(http, "DELETE", f"{CONFIGMAPS}/kept")
    assert status == 422, body
    assert body["message"] == ('configmaps "kept" is forbidden: ValidatingAdmissionPolicy '
                               "'labelled' with binding 'labelled-b' denied request: no")


async def test_variables_request_and_authorizer(http: aiohttp.ClientSession) -> None:
    await install(http, policy(
        "vars", {"expression": "variables.keys.all(k, k.startsWith(variables.prefix))",
                 "messageExpression": "'keys must start with ' + variables.prefix"},
        {"expression": "request.operation == 'CREATE' || request.userInfo.username != ''"},
        {"expression": "authorizer.group('').resource('secrets').check('list').allowed()"},
        variables=[{"name": "prefix", "expression": "'app-'"},
                   {"name": "keys", "expression": "object.data.map(k, k)"}]),
        binding("vars-b", "vars"))
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("c1", **{"app-x": "1"}))
    assert status == 201
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("c2", other="1"))
    assert status == 422
    assert body["message"].endswith("denied request: keys must start with app-")


async def test_hostile_policies_and_bindings_get_4xx(http: aiohttp.ClientSession) -> None:
    rules = {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                "operations": ["*"], "resources": ["*"]}]}
    bodies: list[Any] = [
        {"spec": []}, {"spec": {"validations": "x"}},
        {"spec": {"matchConstraints": {"resourceRules": "all"}, "validations": [{}]}},
        {"spec": {"matchConstraints": rules, "validations": [{"expression": 7}]}},
        {"spec": {"matchConstraints": {**rules, "objectSelector": {"matchExpressions": [
            {"key": "a", "operator": "Bogus"}]}}, "validations": [{"expression": "true"}]}},
        {"spec": {"matchConstraints": rules, "validations": [
            {"expression": "(" * 5000 + "true" + ")" * 5000}]}},
        {"spec": {"matchConstraints": rules, "validations": [
            {"expression": "'" + "a" * 200_000 + "' == ''"}]}},
        {"spec": {"matchConstraints": rules, "variables": [{"name": "1x", "expression": "1"}],
                  "validations": [{"expression": "variables.nope"}]}},
    ]
    for i, spec in enumerate(bodies):
        body = {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy", "metadata": {"name": f"h{i}"}, **spec}
        status, answer, _ = await request(http, "POST", POLICIES, body)
        assert 400 <= status < 500, (i, answer)
    for spec in ({"policyName": 3}, {"paramRef": {"selector": "x"}},
                 {"policyName": "p", "validationActions": ["Deny"], "matchResources": []}):
        status, answer, _ = await request(http, "POST", BINDINGS, {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "hb"},
            "spec": spec})
        assert 400 <= status < 500, answer
    # a policy that matches everything and spends its whole budget: a 422, never a hang
    await install(http, policy("costly", {
        "expression": "object.data.all(k, object.data.all(j, k != j || true))"},
        matchConstraints=rules), binding("costly-b", "costly"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap(
        "wide", **{f"k{i}": "v" for i in range(3000)}))
    assert status == 422, body
    assert "actual cost limit exceeded" in body["message"]


async def test_match_conditions_and_audit_annotations_are_bounded_per_policy(
        http: aiohttp.ClientSession) -> None:
    # the Limits table: 64 match conditions and 20 audit annotations per policy, 422 beyond
    def bounded(name: str, conditions: int, annotations: int) -> dict[str, Any]:
        return policy(name, matchConditions=[
            {"name": f"c{i}", "expression": "true"} for i in range(conditions)],
            auditAnnotations=[{"key": f"a{i}", "valueExpression": "'v'"}
                              for i in range(annotations)])
    status, body, _ = await request(http, "POST", POLICIES, bounded("at-the-limits", 64, 20))
    assert status == 201, body
    status, body, _ = await request(http, "POST", POLICIES, bounded("over", 65, 21))
    assert status == 422, body
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes["spec.matchConditions"] == "Too many: 65: must have at most 64 items"
    assert causes["spec.auditAnnotations"].endswith("must not have more than 20 auditAnnotations")
    status, _, _ = await request(http, "GET", f"{POLICIES}/over")
    assert status == 404
