"""ValidatingAdmissionPolicies through kubectl: Kubernetes' denial message for a custom
resource and a ConfigMap, Warn mode as ``Warning:`` on stderr, params from a ConfigMap, and a
type error reported in the policy's status."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl, eventually
from tests.conftest import start_serve

pytestmark = pytest.mark.compat

DEMO_DENIAL = ("ValidatingAdmissionPolicy 'demo-policy.example.com' with binding "
               "'demo-binding-test.example.com' denied request: failed expression: "
               "object.spec.replicas <= 5")


@pytest.fixture(scope="module", autouse=True)
def setup(kubectl: Kubectl) -> None:
    kubectl.apply(MANIFESTS / "vap-gadgets.yaml")
    kubectl.run("wait", "--for=condition=Established", "crd/gadgets.admission.example.com",
                "--timeout=10s")
    kubectl.run("create", "namespace", "test-ns")
    kubectl.run("label", "namespace", "test-ns", "environment=test")
    kubectl.run("create", "namespace", "prod-ns")
    kubectl.apply(MANIFESTS / "vap-demo.yaml")


def gadget(name: str, replicas: int) -> str:
    return json.dumps({"apiVersion": "admission.example.com/v1", "kind": "Gadget",
                       "metadata": {"name": name}, "spec": {"replicas": replicas}})


def test_policy_denies_a_custom_resource_with_kubernetes_message(kubectl: Kubectl) -> None:
    result = kubectl.run("create", "-n", "test-ns", "-f", "-", check=False,
                         input=gadget("big", 9))
    assert result.returncode != 0
    # kubectl prints an Invalid status by its causes, as it does against Kubernetes
    assert result.stderr.strip() == f'The gadgets "big" is invalid: : {DEMO_DENIAL}'
    assert kubectl.run("get", "gadget", "big", "-n", "test-ns", check=False).returncode != 0
    kubectl.run("create", "-n", "test-ns", "-f", "-", input=gadget("small", 3))
    # the binding selects namespaces labelled environment=test only
    kubectl.run("create", "-n", "prod-ns", "-f", "-", input=gadget("big", 9))


def test_update_is_denied_too(kubectl: Kubectl) -> None:
    kubectl.run("create", "-n", "test-ns", "-f", "-", input=gadget("updated", 3))
    result = kubectl.run("patch", "gadget", "updated", "-n", "test-ns", "--type=merge", "-p",
                         '{"spec": {"replicas": 7}}', check=False)
    assert result.returncode != 0
    assert DEMO_DENIAL in result.stderr
    assert kubectl.json("get", "gadget", "updated", "-n", "test-ns")["spec"]["replicas"] == 3


def test_get_lists_policies_and_bindings(kubectl: Kubectl) -> None:
    out = kubectl.run("get", "validatingadmissionpolicies").stdout
    assert "demo-policy.example.com" in out
    out = kubectl.run("get", "validatingadmissionpolicybindings").stdout
    assert "demo-binding-test.example.com" in out
    assert "demo-policy.example.com" in out


def test_params_deny_and_warn_on_configmaps(kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "limited")
    kubectl.run("label", "namespace", "limited", "limited=yes")
    kubectl.run("create", "configmap", "limits", "-n", "limited", "--from-literal=max=2")
    kubectl.apply(MANIFESTS / "vap-configmaps.yaml")
    result = kubectl.run("create", "configmap", "wide", "-n", "limited", "--from-literal=a=1",
                         "--from-literal=b=2", "--from-literal=c=3", check=False)
    assert result.returncode != 0
    assert ('failed to create configmap: configmaps "wide" is forbidden: '
            "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-deny' denied "
            "request: a ConfigMap here has at most 2 keys, not 3") in result.stderr
    kubectl.run("create", "configmap", "narrow", "-n", "limited", "--from-literal=a=1")
    # elsewhere the bindings do not apply
    kubectl.run("create", "configmap", "wide", "-n", "default", "--from-literal=a=1",
                "--from-literal=b=2", "--from-literal=c=3")
    # Warn: the object is created and kubectl prints the warning
    wip = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "draft", "labels": {"stage": "wip"}},
                      "data": {"a": "1", "b": "2", "c": "3"}})
    result = kubectl.run("create", "-n", "limited", "-f", "-", input=wip)
    assert ("Warning: Validation failed for ValidatingAdmissionPolicy 'max-keys' with binding "
            "'max-keys-warn': a ConfigMap here has at most 2 keys, not 3") in result.stderr
    assert kubectl.json("get", "configmap", "draft", "-n", "limited")["data"]["c"] == "3"
    # raising the limit in the params lets the write through
    kubectl.run("patch", "configmap", "limits", "-n", "limited", "--type=merge", "-p",
                '{"data": {"max": "5"}}')
    kubectl.run("create", "configmap", "wide", "-n", "limited", "--from-literal=a=1",
                "--from-literal=b=2", "--from-literal=c=3")


def test_a_type_error_shows_in_the_status(kubectl: Kubectl) -> None:
    policy = json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "typo.example.com"},
        "spec": {"matchConstraints": {"resourceRules": [{
            "apiGroups": ["admission.example.com"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["gadgets"]}]},
            "validations": [{"expression": "object.spec.replica <= 5"}]}})
    kubectl.run("apply", "-f", "-", input=policy)
    status = kubectl.json("get", "validatingadmissionpolicy", "typo.example.com")["status"]
    warning = status["typeChecking"]["expressionWarnings"][0]
    assert warning["fieldRef"] == "spec.validations[0].expression"
    assert warning["warning"].startswith(
        "admission.example.com/v1, Kind=Gadget: compilation failed: ERROR: <input>:1:12: "
        "undefined field 'replica'")


def test_an_expression_that_does_not_compile_is_refused(kubectl: Kubectl) -> None:
    policy = json.dumps({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "broken.example.com"},
        "spec": {"matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["configmaps"]}]},
            "validations": [{"expression": "object.data.size() >"}]}})
    result = kubectl.run("apply", "-f", "-", input=policy, check=False)
    assert result.returncode != 0
    assert ('The ValidatingAdmissionPolicy "broken.example.com" is invalid: '
            'spec.validations[0].expression: Invalid value: "object.data.size() >": '
            "compilation failed: ERROR: <input>:1:21: Syntax error:") in result.stderr


@pytest.mark.slow
def test_audit_action_and_annotations_reach_the_audit_log(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    log = tmp_path / "audit" / "audit.log"
    serve = start_serve(tmp_path / "data", extra_args=["--audit-log-path", str(log)])
    try:
        kubectl = Kubectl(serve.kubeconfig, tmp_path / "cache", {})
        policy = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "audited"},
            "spec": {"matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["configmaps"]}]},
                "validations": [{"expression": "!has(object.data) || size(object.data) < 2",
                                 "message": "too many keys"}],
                "auditAnnotations": [{"key": "keys", "valueExpression":
                                      "string(has(object.data) ? size(object.data) : 0)"}]}}
        binding = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "audited-b"},
            "spec": {"policyName": "audited", "validationActions": ["Audit"]}}
        kubectl.run("apply", "-f", "-", input=json.dumps(policy))
        kubectl.run("apply", "-f", "-", input=json.dumps(binding))
        kubectl.run("create", "configmap", "two", "--from-literal=a=1", "--from-literal=b=2")

        def created() -> dict[str, Any] | None:
            for line in log.read_text().splitlines():
                event = json.loads(line)
                if event["verb"] == "create" and event.get("objectRef", {}).get(
                        "resource") == "configmaps" and event["stage"] == "ResponseComplete" \
                        and "audited/keys" in event.get("annotations", {}):
                    return dict(event)
            return None

        event = eventually(created)
        annotations = event["annotations"]
        assert annotations["audited/keys"] == "2"
        assert json.loads(annotations[
            "validation.policy.admission.k8s.io/validation_failure"]) == [{
                "message": "too many keys", "policy": "audited", "binding": "audited-b",
                "expressionIndex": 0, "validationActions": ["Audit"]}]
        assert event["responseStatus"]["code"] == 201
    finally:
        serve.stop()
