"""CRD validation rules (``x-kubernetes-validations``) seen through kubectl: messages of failing
rules, transition rules making a field immutable, and CRDs whose rules do not compile."""

from __future__ import annotations

import json

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl, eventually

pytestmark = pytest.mark.compat

CRD = "crd/scalers.cel.example.com"


@pytest.fixture(scope="module", autouse=True)
def scalers_crd(kubectl: Kubectl) -> None:
    kubectl.apply(MANIFESTS / "crd-cel-rules.yaml")
    kubectl.run("wait", "--for=condition=Established", CRD, "--timeout=10s")
    kubectl.apply(MANIFESTS / "cel-scaler.yaml")


def scaler(name: str, **spec: object) -> str:
    return json.dumps({"apiVersion": "cel.example.com/v1", "kind": "Scaler",
                       "metadata": {"name": name}, "spec": spec})


def test_failing_rule_rejects_the_object_with_its_message(kubectl: Kubectl) -> None:
    result = kubectl.run("apply", "-f", "-", check=False,
                         input=scaler("bad", minReplicas=5, maxReplicas=3))
    assert result.returncode != 0
    assert ('The Scaler "bad" is invalid: spec: Invalid value: "object": minReplicas must not '
            "exceed maxReplicas") in result.stderr
    assert kubectl.run("get", "scaler", "bad", check=False).returncode != 0


def test_message_expression_and_field_path(kubectl: Kubectl) -> None:
    result = kubectl.run("create", "-f", "-", check=False, input=scaler(
        "ports", minReplicas=1, maxReplicas=1, ports=[{"name": "http", "port": 80},
                                                      {"name": "odd", "port": 70000}]))
    assert result.returncode != 0
    assert ('The Scaler "ports" is invalid: spec.ports[1].port: Invalid value: "object": '
            "port 70000 is out of range") in result.stderr


def test_valid_object_is_created(kubectl: Kubectl) -> None:
    spec = kubectl.json("get", "scaler", "web")["spec"]
    assert spec["storageClass"] == "standard"


def test_transition_rule_makes_a_field_immutable(kubectl: Kubectl) -> None:
    result = kubectl.run("patch", "scaler", "web", "--type=merge", "-p",
                         '{"spec": {"storageClass": "fast"}}', check=False)
    assert result.returncode != 0
    assert ('The Scaler "web" is invalid: spec.storageClass: Invalid value: "string": field is '
            "immutable") in result.stderr
    assert kubectl.json("get", "scaler", "web")["spec"]["storageClass"] == "standard"


def test_changing_another_field_passes(kubectl: Kubectl) -> None:
    kubectl.run("patch", "scaler", "web", "--type=merge", "-p", '{"spec": {"maxReplicas": 5}}')
    spec = kubectl.json("get", "scaler", "web")["spec"]
    assert spec["maxReplicas"] == 5
    assert spec["storageClass"] == "standard"


def test_update_breaking_a_rule_is_refused(kubectl: Kubectl) -> None:
    result = kubectl.run("patch", "scaler", "web", "--type=merge", "-p",
                         '{"spec": {"minReplicas": 9}}', check=False)
    assert result.returncode != 0
    assert ('spec: Invalid value: "object": minReplicas must not exceed maxReplicas'
            in result.stderr)


def test_crd_with_a_rule_that_does_not_compile_is_refused(kubectl: Kubectl) -> None:
    result = kubectl.run("apply", "-f", str(MANIFESTS / "crd-cel-broken.yaml"), check=False)
    assert result.returncode != 0
    assert 'The CustomResourceDefinition "gauges.cel.example.com" is invalid: ' in result.stderr
    assert (".openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "
            'apiextensions.ValidationRule{Rule:"self.level > self.limit", '
            'Message:"level must exceed limit", MessageExpression:"", '
            'Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:"", '
            "OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:18: undefined "
            "field 'limit'\n | self.level > self.limit\n | .................^") in result.stderr
    assert kubectl.run("get", "crd", "gauges.cel.example.com", check=False).returncode != 0


def _meters_crd(*rules: dict[str, str]) -> str:
    class_schema: dict[str, object] = {"type": "string"}
    if rules:
        class_schema["x-kubernetes-validations"] = list(rules)
    spec = {"type": "object",
            "properties": {"class": class_schema, "reading": {"type": "integer"}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "meters.cel.example.com"},
        "spec": {"group": "cel.example.com", "scope": "Namespaced",
                 "names": {"plural": "meters", "singular": "meter", "kind": "Meter"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]}})


def test_a_rule_added_later_ratchets_unchanged_fields(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=_meters_crd())
    kubectl.run("wait", "--for=condition=Established", "crd/meters.cel.example.com",
                "--timeout=10s")
    meter = {"apiVersion": "cel.example.com/v1", "kind": "Meter", "metadata": {"name": "m1"},
             "spec": {"class": "standard", "reading": 1}}
    kubectl.run("apply", "-f", "-", input=json.dumps(meter))
    kubectl.run("apply", "-f", "-", input=_meters_crd(
        {"rule": "self.startsWith('fast')", "message": "class must be a fast one"}))

    def new_rule_applies() -> bool:
        other = {**meter, "metadata": {"name": "m2"}}
        result = kubectl.run("create", "-f", "-", input=json.dumps(other), check=False)
        return result.returncode != 0 and 'spec.class: Invalid value: "string": class must be ' \
            "a fast one" in result.stderr

    eventually(new_rule_applies)
    # m1 breaks the new rule, but its class is unchanged: the update is allowed.
    kubectl.run("patch", "meter", "m1", "--type=merge", "-p", '{"spec": {"reading": 2}}')
    assert kubectl.json("get", "meter", "m1")["spec"] == {"class": "standard", "reading": 2}
    # Changing the class itself must satisfy the rule.
    result = kubectl.run("patch", "meter", "m1", "--type=merge", "-p",
                         '{"spec": {"class": "slow"}}', check=False)
    assert result.returncode != 0
    assert 'spec.class: Invalid value: "string": class must be a fast one' in result.stderr
