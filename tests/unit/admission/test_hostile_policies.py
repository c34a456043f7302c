"""Random policies and objects: validation never raises, evaluation always finishes with a
decision or none, within the cost limits."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.admission import mutation as mut
from setpoint.admission import policy as pol
from setpoint.admission import validation
from setpoint.apimachinery import typed

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)

fragments = st.sampled_from([
    "object", "oldObject", "request", "params", "variables", "authorizer", "namespaceObject",
    ".spec", ".metadata.name", ".data", ".x", "[0]", "['a']", " == ", " + ", " < ", " && ",
    " || ", "!", "(", ")", "size(", "has(", "1", "'s'", "true", "null", ".all(x, ", "x",
    ".map(y, y)", ".exists(z, z)", "?", ":", ",", "int(", "string(", "matches('a+')",
    "request.operation", "request.userInfo.username", "object.data.size()", "[1,2]",
    "{'k': 1}", "variables.v", "params.max",
])
expressions = st.lists(fragments, min_size=1, max_size=12).map("".join)


def spec_of(exprs: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {
        "failurePolicy": "Fail", "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                "operations": ["*"], "resources": ["*"]}]},
        "variables": [{"name": "v", "expression": exprs[0]}],
        "validations": [{"expression": e, "messageExpression": e} for e in exprs],
        "auditAnnotations": [{"key": "k", "valueExpression": exprs[-1]}], **extra}}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(expressions, min_size=1, max_size=4), json_values, json_values, json_values)
def test_random_policies_on_random_objects(exprs: list[str], obj: Any, old: Any,
                                           params: Any) -> None:
    stored = spec_of(exprs, {})
    validation.default_policy(stored)
    validation.validate_policy(stored)  # never raises, whatever the expressions
    compiled = pol.compile_policy(stored)
    result = pol.evaluate(compiled, {"object": obj, "oldObject": old, "params": params,
                                     "request": {"operation": "CREATE"},
                                     "namespaceObject": None})
    assert result is None or all(isinstance(d.message, str) for d in result.decisions)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_random_specs_validate_without_raising(spec: Any) -> None:
    for obj in ({"metadata": {"name": "p"}, "spec": spec},
                {"metadata": {"name": "p"}, "spec": {"validations": spec,
                                                     "matchConstraints": spec,
                                                     "variables": spec}}):
        validation.default_policy(obj)
        validation.validate_policy(obj)
        validation.default_binding(obj)
        validation.validate_binding(obj)
        pol.compile_policy(obj)


mutation_fragments = st.sampled_from([
    "Object{", "}", "Object.spec{", "Object.metadata{", "labels: ", "spec: ", "metadata: ",
    "JSONPatch{", "op: ", "path: ", "value: ", "from: ", "'add'", "'/spec/x'", "[", "]", ", ",
    "object.spec", "params", "variables.v", "jsonpatch.escapeKey('a/b')", "1", "'s'", "{",
    "'k': ", "?x: ", "optional.of(1)", ".map(i, ", "i", ")", "[1, 2]",
])
mutation_expressions = st.lists(mutation_fragments, min_size=1, max_size=14).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation_expressions, min_size=1, max_size=3), json_values, json_values,
       st.sampled_from(["ApplyConfiguration", "JSONPatch"]))
def test_random_mutating_policies_on_random_objects(exprs: list[str], obj: Any, params: Any,
                                                    patch_type: str) -> None:
    holder = "applyConfiguration" if patch_type == "ApplyConfiguration" else "jsonPatch"
    stored: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}, "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                "operations": ["*"], "resources": ["*"]}]},
        "variables": [{"name": "v", "expression": exprs[0]}],
        "mutations": [{"patchType": patch_type, holder: {"expression": e}} for e in exprs]}}
    validation.default_mutating_policy(stored)
    validation.validate_mutating_policy(stored)  # never raises, whatever the expressions
    compiled = mut.compile_policy(stored)
    start = obj if isinstance(obj, dict) else {"spec": obj}
    outcome = mut.mutate(compiled, {"oldObject": None, "params": params,
                                    "request": {"operation": "CREATE"},
                                    "namespaceObject": None}, start, typed.object_type())
    assert isinstance(outcome.object, dict)
    assert all(isinstance(e, str) for e in outcome.errors)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_random_mutating_specs_validate_without_raising(spec: Any) -> None:
    for obj in ({"metadata": {"name": "p"}, "spec": spec},
                {"metadata": {"name": "p"}, "spec": {"mutations": spec, "variables": spec,
                                                     "matchConstraints": spec}}):
        validation.validate_mutating_policy(obj)
        validation.validate_mutating_binding(obj)
        mut.compile_policy(obj)


def test_json_patch_copies_nesting_the_object_too_deep_are_a_mutation_error() -> None:
    ops = ['JSONPatch{op: "add", path: "/x", value: {"a": {}}}']
    ops += [f'JSONPatch{{op: "copy", from: "/x", path: "/x{"/a" * (2 ** k)}"}}'
            for k in range(12)]
    stored: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {
        "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                                                "operations": ["*"], "resources": ["*"]}]},
        "mutations": [{"patchType": "JSONPatch",
                       "jsonPatch": {"expression": "[" + ", ".join(ops) + "]"}}]}}
    validation.default_mutating_policy(stored)
    assert validation.validate_mutating_policy(stored) == []
    outcome = mut.mutate(mut.compile_policy(stored), {
        "oldObject": None, "params": None, "request": {"operation": "CREATE"},
        "namespaceObject": None}, {"metadata": {"name": "c"}}, typed.object_type())
    assert outcome.errors == ["JSON Patch: the patched object nests deeper than 128 levels"]
    assert outcome.object == {"metadata": {"name": "c"}}
