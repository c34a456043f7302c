"""``x-kubernetes-validations`` through :class:`CompiledSchema` and :func:`check_structural`:
which rules run when, with which ``oldSelf``, what they report and where (cases after
apiextensions-apiserver's ``pkg/apiserver/schema/cel/validation_test.go`` and its ratcheting
integration tests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.schema import CompiledSchema, check_structural

STR = {"type": "string"}
INT = {"type": "integer"}


def rules(*entries: dict[str, Any] | str) -> list[dict[str, Any]]:
    return [{"rule": e} if isinstance(e, str) else e for e in entries]


def resource(spec: dict[str, Any], **root: Any) -> dict[str, Any]:
    """A resource schema whose ``spec`` is ``spec``."""
    return {"type": "object", **root, "properties": {
        "apiVersion": STR, "kind": STR, "metadata": {"type": "object"}, "spec": spec}}


def obj(spec: Any, name: str = "w1") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": name, "resourceVersion": "1"}, "spec": spec}


REPLICAS = resource({
    "type": "object",
    "x-kubernetes-validations": rules({"rule": "self.minReplicas <= self.maxReplicas",
                                       "message": "minReplicas must not exceed maxReplicas"}),
    "properties": {"minReplicas": INT, "maxReplicas": INT, "other": STR}})

IMMUTABLE = resource({"type": "object", "properties": {
    "name": {"type": "string",
             "x-kubernetes-validations": rules({"rule": "self == oldSelf",
                                                "message": "field is immutable"})},
    "other": STR}})

OPTIONAL_OLD_SELF = resource({"type": "object", "properties": {
    "size": {"type": "integer", "x-kubernetes-validations": rules(
        {"rule": "!oldSelf.hasValue() || self >= oldSelf.value()", "optionalOldSelf": True,
         "message": "cannot shrink"})},
    "token": {"type": "string", "x-kubernetes-validations": rules(
        {"rule": "!oldSelf.hasValue()", "optionalOldSelf": True,
         "message": "can only be set on creation"})}}})


def with_rule(**entry: Any) -> dict[str, Any]:
    """REPLICAS with its spec rule replaced by ``entry`` (plus the same rule)."""
    schema = copy.deepcopy(REPLICAS)
    schema["properties"]["spec"]["x-kubernetes-validations"] = [
        {"rule": "self.minReplicas <= self.maxReplicas", **entry}]
    return schema


ITEMS = resource({"type": "object", "properties": {
    "items": {"type": "array", "items": {
        "type": "object", "properties": {"name": STR, "size": INT},
        "x-kubernetes-validations": rules({"rule": "self.size >= 0",
                                           "message": "size must not be negative"})}},
    "labels": {"type": "object", "additionalProperties": {
        "type": "string", "x-kubernetes-validations": rules(
            {"rule": "self.size() <= 5", "message": "label value too long"})}}}})

PORTS = resource({"type": "object", "properties": {
    "ports": {"type": "array", "x-kubernetes-list-type": "map",
              "x-kubernetes-list-map-keys": ["name"],
              "items": {"type": "object", "required": ["name"],
                        "properties": {"name": STR, "port": INT, "note": STR},
                        "x-kubernetes-validations": rules(
                            {"rule": "self.port == oldSelf.port", "message": "port is immutable"},
                            {"rule": "self.port > 0", "message": "port must be positive"})}},
    "tags": {"type": "array", "items": {
        "type": "object", "properties": {"name": STR, "v": INT},
        "x-kubernetes-validations": rules(
            {"rule": "self.v == oldSelf.v", "message": "never runs: items do not correlate"},
            {"rule": "self.v > 0", "message": "v must be positive"})}}}})

ROOT = resource({"type": "object", "properties": {"replicas": INT}},
                **{"x-kubernetes-validations": rules(
                    {"rule": "self.metadata.name.startsWith('w')",
                     "message": "name must start with w"},
                    {"rule": "self.kind == oldSelf.kind", "message": "kind is immutable"})})

NOT_CHECKED = ('<nil>: Invalid value: "null": some validation rules were not checked because the '
               "object was invalid; correct the existing errors to complete validation")

# (name, schema, new spec or object, old spec or object (None: a create), errors)
CASES: list[tuple[str, dict[str, Any], Any, Any, list[str]]] = [
    # --- a rule on spec
    ("rule holds", REPLICAS, {"minReplicas": 1, "maxReplicas": 3}, None, []),
    ("rule fails with its message", REPLICAS, {"minReplicas": 5, "maxReplicas": 3}, None,
     ['spec: Invalid value: "object": minReplicas must not exceed maxReplicas']),
    ("missing field is a runtime error", REPLICAS, {"minReplicas": 5}, None,
     ['spec: Invalid value: "object": no such key: maxReplicas evaluating rule: minReplicas '
      "must not exceed maxReplicas"]),
    ("no message: the rule is shown", with_rule(), {"minReplicas": 5, "maxReplicas": 3}, None,
     ['spec: Invalid value: "object": failed rule: self.minReplicas <= self.maxReplicas']),
    ("messageExpression", with_rule(messageExpression=(
        "'minReplicas (' + string(self.minReplicas) + ') exceeds maxReplicas (' + "
        "string(self.maxReplicas) + ')'")), {"minReplicas": 5, "maxReplicas": 3}, None,
     ['spec: Invalid value: "object": minReplicas (5) exceeds maxReplicas (3)']),
    ("failing messageExpression falls back to message",
     with_rule(message="fallback", messageExpression="string(1 / 0)"),
     {"minReplicas": 5, "maxReplicas": 3}, None, ['spec: Invalid value: "object": fallback']),
    ("reason Forbidden", with_rule(message="m", reason="FieldValueForbidden"),
     {"minReplicas": 5, "maxReplicas": 3}, None, ["spec: Forbidden: m"]),
    ("reason Required", with_rule(message="m", reason="FieldValueRequired"),
     {"minReplicas": 5, "maxReplicas": 3}, None, ["spec: Required value: m"]),
    ("reason Duplicate", with_rule(message="m", reason="FieldValueDuplicate"),
     {"minReplicas": 5, "maxReplicas": 3}, None, ['spec: Duplicate value: "object"']),
    ("fieldPath", with_rule(message="m", fieldPath=".minReplicas"),
     {"minReplicas": 5, "maxReplicas": 3}, None, ['spec.minReplicas: Invalid value: "object": m']),
    ("rule errors merge with value errors, sorted", resource({
        "type": "object", "x-kubernetes-validations": rules("self.a != 'x'"),
        "properties": {"a": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                       "b": {"type": "string", "pattern": "^[a-z]+$"}}}),
     {"a": "x", "b": "1"}, None,
     ['spec: Invalid value: "object": failed rule: self.a != \'x\'',
      'spec.b: Invalid value: "1": spec.b in body should match \'^[a-z]+$\'']),
    ("a blocking value error stops the rules", resource({
        "type": "object", "required": ["minReplicas"], "x-kubernetes-validations": rules("false"),
        "properties": {"minReplicas": INT}}), {}, None,
     [NOT_CHECKED, "spec.minReplicas: Required value"]),
    ("a wrong type is blocking", REPLICAS, {"minReplicas": "5", "maxReplicas": 3}, None,
     [NOT_CHECKED, 'spec.minReplicas: Invalid value: "string": spec.minReplicas in body must be '
      'of type integer: "string"']),
    ("null values run no rules", resource({"type": "object", "nullable": True,
                                           "x-kubernetes-validations": rules("false")}),
     None, None, []),
    # --- the root
    ("root rules see metadata.name, at <nil>", ROOT, obj({}, name="x1"), None,
     ['<nil>: Invalid value: "object": name must start with w']),
    ("root transition rule", ROOT, {**obj({}), "kind": "Gadget"}, obj({}),
     ['<nil>: Invalid value: "object": kind is immutable']),
    # --- transition rules
    ("immutable: create passes", IMMUTABLE, {"name": "a"}, None, []),
    ("immutable: changing it fails", IMMUTABLE, {"name": "b"}, {"name": "a"},
     ['spec.name: Invalid value: "string": field is immutable']),
    ("immutable: keeping it passes", IMMUTABLE, {"name": "a", "other": "y"},
     {"name": "a", "other": "x"}, []),
    ("immutable: setting it where it was absent passes", IMMUTABLE, {"name": "a"}, {}, []),
    ("immutable: null old value is no old value", IMMUTABLE, {"name": "a"}, {"name": None}, []),
    ("optionalOldSelf runs on create", OPTIONAL_OLD_SELF, {"size": 1, "token": "t"}, None, []),
    ("optionalOldSelf compares on update", OPTIONAL_OLD_SELF, {"size": 1}, {"size": 3},
     ['spec.size: Invalid value: "integer": cannot shrink']),
    ("optionalOldSelf: growing passes", OPTIONAL_OLD_SELF, {"size": 4}, {"size": 3}, []),
    ("optionalOldSelf sees none for a new field on update", OPTIONAL_OLD_SELF,
     {"size": 3, "token": "t"}, {"size": 3}, []),
    ("optionalOldSelf: an unchanged field still fails (no ratcheting)", OPTIONAL_OLD_SELF,
     {"size": 3, "token": "t"}, {"size": 3, "token": "t"},
     ['spec.token: Invalid value: "string": can only be set on creation']),
    # --- list items and map values
    ("list items, paths by index", ITEMS,
     {"items": [{"name": "a", "size": 1}, {"name": "b", "size": -1}]}, None,
     ['spec.items[1]: Invalid value: "object": size must not be negative']),
    ("map values, paths by key", ITEMS, {"labels": {"ok": "short", "key": "too long"}}, None,
     ['spec.labels[key]: Invalid value: "string": label value too long']),
    ("list-map items correlate by key", PORTS,
     {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 1}]},
     {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}, []),
    ("list-map item changed", PORTS,
     {"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 9}]},
     {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]},
     ['spec.ports[1]: Invalid value: "object": port is immutable']),
    ("list-map item added: no oldSelf", PORTS,
     {"ports": [{"name": "a", "port": 1}, {"name": "c", "port": 7}]},
     {"ports": [{"name": "a", "port": 1}]}, []),
    ("items of other lists have no oldSelf", PORTS, {"tags": [{"name": "a", "v": 2}]},
     {"tags": [{"name": "a", "v": 1}]}, []),
    # --- ratcheting (rules without oldSelf on unchanged parts warn instead)
    ("unchanged invalid spec is ratcheted", REPLICAS, obj({"minReplicas": 5, "maxReplicas": 3}),
     {**obj({"minReplicas": 5, "maxReplicas": 3}), "metadata": {"name": "w1",
                                                                 "labels": {"a": "b"}}}, []),
    ("changed spec is not ratcheted", REPLICAS,
     obj({"minReplicas": 5, "maxReplicas": 3, "other": "y"}),
     obj({"minReplicas": 5, "maxReplicas": 3, "other": "x"}),
     ['spec: Invalid value: "object": minReplicas must not exceed maxReplicas']),
    ("unchanged list-map item is ratcheted while another changes", PORTS,
     obj({"ports": [{"name": "a", "port": -1}, {"name": "b", "port": 2, "note": "new"}]}),
     obj({"ports": [{"name": "a", "port": -1}, {"name": "b", "port": 2}]}), []),
    ("unchanged item of a changed atomic list is not ratcheted", PORTS,
     obj({"tags": [{"name": "a", "v": -1}, {"name": "b", "v": 2}]}),
     obj({"tags": [{"name": "a", "v": -1}, {"name": "b", "v": 1}]}),
     ['spec.tags[0]: Invalid value: "object": v must be positive']),
    ("items of an unchanged atomic list are ratcheted", PORTS,
     obj({"tags": [{"name": "a", "v": -1}], "ports": [{"name": "x", "port": 3}]}),
     obj({"tags": [{"name": "a", "v": -1}]}), []),
    ("an unchanged map value is ratcheted beside a new key", ITEMS,
     obj({"labels": {"key": "too long", "n": "x"}}),
     obj({"labels": {"key": "too long"}}), []),
]


def _wrap(value: Any) -> Any:
    """A spec becomes a whole object; a whole object (or None) stays as it is."""
    if isinstance(value, dict) and "apiVersion" in value:
        return value
    return obj(value)


@pytest.mark.parametrize(("schema", "new", "old", "want"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_rules(schema: dict[str, Any], new: Any, old: Any, want: list[str]) -> None:
    compiled = CompiledSchema.from_openapi(schema)
    new_obj = _wrap(new)
    before = copy.deepcopy(new_obj)
    if old is None:
        got = compiled.validate(new_obj)
    else:
        got = compiled.validate_update(new_obj, _wrap(old))
    assert [e.error() for e in got] == want
    assert new_obj == before


def test_ratcheted_failures_are_warnings() -> None:
    compiled = CompiledSchema.from_openapi(PORTS)
    warnings: list[str] = []
    new = obj({"ports": [{"name": "a", "port": -1}, {"name": "b", "port": 2, "note": "new"}]})
    old = obj({"ports": [{"name": "a", "port": -1}, {"name": "b", "port": 2}]})
    assert compiled.validate_update(new, old, warnings=warnings) == []
    assert warnings == ['spec.ports[0]: Invalid value: "object": port must be positive']


def test_a_new_map_key_fails_as_on_create() -> None:
    compiled = CompiledSchema.from_openapi(ITEMS)
    got = compiled.validate_update(obj({"labels": {"key": "too long", "new": "also long"}}),
                                   obj({"labels": {"key": "too long"}}))
    assert [e.error() for e in got] == [
        'spec.labels[new]: Invalid value: "string": label value too long']


def test_budget_runs_out_over_a_large_list() -> None:
    """One budget per object: 10,000,000 units. Each item's rule scans a 1,000,000-character
    string (about 100,000 units), so the budget runs out near the hundredth item; nothing runs
    after it, not even the rule of a later field."""
    schema = resource({"type": "object", "properties": {
        "big": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": rules(
            "!self.contains('needle')")}},
        "after": {"type": "string", "x-kubernetes-validations": rules(
            {"rule": "false", "message": "not reached"})}}})
    haystack = "x" * 1_000_000
    got = CompiledSchema.from_openapi(schema).validate(obj({"big": [haystack] * 150,
                                                            "after": "a"}))
    assert len(got) == 1
    assert got[0].field.startswith("spec.big[")
    index = int(got[0].field[len("spec.big["):-1])
    assert 90 <= index < 110
    assert got[0].message() == ('Invalid value: "string": validation failed due to running out '
                                "of cost budget, no further validation rules will be run")


def test_budget_is_per_object() -> None:
    schema = resource({"type": "object", "properties": {
        "big": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": rules(
            "!self.contains('needle')")}}}})
    compiled = CompiledSchema.from_openapi(schema)
    small = obj({"big": ["x" * 1_000_000] * 50})
    for _ in range(3):
        assert compiled.validate(small) == []


def test_rules_are_compiled_once_per_schema() -> None:
    compiled = CompiledSchema.from_openapi(ITEMS)
    spec = {"items": [{"name": str(i), "size": i} for i in range(50)],
            "labels": {str(i): "v" for i in range(50)}}
    assert compiled.validate(obj(spec)) == []
    cache = compiled._rules._cache  # type: ignore[union-attr]
    assert len(cache) == 2
    compiled.validate(obj(spec))
    assert len(cache) == 2


def test_no_rules_no_rule_validator() -> None:
    assert not CompiledSchema.from_openapi(resource({"type": "object"})).has_rules
    assert CompiledSchema.from_openapi(REPLICAS).has_rules


def test_rules_only_inside_all_of_never_run() -> None:
    """As upstream (``hasXValidations`` does not look into junctors); such a schema is not
    structural, so only a v1beta1 CRD can carry it."""
    schema = resource({"type": "object", "allOf": [{"x-kubernetes-validations": rules("false")}]})
    assert not CompiledSchema.from_openapi(schema).has_rules
    schema["properties"]["spec"]["x-kubernetes-validations"] = rules("true")
    got = CompiledSchema.from_openapi(schema).validate(obj({}))
    assert [e.error() for e in got] == ['spec: Invalid value: "object": failed rule: false']


def test_untypable_fields_are_not_visited() -> None:
    schema = resource({"type": "object", "properties": {"free": {
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"a": {"type": "string", "x-kubernetes-validations": rules("false")}}}}})
    assert CompiledSchema.from_openapi(schema).validate(obj({"free": {"a": "x"}})) == []


def test_embedded_resources_see_their_type_meta() -> None:
    schema = resource({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": True,
        "x-kubernetes-preserve-unknown-fields": True,
        "x-kubernetes-validations": rules({"rule": "self.kind == 'Pod'",
                                           "message": "pods only"})}}})
    compiled = CompiledSchema.from_openapi(schema)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert compiled.validate(obj({"template": pod})) == []
    got = compiled.validate(obj({"template": {**pod, "kind": "Job"}}))
    assert [e.error() for e in got] == ['spec.template: Invalid value: "object": pods only']


_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-2, 2),
              st.sampled_from(["", "a", "b", "too long value", "x"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["name", "port", "note", "v", "size", "minReplicas",
                                         "maxReplicas", "items", "labels", "ports", "tags",
                                         "key"]), inner, max_size=4)),
    max_leaves=10)
_SCHEMAS = [REPLICAS, IMMUTABLE, OPTIONAL_OLD_SELF, ITEMS, PORTS, ROOT]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.sampled_from(range(len(_SCHEMAS))), new=_values, old=_values)
def test_never_raises(which: int, new: Any, old: Any) -> None:
    compiled = CompiledSchema.from_openapi(_SCHEMAS[which])
    before = copy.deepcopy(new)
    compiled.validate(obj(new))
    compiled.validate_update(obj(new), obj(old))
    compiled.validate_update(new, old)
    assert new == before


# --- CRD time --------------------------------------------------------------------------------

P = "spec.validation.openAPIV3Schema"


def crd_errors(schema: dict[str, Any]) -> list[str]:
    return [e.error() for e in check_structural(schema)]


def test_uncompilable_rule_is_refused_with_kubernetes_message() -> None:
    schema = resource({"type": "object", "properties": {"replicas": INT},
                       "x-kubernetes-validations": rules(
                           {"rule": "self.replicas > 0 && self.nope", "message": "m"})})
    assert crd_errors(schema) == [
        f"{P}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
        'apiextensions.ValidationRule{Rule:"self.replicas > 0 && self.nope", Message:"m", '
        'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
        'FieldPath:"", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:26: '
        "undefined field 'nope'\n | self.replicas > 0 && self.nope\n | " + "." * 25 + "^"]


CRD_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("valid rules", ITEMS, []),
    ("valid root and transition rules", ROOT, []),
    ("type mismatch", resource({"type": "object", "properties": {"n": {
        "type": "integer", "x-kubernetes-validations": rules("self == true")}}}),
     [f"{P}.properties[spec].properties[n].x-kubernetes-validations[0].rule: Invalid value: "
      'apiextensions.ValidationRule{Rule:"self == true", Message:"", MessageExpression:"", '
      'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
      "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:6: found no matching "
      "overload for '_==_' applied to '(int, bool)'\n | self == true\n | .....^"]),
    ("not a bool", resource({"type": "object", "x-kubernetes-validations": rules("1")}),
     [f"{P}.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
      'apiextensions.ValidationRule{Rule:"1", Message:"", MessageExpression:"", '
      'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
      "OptionalOldSelf:(*bool)(nil)}: cel expression must evaluate to a bool"]),
    ("oldSelf on items of an atomic list", resource({"type": "object", "properties": {
        "l": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": rules(
            "self == oldSelf")}}}}),
     [f"{P}.properties[spec].properties[l].items.x-kubernetes-validations[0].rule: Invalid "
      'value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the '
      f"schema within {P}.properties[spec].properties[l]"]),
    ("oldSelf on items of a map list", PORTS,
     [f"{P}.properties[spec].properties[tags].items.x-kubernetes-validations[0].rule: Invalid "
      'value: "self.v == oldSelf.v": oldSelf cannot be used on the uncorrelatable portion of '
      f"the schema within {P}.properties[spec].properties[tags]"]),
    ("fieldPath naming no field", with_rule(fieldPath=".nope"),
     [f"{P}.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: \".nope\": "
      "fieldPath must be a valid path"]),
    ("a schema error below a node: its rules are not compiled", resource({
        "type": "object", "x-kubernetes-validations": rules("self.nope"),
        "properties": {"l": {"type": "array", "x-kubernetes-list-type": "bogus",
                             "items": STR}}}),
     [f'{P}.properties[spec].properties[l].x-kubernetes-list-type: Unsupported value: "bogus": '
      'supported values: "atomic", "set", "map"']),
    ("a blank message", with_rule(message="  "),
     [f'{P}.properties[spec].x-kubernetes-validations[0].message: Invalid value: "  ": message '
      "must be non-empty if specified"]),
    ("a message with a line break", with_rule(message="a\nb"),
     [f'{P}.properties[spec].x-kubernetes-validations[0].message: Invalid value: "a\\nb": '
      "message must not contain line breaks"]),
    ("a blank fieldPath", with_rule(fieldPath=" "),
     [f'{P}.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: " ": '
      "fieldPath must be a valid path",
      f'{P}.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: " ": '
      "fieldPath must be non-empty if specified"]),
    # defaults must satisfy the rules (ValidateDefaults)
    ("a default breaking its rule", resource({"type": "object", "properties": {"n": {
        "type": "integer", "default": 0, "x-kubernetes-validations": rules("self >= 1")}}}),
     [f'{P}.properties[spec].properties[n].default: Invalid value: "integer": failed rule: '
      "self >= 1"]),
    ("a default breaking a rule below it", resource({
        "type": "object", "default": {"a": 0}, "properties": {"a": {
            "type": "integer", "x-kubernetes-validations": rules(
                {"rule": "self >= 1", "message": "a must be positive"})}}}),
     [f'{P}.properties[spec].default.a: Invalid value: "integer": a must be positive']),
    ("a default is its own old value", resource({"type": "object", "properties": {"n": {
        "type": "integer", "default": 3, "x-kubernetes-validations": rules(
            "self == oldSelf")}}}), []),
    ("a default is also checked as a create", resource({"type": "object", "properties": {"n": {
        "type": "integer", "default": 3, "x-kubernetes-validations": rules(
            {"rule": "oldSelf.hasValue() ? self == oldSelf.value() : self > 5",
             "optionalOldSelf": True})}}}),
     [f'{P}.properties[spec].properties[n].default: Invalid value: "integer": failed rule: '
      "oldSelf.hasValue() ? self == oldSelf.value() : self > 5"]),
    ("a rule that does not compile fails its default first", resource({
        "type": "object", "properties": {"n": {
            "type": "integer", "default": 3, "x-kubernetes-validations": rules("self.nope")}}}),
     [f'{P}.properties[spec].properties[n].default: Invalid value: "integer": rule compile '
      "error: compilation failed: ERROR: <input>:1:5: type 'int' does not support field "
      "selection\n | self.nope\n | ....^"]),
    ("a non-structural schema: no rule is compiled", {"type": "object", "properties": {
        "spec": {"x-kubernetes-validations": rules("self.nope")}}},
     [f"{P}.properties[spec].type: Required value: must not be empty for specified object "
      "fields"]),
]


@pytest.mark.parametrize(("schema", "want"), [c[1:] for c in CRD_CASES],
                         ids=[c[0] for c in CRD_CASES])
def test_crd_time(schema: dict[str, Any], want: list[str]) -> None:
    assert crd_errors(schema) == want
