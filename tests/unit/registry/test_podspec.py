"""Defaulting, validation and update rules of pod specs, and graceful deletion periods."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from setpoint.apimachinery.fields import FieldPath
from setpoint.registry import pods, podspec
from setpoint.registry.options import DeleteOptions

SPEC = FieldPath.root("spec")


@pytest.mark.parametrize(("image", "policy"), [
    ("busybox", "Always"), ("busybox:latest", "Always"), ("busybox:1.36", "IfNotPresent"),
    ("registry:5000/app", "Always"), ("registry:5000/app:v1", "IfNotPresent"),
    ("app@sha256:abc", "IfNotPresent"), ("python3", "Always"),
])
def test_pull_policy(image: str, policy: str) -> None:
    assert podspec.pull_policy(image) == policy


def test_defaults() -> None:
    spec: dict[str, Any] = {
        "containers": [{"name": "a", "image": "x:1",
                        "livenessProbe": {"httpGet": {"port": 80}},
                        "env": [{"name": "N", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.name"}}}]}],
        "volumes": [{"name": "none"}, {"name": "s", "secret": {"secretName": "s"}},
                    {"name": "h", "hostPath": {"path": "/tmp"}}],
        "hostNetwork": True, "serviceAccount": "robot"}
    spec["containers"][0]["ports"] = [{"containerPort": 8080}]
    podspec.default_pod_spec(spec)
    container = spec["containers"][0]
    assert container["livenessProbe"] == {"httpGet": {"port": 80, "path": "/",
                                                      "scheme": "HTTP"},
                                          "timeoutSeconds": 1, "periodSeconds": 10,
                                          "successThreshold": 1, "failureThreshold": 3}
    assert container["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert container["ports"] == [{"containerPort": 8080, "hostPort": 8080,
                                   "protocol": "TCP"}]
    assert spec["volumes"][0] == {"name": "none", "emptyDir": {}}
    assert spec["volumes"][1]["secret"]["defaultMode"] == 0o644
    assert spec["volumes"][2]["hostPath"] == {"path": "/tmp", "type": ""}
    assert spec["serviceAccountName"] == "robot"


def errors_of(spec: dict[str, Any]) -> set[tuple[str, str]]:
    podspec.default_pod_spec(spec)
    return {(e.field, e.type.value[0]) for e in podspec.validate_pod_spec(spec, SPEC)}


def base(**extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "busybox"}]}
    spec.update(extra)
    return spec


@pytest.mark.parametrize(("spec", "expected"), [
    (base(), set()),
    (base(containers=[]), {("spec.containers", "FieldValueRequired")}),
    (base(restartPolicy="Sometimes"), {("spec.restartPolicy", "FieldValueNotSupported")}),
    (base(dnsPolicy="Nope"), {("spec.dnsPolicy", "FieldValueNotSupported")}),
    (base(activeDeadlineSeconds=0), {("spec.activeDeadlineSeconds", "FieldValueInvalid")}),
    (base(terminationGracePeriodSeconds=-1),
     {("spec.terminationGracePeriodSeconds", "FieldValueInvalid")}),
    (base(nodeName="Bad_Node"), {("spec.nodeName", "FieldValueInvalid")}),
    (base(initContainers=[{"name": "app", "image": "x"}]),
     {("spec.containers[0].name", "FieldValueDuplicate")}),
    (base(volumes=[{"name": "v", "emptyDir": {}, "hostPath": {"path": "/x"}},
                   {"name": "v", "emptyDir": {}}]),
     {("spec.volumes[0].emptyDir", "FieldValueForbidden"),
      ("spec.volumes[1].name", "FieldValueDuplicate")}),
    (base(containers=[{"name": "a", "image": "x", "volumeMounts": [
        {"name": "v", "mountPath": "/d"}, {"name": "v", "mountPath": "/d"}]}],
        volumes=[{"name": "v", "emptyDir": {}}]),
     {("spec.containers[0].volumeMounts[1].mountPath", "FieldValueInvalid")}),
    (base(containers=[{"name": "a", "image": "x", "ports": [
        {"containerPort": 80, "name": "http"}, {"containerPort": 70000, "name": "http",
                                                "protocol": "HTTP"}]}]),
     {("spec.containers[0].ports[1].containerPort", "FieldValueInvalid"),
      ("spec.containers[0].ports[1].name", "FieldValueDuplicate"),
      ("spec.containers[0].ports[1].protocol", "FieldValueNotSupported")}),
    (base(containers=[{"name": "a", "image": "x", "env": [
        {"name": "", "value": "1"}, {"name": "B", "value": "x", "valueFrom": {
            "secretKeyRef": {"name": "s"}}}]}]),
     {("spec.containers[0].env[0].name", "FieldValueRequired"),
      ("spec.containers[0].env[1].valueFrom", "FieldValueInvalid"),
      ("spec.containers[0].env[1].valueFrom.secretKeyRef.key", "FieldValueRequired")}),
    (base(containers=[{"name": "a", "image": "x", "resources": {
        "requests": {"memory": "2Gi", "cpu": "-1"}, "limits": {"memory": "1Gi"}}}]),
     {("spec.containers[0].resources.requests[memory]", "FieldValueInvalid"),
      ("spec.containers[0].resources.requests[cpu]", "FieldValueInvalid")}),
    (base(containers=[{"name": "a", "image": "x", "restartPolicy": "Always"}]),
     {("spec.containers[0].restartPolicy", "FieldValueForbidden")}),
    (base(containers=[{"name": "a", "image": "x", "readinessProbe": {}}]),
     {("spec.containers[0].readinessProbe", "FieldValueRequired")}),
    (base(tolerations=[{"operator": "Equal", "value": "x"}, {"key": "k", "effect": "Boom"},
                       {"key": "k", "operator": "Exists", "tolerationSeconds": 5,
                        "effect": "NoSchedule"}]),
     {("spec.tolerations[0].operator", "FieldValueInvalid"),
      ("spec.tolerations[1].effect", "FieldValueNotSupported"),
      ("spec.tolerations[2].effect", "FieldValueInvalid")}),
    (base(schedulingGates=[{"name": "a"}, {"name": "a"}]),
     {("spec.schedulingGates[1].name", "FieldValueDuplicate")}),
], ids=lambda v: str(sorted(v))[:60] if isinstance(v, set) else None)
def test_validation(spec: dict[str, Any], expected: set[tuple[str, str]]) -> None:
    assert errors_of(spec) == expected


def defaulted(**extra: Any) -> dict[str, Any]:
    spec = base(**extra)
    podspec.default_pod_spec(spec)
    return spec


def update_errors(new: dict[str, Any], old: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e.field, e.type.value[0]) for e in pods.validate_spec_update(new, old, SPEC)]


def test_only_images_deadlines_tolerations_and_gates_change() -> None:
    old = defaulted(activeDeadlineSeconds=100, tolerations=[{"key": "a", "operator": "Exists"}],
                    schedulingGates=[{"name": "g1"}, {"name": "g2"}])
    new = copy.deepcopy(old)
    new["containers"][0]["image"] = "busybox:2"
    new["activeDeadlineSeconds"] = 50
    new["tolerations"].append({"key": "b", "operator": "Exists"})
    new["schedulingGates"] = [{"name": "g2"}]
    assert update_errors(new, old) == []
    raised = copy.deepcopy(new)
    raised["activeDeadlineSeconds"] = 200
    assert update_errors(raised, old) == [("spec.activeDeadlineSeconds", "FieldValueInvalid")]
    dropped = copy.deepcopy(new)
    dropped["tolerations"] = [{"key": "b", "operator": "Exists"}]
    assert update_errors(dropped, old) == [("spec.tolerations[0]", "FieldValueForbidden")]
    gated = copy.deepcopy(new)
    gated["schedulingGates"].append({"name": "g3"})
    assert update_errors(gated, old) == [("spec.schedulingGates", "FieldValueForbidden")]
    other = copy.deepcopy(new)
    other["containers"][0]["command"] = ["sh"]
    [error] = pods.validate_spec_update(other, old, SPEC)
    assert error.field == "spec"
    assert error.message().startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
    assert "spec.containers" in error.message()


@pytest.mark.parametrize(("spec", "status", "opts", "grace"), [
    ({"nodeName": "n"}, {}, DeleteOptions(), 30),
    ({"nodeName": "n", "terminationGracePeriodSeconds": 5}, {}, DeleteOptions(), 5),
    ({"nodeName": "n"}, {}, DeleteOptions(grace_period_seconds=0), 0),
    ({"nodeName": "n"}, {}, DeleteOptions(grace_period_seconds=-3), 1),
    ({}, {}, DeleteOptions(grace_period_seconds=10), 0),
    ({"nodeName": "n"}, {"phase": "Succeeded"}, DeleteOptions(), 0),
    ({"nodeName": "n"}, {"phase": "Failed"}, DeleteOptions(), 0),
])
def test_grace_periods(spec: dict[str, Any], status: dict[str, Any], opts: DeleteOptions,
                       grace: int) -> None:
    strategy = pods.PodStrategy(pods.pod_resource()[0])
    assert strategy.grace_period({"spec": spec, "status": status}, opts) == grace


@pytest.mark.parametrize(("resources", "qos"), [
    ({}, "BestEffort"),
    ({"requests": {"cpu": "1"}}, "Burstable"),
    ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
     "Guaranteed"),
    ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m",
                                                            "memory": "1Gi"}}, "Burstable"),
])
def test_qos_class(resources: dict[str, Any], qos: str) -> None:
    assert pods.qos_class({"containers": [{"resources": resources}]}) == qos
