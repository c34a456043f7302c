"""MutatingAdmissionPolicies through kubectl 1.32 (``admissionregistration.k8s.io/v1alpha1``):
a label added by an apply configuration and replicas defaulted by a JSON patch from params
on Deployments, a match condition that opts out, ``kubectl get`` of both kinds, and a
runtime error refused under ``failurePolicy: Fail`` and let through under ``Ignore``, and
each invocation in the audit log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl, eventually
from tests.conftest import start_serve

pytestmark = pytest.mark.compat

STAMP = "admission.example.com/stamped"


@pytest.fixture(scope="module", autouse=True)
def setup(kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "mutated")
    kubectl.run("label", "namespace", "mutated", "mutate=yes")
    kubectl.run("create", "namespace", "plain")
    kubectl.run("create", "configmap", "defaults", "-n", "mutated",
                "--from-literal=replicas=3")
    kubectl.apply(MANIFESTS / "map-demo.yaml")


def deployment(name: str, **annotations: str) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})


def test_a_deployment_is_labelled_and_defaulted(kubectl: Kubectl) -> None:
    kubectl.run("create", "-n", "mutated", "-f", "-", input=deployment("web"))
    got = kubectl.json("get", "deployment", "web", "-n", "mutated")
    assert got["metadata"]["labels"][STAMP] == "true"
    assert got["spec"]["replicas"] == 3
    # the match condition lets a Deployment keep its replicas
    kubectl.run("create", "-n", "mutated", "-f", "-", input=deployment(
        "kept", **{"admission.example.com/keep-replicas": "yes"}))
    got = kubectl.json("get", "deployment", "kept", "-n", "mutated")
    assert got["spec"]["replicas"] == 1
    assert got["metadata"]["labels"][STAMP] == "true"
    # elsewhere the bindings do not apply
    kubectl.run("create", "-n", "plain", "-f", "-", input=deployment("web"))
    got = kubectl.json("get", "deployment", "web", "-n", "plain")
    assert STAMP not in (got["metadata"].get("labels") or {})
    assert got["spec"]["replicas"] == 1


def test_an_update_is_mutated_too(kubectl: Kubectl) -> None:
    kubectl.run("create", "-n", "mutated", "-f", "-", input=deployment("updated"))
    kubectl.run("label", "deployment", "updated", "-n", "mutated", f"{STAMP}-")
    got = kubectl.json("get", "deployment", "updated", "-n", "mutated")
    assert got["metadata"]["labels"][STAMP] == "true"


def test_get_lists_policies_and_bindings(kubectl: Kubectl) -> None:
    out = kubectl.run("get", "mutatingadmissionpolicies").stdout
    assert "stamp-deployments" in out
    assert "default-replicas" in out
    out = kubectl.run("get", "mutatingadmissionpolicybindings").stdout
    assert "stamp-deployments" in out
    got = kubectl.json("get", "mutatingadmissionpolicies.v1alpha1.admissionregistration.k8s.io",
                       "default-replicas")
    assert got["apiVersion"] == "admissionregistration.k8s.io/v1alpha1"


def _failing(name: str, failure_policy: str) -> str:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1alpha1",
        "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "mine", "expression":
                                 f"object.metadata.name.startsWith('{name}')"}],
            "failurePolicy": failure_policy, "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression":
                           "[JSONPatch{op: 'add', path: '/data/x', "
                           "value: object.data.missing}]"}}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1alpha1",
               "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
               "spec": {"policyName": name}}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [policy, binding]})


def test_failure_policy_fail_refuses_and_ignore_admits(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=_failing("strict", "Fail"))
    kubectl.run("apply", "-f", "-", input=_failing("lenient", "Ignore"))
    result = kubectl.run("create", "configmap", "strict-one", "--from-literal=a=1",
                         check=False)
    assert result.returncode != 0
    assert ("failed to create configmap: policy 'strict' with binding 'strict' denied "
            "request: expression '") in result.stderr
    assert "no such key: missing" in result.stderr
    kubectl.run("create", "configmap", "lenient-one", "--from-literal=a=1")
    got = kubectl.json("get", "configmap", "lenient-one")
    assert got["data"] == {"a": "1"}


def test_invocations_are_recorded_in_the_audit_log(tmp_path: Path) -> None:
    log = tmp_path / "audit" / "audit.log"
    serve = start_serve(tmp_path / "data", extra_args=["--audit-log-path", str(log)])
    try:
        own = Kubectl(serve.kubeconfig, tmp_path / "cache", {})
        own.apply(MANIFESTS / "map-demo.yaml")
        own.run("create", "namespace", "mutated")
        own.run("label", "namespace", "mutated", "mutate=yes")
        own.run("create", "-n", "mutated", "-f", "-", input=deployment("audited"))

        def created() -> dict[str, Any] | None:
            for line in log.read_text().splitlines():
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                if event["verb"] == "create" and ref.get("resource") == "deployments" and \
                        ref.get("namespace") == "mutated":
                    return dict(event)
            return None

        event = eventually(created)
        annotations = event["annotations"]
        recorded = [json.loads(v) for k, v in annotations.items()
                    if k.startswith("mutation.policy.admission.k8s.io/round_0_index_")]
        assert {"policy": "stamp-deployments", "binding": "stamp-deployments",
                "mutated": True} in recorded
        # the replicas policy found no params there (parameterNotFoundAction: Allow)
        assert all(r["policy"] != "default-replicas" for r in recorded)
    finally:
        serve.stop()
