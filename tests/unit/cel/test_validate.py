"""``validate_rules``: Kubernetes' errors for failing rules, transition rules, messages,
reasons, field paths, optionalOldSelf, runtime errors and the cost budget (cases after
apiextensions-apiserver's ``pkg/apiserver/schema/cel/validation_test.go``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from setpoint import cel
from setpoint.apimachinery.fields import FieldPath
from setpoint.cel.compile import compile_rule
from setpoint.schema.structural import Node, parse


def _node(schema: dict[str, Any], *rules: dict[str, Any]) -> Node:
    return parse({**schema, "x-kubernetes-validations": list(rules)})


def errors(node: Node, value: Any, old: Any = None, *, has_old: bool | None = None,
           budget: cel.Budget | None = None, resource_root: bool = False,
           ratchet: list[str] | None = None, cache: cel.RuleCache | None = None) -> list[str]:
    return [e.error() for e in cel.validate_rules(
        cel.rules_of(node), value, old, path=FieldPath.root("root"),
        has_old=old is not None if has_old is None else has_old,
        budget=budget if budget is not None else cel.Budget(), node=node,
        cache=cache if cache is not None else cel.RuleCache(),
        resource_root=resource_root, ratchet=ratchet)]


REPLICAS = {"type": "object", "properties": {
    "minReplicas": {"type": "integer"}, "maxReplicas": {"type": "integer"},
    "name": {"type": "string"}, "spec": {"type": "object", "properties": {
        "replicas": {"type": "integer"}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "intOrString": {"x-kubernetes-int-or-string": True},
}}
MIN_MAX = {"rule": "self.minReplicas <= self.maxReplicas"}
GOOD = {"minReplicas": 1, "maxReplicas": 3}
BAD = {"minReplicas": 5, "maxReplicas": 3}

CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Any, Any, list[str]]] = [
    ("rule holds", REPLICAS, [MIN_MAX], GOOD, None, []),
    ("default message", REPLICAS, [MIN_MAX], BAD, None,
     ['root: Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas']),
    ("message", REPLICAS, [{**MIN_MAX, "message": " min must not exceed max "}], BAD, None,
     ['root: Invalid value: "object": min must not exceed max']),
    ("messageExpression", REPLICAS,
     [{**MIN_MAX, "messageExpression": "'min ' + string(self.minReplicas) + ' > max'"}], BAD,
     None, ['root: Invalid value: "object": min 5 > max']),
    ("messageExpression error falls back to message", REPLICAS,
     [{**MIN_MAX, "message": "fallback",
       "messageExpression": "string(1 / (self.minReplicas - 5))"}],
     BAD, None, ['root: Invalid value: "object": fallback']),
    ("empty messageExpression falls back to the rule", REPLICAS,
     [{**MIN_MAX, "messageExpression": "'  '"}], BAD, None,
     ['root: Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas']),
    ("multi-line messageExpression falls back", REPLICAS,
     [{**MIN_MAX, "message": "m", "messageExpression": "'a\\nb'"}], BAD, None,
     ['root: Invalid value: "object": m']),
    ("oversized messageExpression falls back", REPLICAS,
     [{**MIN_MAX, "message": "m",
       "messageExpression": "lists.range(600).map(x, 'abcdefghij').join('')"}], BAD, None,
     ['root: Invalid value: "object": m']),
    ("messageExpression at the size limit is kept", REPLICAS,
     [{**MIN_MAX, "messageExpression": "lists.range(512).map(x, 'abcdefghij').join('')"}],
     BAD, None, ['root: Invalid value: "object": ' + "abcdefghij" * 512]),
    ("reason Forbidden", REPLICAS, [{**MIN_MAX, "message": "m", "reason": "FieldValueForbidden"}],
     BAD, None, ["root: Forbidden: m"]),
    ("reason Required", REPLICAS, [{**MIN_MAX, "message": "m", "reason": "FieldValueRequired"}],
     BAD, None, ["root: Required value: m"]),
    ("reason Duplicate of an object", REPLICAS,
     [{**MIN_MAX, "message": "m", "reason": "FieldValueDuplicate"}], BAD, None,
     ['root: Duplicate value: "object"']),
    ("reason Invalid", REPLICAS, [{**MIN_MAX, "message": "m", "reason": "FieldValueInvalid"}],
     BAD, None, ['root: Invalid value: "object": m']),
    ("fieldPath", REPLICAS,
     [{"rule": "self.spec.replicas > 0", "message": "m", "fieldPath": ".spec.replicas"}],
     {"spec": {"replicas": 0}}, None, ['root.spec.replicas: Invalid value: "object": m']),
    ("fieldPath with a map key", REPLICAS,
     [{"rule": "false", "message": "m", "fieldPath": ".labels['a.b']"}], {"labels": {}}, None,
     ['root.labels[a.b]: Invalid value: "object": m']),
    ("invalid fieldPath is ignored", REPLICAS,
     [{"rule": "false", "message": "m", "fieldPath": ".nope"}], {}, None,
     ['root: Invalid value: "object": m']),
    ("runtime error", REPLICAS, [{"rule": "self.minReplicas / 0 > 1"}], GOOD, None,
     ['root: Invalid value: "object": division by zero evaluating rule: '
      "self.minReplicas / 0 > 1"]),
    ("runtime error names the message", REPLICAS,
     [{"rule": "self.spec.replicas > 1", "message": "need replicas"}], {}, None,
     ['root: Invalid value: "object": no such key: spec evaluating rule: need replicas']),
    ("no such overload at run time", REPLICAS, [{"rule": "self.intOrString + 1 > 1"}],
     {"intOrString": "50%"}, None,
     ['root: Invalid value: "object": \'no such overload\': call arguments did not match a '
      "supported operator, function or macro signature for rule: self.intOrString + 1 > 1"]),
    ("compile error at run time", REPLICAS, [{"rule": "asdausidyhASDNJm"}], {}, None,
     ['root: Invalid value: "object": rule compile error: compilation failed: '
      "ERROR: <input>:1:1: undeclared reference to 'asdausidyhASDNJm' (in container '')\n"
      " | asdausidyhASDNJm\n | ^"]),
    ("empty rule never fails", REPLICAS, [{"rule": "  "}], {}, None, []),
    ("non-bool result fails the rule", REPLICAS, [{"rule": "dyn(self.minReplicas) == 1 ? true"
                                                           " : dyn(1)"}], BAD, None,
     ['root: Invalid value: "object": failed rule: dyn(self.minReplicas) == 1 ? true : dyn(1)']),
    ("rules run in order", REPLICAS, [{"rule": "false", "message": "first"},
                                      {"rule": "false", "message": "second"}], {}, None,
     ['root: Invalid value: "object": first', 'root: Invalid value: "object": second']),
    ("strings show their type, not the data", {"type": "string"},
     [{"rule": "self.size() < 3"}], "long", None,
     ['root: Invalid value: "string": failed rule: self.size() < 3']),
    ("integers show their type", {"type": "integer"}, [{"rule": "self < 3"}], 5, None,
     ['root: Invalid value: "integer": failed rule: self < 3']),
    ("int-or-string has no type", {"x-kubernetes-int-or-string": True},
     [{"rule": "false"}], 5, None, ['root: Invalid value: "": failed rule: false']),
    ("Duplicate shows the type", {"type": "string"},
     [{"rule": "false", "reason": "FieldValueDuplicate"}], "x", None,
     ['root: Duplicate value: "string"']),
    ("lists show their type", {"type": "array", "items": {"type": "string"}},
     [{"rule": "self.size() < 1"}], ["a"], None,
     ['root: Invalid value: "array": failed rule: self.size() < 1']),
    ("null values run no rules", {"type": "string", "nullable": True}, [{"rule": "false"}], None,
     None, []),
    # transition rules
    ("transition rule skipped on create", {"type": "string"},
     [{"rule": "self == oldSelf", "message": "immutable"}], "a", None, []),
    ("transition rule holds", {"type": "string"},
     [{"rule": "self == oldSelf", "message": "immutable"}], "a", "a", []),
    ("transition rule fails", {"type": "string"},
     [{"rule": "self == oldSelf", "message": "immutable"}], "b", "a",
     ['root: Invalid value: "string": immutable']),
    ("transition message sees oldSelf", {"type": "integer"},
     [{"rule": "self >= oldSelf", "messageExpression": "'cannot shrink from ' + string(oldSelf)"}],
     1, 3, ['root: Invalid value: "integer": cannot shrink from 3']),
    ("optionalOldSelf on create", {"type": "integer"},
     [{"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": True,
       "message": "cannot shrink"}], 1, None, []),
    ("optionalOldSelf on update", {"type": "integer"},
     [{"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": True,
       "message": "cannot shrink"}], 1, 3, ['root: Invalid value: "integer": cannot shrink']),
    ("optionalOldSelf orValue", {"type": "integer"},
     [{"rule": "self >= oldSelf.orValue(0)", "optionalOldSelf": True}], -1, None,
     ['root: Invalid value: "integer": failed rule: self >= oldSelf.orValue(0)']),
    ("a shadowed oldSelf is not a transition rule", {"type": "array", "items": {"type": "integer"}},
     [{"rule": "self.all(oldSelf, oldSelf > 0)"}], [0], None,
     ['root: Invalid value: "array": failed rule: self.all(oldSelf, oldSelf > 0)']),
]


@pytest.mark.parametrize(("schema", "rules", "value", "old", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_validate_rules(schema: dict[str, Any], rules: list[dict[str, Any]], value: Any,
                        old: Any, want: list[str]) -> None:
    assert errors(_node(schema, *rules), value, old) == want


def test_resource_root_sees_type_meta_and_name() -> None:
    node = _node(REPLICAS, {"rule": "self.metadata.name.startsWith(self.kind.lowerAscii())",
                            "message": "name must start with the kind"})
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Web",
                           "metadata": {"name": "db-1", "uid": "x"}}
    assert errors(node, obj, resource_root=True) == [
        'root: Invalid value: "object": name must start with the kind']
    obj["metadata"]["name"] = "web-1"
    assert errors(node, obj, resource_root=True) == []


def test_metadata_beyond_name_is_not_visible() -> None:
    node = _node(REPLICAS, {"rule": "has(self.metadata.labels)"})
    got = errors(node, {"metadata": {"labels": {}}}, resource_root=True)
    assert got
    assert "undefined field 'labels'" in got[0]


def test_embedded_resource() -> None:
    node = parse({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": [{"rule": "self.kind == 'Pod'"}]}}})
    template = node.properties["template"] if node.properties else node
    assert errors(template, {"apiVersion": "v1", "kind": "Pod", "spec": {}}) == []
    assert errors(template, {"apiVersion": "v1", "kind": "Job"}) == [
        'root: Invalid value: "object": failed rule: self.kind == \'Pod\'']


def test_ratcheting_turns_failures_into_warnings() -> None:
    node = _node({"type": "string"}, {"rule": "self == 'baz'", "message": "gotta be baz"},
                 {"rule": "oldSelf != 'bar' && self == 'baz'", "message": "transition"})
    warnings: list[str] = []
    got = errors(node, "bar", "bar", ratchet=warnings)
    assert got == ['root: Invalid value: "string": transition']
    assert warnings == ['root: Invalid value: "string": gotta be baz']


def test_ratcheting_is_decided_lazily() -> None:
    node = _node({"type": "string"}, {"rule": "self == 'baz'", "message": "gotta be baz"})
    asked: list[bool] = []

    def unchanged(answer: bool) -> Callable[[], bool]:
        def ask() -> bool:
            asked.append(answer)
            return answer
        return ask

    def run(value: str, answer: bool, warnings: list[str]) -> list[str]:
        return [e.error() for e in cel.validate_rules(
            cel.rules_of(node), value, value, path=FieldPath.root("root"), has_old=True,
            budget=cel.Budget(), node=node, cache=cel.RuleCache(), ratchet=warnings,
            unchanged=unchanged(answer))]

    warnings: list[str] = []
    assert run("baz", True, warnings) == []
    assert asked == []
    assert warnings == []
    assert run("bar", False, warnings) == ['root: Invalid value: "string": gotta be baz']
    assert warnings == []
    assert asked == [False]
    assert run("bar", True, warnings) == []
    assert warnings == ['root: Invalid value: "string": gotta be baz']


# -- cost --------------------------------------------------------------------------------------

BIG_LIST = {"type": "array", "items": {"type": "integer"}}


def test_per_call_limit_stops_a_nested_loop_quickly() -> None:
    node = _node(BIG_LIST, {"rule": "self.all(x, self.all(y, x + y >= 0))"},
                 {"rule": "self.size() > 0"})
    budget = cel.Budget()
    got = errors(node, list(range(3000)), budget=budget)  # ends: the cost limit stops it
    assert got == ['root: Invalid value: "array": \'operation cancelled: actual cost limit '
                   "exceeded': no further validation rules will be run due to call cost "
                   "exceeds limit for rule: self.all(x, self.all(y, x + y >= 0))"]
    assert budget.exhausted


def test_budget_shared_by_rules_runs_out() -> None:
    node = _node(BIG_LIST, {"rule": "self.all(x, x >= 0)"}, {"rule": "self.all(x, x >= 0)"})
    budget = cel.Budget(remaining=600_000)
    got = errors(node, list(range(100_000)), budget=budget)
    assert got == ['root: Invalid value: "array": validation failed due to running out of cost '
                   "budget, no further validation rules will be run"]
    assert budget.exhausted
    assert errors(node, [1], budget=budget) == got


def test_budget_is_spent_exactly() -> None:
    node = _node(REPLICAS, MIN_MAX)
    budget = cel.Budget(remaining=100)
    errors(node, GOOD, budget=budget)
    assert budget.remaining == 95  # two selections of two steps each, and the comparison


def test_message_expression_out_of_budget() -> None:
    node = _node(BIG_LIST, {"rule": "false", "messageExpression":
                            "self.map(x, string(x)).join(',')"})
    budget = cel.Budget(remaining=1_000)
    got = errors(node, list(range(1_000)), budget=budget)
    assert got == ['root: Invalid value: "array": messageExpression evaluation failed due to '
                   "running out of cost budget, no further validation rules will be run"]


def test_per_call_limit_is_configurable() -> None:
    with pytest.raises(ValueError, match="per_call_limit"):
        cel.Budget(per_call_limit=0)


# -- CRD-time errors and the cache -------------------------------------------------------------

RULE_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("compile error", {"rule": "self.nope > 1"},
     "root.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{"
     'Rule:"self.nope > 1", Message:"", MessageExpression:"", '
     'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
     "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:5: undefined field "
     "'nope'"),
    ("not a bool", {"rule": "self.minReplicas", "message": "m"},
     "root.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{"
     'Rule:"self.minReplicas", Message:"m", MessageExpression:"", '
     'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
     "OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool"),
    ("messageExpression does not compile",
     {"rule": "true", "messageExpression": "self.nope", "reason": "FieldValueForbidden"},
     "root.x-kubernetes-validations[0].messageExpression: Invalid value: "
     'apiextensions.ValidationRule{Rule:"true", Message:"", MessageExpression:"self.nope", '
     'Reason:(*apiextensions.FieldValueErrorReason)(0xc000010000), FieldPath:"", '
     "OptionalOldSelf:(*bool)(nil)}: messageExpression compilation failed: ERROR: "
     "<input>:1:5: undefined field 'nope'"),
    ("messageExpression not a string", {"rule": "true", "messageExpression": "1"},
     "root.x-kubernetes-validations[0].messageExpression: Invalid value: "
     'apiextensions.ValidationRule{Rule:"true", Message:"", MessageExpression:"1", '
     'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
     "OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string"),
    ("optionalOldSelf without oldSelf", {"rule": "true", "optionalOldSelf": True},
     "root.x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if "
     "oldSelf is not used in rule"),
    ("bad fieldPath", {"rule": "true", "fieldPath": ".spec.nope"},
     "root.x-kubernetes-validations[0].fieldPath: Invalid value: \".spec.nope\": fieldPath "
     "must be a valid path"),
    ("unsupported reason", {"rule": "true", "reason": "FieldValueWrong"},
     "root.x-kubernetes-validations[0].reason: Unsupported value: \"FieldValueWrong\": supported "
     "values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", "
     "\"FieldValueRequired\""),
]


@pytest.mark.parametrize(("rule", "want"), [(r, w) for _, r, w in RULE_ERRORS],
                         ids=[c[0] for c in RULE_ERRORS])
def test_rule_errors(rule: dict[str, Any], want: str) -> None:
    node = _node(REPLICAS, rule)
    got = [e.error() for e in cel.rule_errors(node, FieldPath.root("root"),
                                              cache=cel.RuleCache())]
    assert len(got) == 1
    assert got[0].startswith(want), got[0]


def test_optional_old_self_is_judged_even_when_the_rule_does_not_compile() -> None:
    node = _node(REPLICAS, {"rule": "oldSelf.nope", "optionalOldSelf": True})
    got = [e.field for e in cel.rule_errors(node, FieldPath(), cache=cel.RuleCache())]
    assert got == ["x-kubernetes-validations[0].rule",
                   "x-kubernetes-validations[0].optionalOldSelf"]


def test_transition_rules_are_refused_where_nothing_correlates() -> None:
    node = _node(REPLICAS, {"rule": "self == oldSelf"}, {"rule": "self.name != ''"})
    got = [e.error() for e in cel.rule_errors(node, FieldPath.root("items"), cache=cel.RuleCache(),
                                              uncorrelatable=FieldPath.root("list"))]
    assert got == ['items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": '
                   "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                   "list"]


def test_go_rule_quotes_as_go_does() -> None:
    from setpoint.cel.compile import go_rule
    assert go_rule(cel.Rule(rule='self == "a\tb"', optional_old_self=False)) == (
        'apiextensions.ValidationRule{Rule:"self == \\"a\\tb\\"", Message:"", '
        'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
        'FieldPath:"", OptionalOldSelf:(*bool)(0xc000010000)}')


def test_valid_rules_have_no_crd_time_errors() -> None:
    node = _node(REPLICAS, MIN_MAX, {"rule": "self.name == oldSelf.name", "optionalOldSelf": False})
    assert cel.rule_errors(node, FieldPath.root("root"), cache=cel.RuleCache()) == []


def test_untyped_node_cannot_have_rules() -> None:
    node = _node({"x-kubernetes-preserve-unknown-fields": True}, {"rule": "true"})
    got = [e.error() for e in cel.rule_errors(node, FieldPath(), cache=cel.RuleCache())]
    assert got == ["x-kubernetes-validations: Internal error: failed to convert to declType for "
                   "CEL validation rules"]
    assert errors(node, {"a": 1}) == ['root: Invalid value: "": rule compiler initialization '
                                      "error: failed to convert to declType for CEL validation "
                                      "rules"]


def test_cache_compiles_once_per_rule_and_node() -> None:
    cache = cel.RuleCache()
    node = _node(REPLICAS, MIN_MAX, {"rule": "nope"})
    for _ in range(3):
        errors(node, GOOD, cache=cache)
    assert len(cache) == 2
    other = _node(REPLICAS, MIN_MAX)
    errors(other, GOOD, cache=cache)
    assert len(cache) == 3


@pytest.mark.parametrize(("rule", "uses_old_self"), [
    ("self == oldSelf", True),
    ("self.all(x, x == oldSelf[0])", True),
    ("self.all(oldSelf, oldSelf > 0)", False),
    ("self.map(x, oldSelf).size() > 0", True),
    ("self.size() > 0", False),
], ids=["direct", "in a macro", "shadowed", "in a map step", "absent"])
def test_transition_rule_detection(rule: str, uses_old_self: bool) -> None:
    assert compile_rule(rule).uses_old_self is uses_old_self


def test_compile_rule_raises_a_crd_time_message() -> None:
    with pytest.raises(cel.CELCompileError, match="compilation failed: ERROR: <input>:1:7"):
        compile_rule("self +")


@pytest.mark.parametrize(("path", "want"), [
    (".spec.replicas", "spec.replicas"),
    (".labels['a.b']", "labels[a.b]"),
    ("['spec'].replicas", "spec.replicas"),
    (".labels['it\\'s']", "labels[it's]"),
    (".spec.nope", None),
    ("spec", None),
    (".labels['unterminated", None),
], ids=["fields", "map key", "bracketed field", "escaped quote", "unknown field",
        "no leading dot", "unterminated"])
def test_normalize_field_path(path: str, want: str | None) -> None:
    assert cel.normalize_field_path(path, parse(REPLICAS)) == want


def test_rule_from_entry() -> None:
    rule = cel.Rule.from_entry({"rule": "self > 1", "message": "m", "messageExpression": "'x'",
                                "reason": "FieldValueForbidden", "fieldPath": ".a",
                                "optionalOldSelf": True})
    assert rule == cel.Rule(rule="self > 1", message="m", message_expression="'x'",
                            reason="FieldValueForbidden", field_path=".a",
                            optional_old_self=True)
    assert cel.Rule.from_entry({}).rule == ""


_NUMBER = {"type": "number"}
FIELD_PATH_SCHEMA = {"type": "object", "properties": {
    "foo": {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"subAdd": _NUMBER}}},
    "white space": _NUMBER,
    "'foo'bar": _NUMBER,
    "a": {"type": "object", "properties": {
        "foo's": _NUMBER, "test\a": _NUMBER, "bb[b": _NUMBER,
        "bbb": {"type": "object", "properties": {"c": _NUMBER, "34": _NUMBER}},
        "bbb.c": {"type": "object", "properties": {"a-b.3'4": _NUMBER}}}},
    "list": {"type": "array", "items": {"type": "object", "properties": {
        "a": _NUMBER, "a-b.3'4": _NUMBER}}},
}}


@pytest.mark.parametrize(("path", "want"), [
    (".a", "a"),
    ("['\\'foo\\'bar']", "'foo'bar"),
    (".\\'foo\\'bar", None),
    (". a", None),
    (".white space", "white space"),
    ("['white space']", "white space"),
    (".a.bb[b", None),
    (".a['bbb.c']", "a.bbb.c"),
    (".a['bbb.c'", None),
    (".", None),
    (".foo.subAdd", "foo[subAdd]"),
    (".foo['subAdd']", "foo[subAdd]"),
    (".a.foo's", "a.foo's"),
    (".a['foo\\'s']", "a.foo's"),
    (".a['test\\a']", "a.test\a"),
    (".a.foo", None),
    (".a.bbb[0]", None),
    (".a.bbb.34", "a.bbb.34"),
    (".a.bbb['34']", "a.bbb.34"),
    (".list", "list"),
    (".list[0]", None),
    (".list. a", None),
    (".list['a']", None),
    ("a", None),
    (".c", None),
    (".a..b", None),
    (".list.a-b.34", None),
], ids=lambda v: repr(v))
def test_field_paths_as_kubernetes_reads_them(path: str, want: str | None) -> None:
    assert cel.normalize_field_path(path, parse(FIELD_PATH_SCHEMA)) == want


def test_all_of_rules_are_typed_by_the_structural_node() -> None:
    node = parse({"type": "object", "properties": {"a": {"type": "integer"}},
                  "allOf": [{"x-kubernetes-validations": [{"rule": "self.a > 1"}]},
                            {"x-kubernetes-validations": [{"rule": "self.b > 1"}]}]})
    cache = cel.RuleCache()
    first, second = node.all_of
    assert cel.rule_errors(node, FieldPath(), cache=cache, rules=cel.rules_of(first)) == []
    got = cel.rule_errors(node, FieldPath(), cache=cache, rules=cel.rules_of(second))
    assert [e.field for e in got] == ["x-kubernetes-validations[0].rule"]
    assert [e.error() for e in cel.validate_rules(
        cel.rules_of(first), {"a": 0}, None, path=FieldPath(), has_old=False,
        budget=cel.Budget(), node=node, cache=cache)] == [
            '<nil>: Invalid value: "object": failed rule: self.a > 1']
