"""The six kinds that embed a pod template follow one set of rules, with Kubernetes'
messages: the label selector (``ValidateLabelSelector``), the template's labels, the
controllers' non-empty selector and forbidden ``activeDeadlineSeconds`` (each naming its
kind as Kubernetes does), and the template's defaulting."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp
import pytest

from tests.integration.api.helpers import request

Obj = dict[str, Any]

PATHS = {
    "ReplicaSet": "/apis/apps/v1/namespaces/default/replicasets",
    "Deployment": "/apis/apps/v1/namespaces/default/deployments",
    "StatefulSet": "/apis/apps/v1/namespaces/default/statefulsets",
    "DaemonSet": "/apis/apps/v1/namespaces/default/daemonsets",
    "Job": "/apis/batch/v1/namespaces/default/jobs",
}
CONTROLLERS = ("ReplicaSet", "Deployment", "StatefulSet", "DaemonSet")


def workload(kind: str, name: str = "w") -> Obj:
    restart = "Never" if kind == "Job" else "Always"
    spec: Obj = {"template": {"metadata": {"labels": {"app": name}},
                              "spec": {"restartPolicy": restart,
                                       "containers": [{"name": "c", "image": "python3"}]}}}
    if kind != "Job":
        spec["selector"] = {"matchLabels": {"app": name}}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
            "metadata": {"name": name}, "spec": spec}


def causes(body: Obj) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c.get("message", ""))
            for c in body.get("details", {}).get("causes", [])]


@pytest.mark.parametrize("kind", CONTROLLERS)
async def test_a_selector_expression_is_checked_as_kubernetes_does(
        http: aiohttp.ClientSession, kind: str) -> None:
    body = workload(kind)
    body["spec"]["selector"] = {"matchLabels": {"app": "w"}, "matchExpressions": [
        {"key": "tier", "operator": "In"},
        {"key": "zone", "operator": "Exists", "values": ["a"]},
        {"key": "bad key!", "operator": "Near", "values": ["x"]}]}
    status, out, _ = await request(http, "POST", PATHS[kind], body)
    assert status == 422, out
    found = causes(out)
    assert ("spec.selector.matchExpressions[0].values",
            "Required value: must be specified when `operator` is 'In' or 'NotIn'") in found
    assert ("spec.selector.matchExpressions[1].values",
            "Forbidden: may not be specified when `operator` is 'Exists' or "
            "'DoesNotExist'") in found
    assert ("spec.selector.matchExpressions[2].operator",
            'Invalid value: "Near": not a valid selector operator') in found
    assert any(f == "spec.selector.matchExpressions[2].key" for f, _ in found), found


@pytest.mark.parametrize(("kind", "word"), [
    ("ReplicaSet", "deployment"), ("Deployment", "deployment"),
    ("StatefulSet", "statefulset"), ("DaemonSet", "daemonset")])
async def test_an_empty_selector_is_invalid_for_each_controller(
        http: aiohttp.ClientSession, kind: str, word: str) -> None:
    body = workload(kind)
    body["spec"]["selector"] = {}
    status, out, _ = await request(http, "POST", PATHS[kind], body)
    assert status == 422, out
    assert causes(out) == [
        ("spec.selector", f'Invalid value: "object": empty selector is invalid for {word}')]


@pytest.mark.parametrize(("kind", "named"), [
    ("ReplicaSet", "ReplicaSet"), ("Deployment", "ReplicaSet"),
    ("StatefulSet", "StatefulSet"), ("DaemonSet", "DaemonSet")])
async def test_active_deadline_seconds_is_forbidden_naming_the_kind(
        http: aiohttp.ClientSession, kind: str, named: str) -> None:
    body = workload(kind)
    body["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    status, out, _ = await request(http, "POST", PATHS[kind], body)
    assert status == 422, out
    assert ("spec.template.spec.activeDeadlineSeconds",
            f"Forbidden: activeDeadlineSeconds in {named} is not Supported") in causes(out)


@pytest.mark.parametrize("kind", [*CONTROLLERS, "Job"])
async def test_template_label_values_are_checked(http: aiohttp.ClientSession,
                                                 kind: str) -> None:
    body = workload(kind)
    body["spec"]["template"]["metadata"]["labels"]["note"] = "not a label value!"
    status, out, _ = await request(http, "POST", PATHS[kind], body)
    assert status == 422, out
    assert any(f == "spec.template.metadata.labels" and '"not a label value!"' in m
               for f, m in causes(out)), causes(out)


@pytest.mark.parametrize("kind", [*CONTROLLERS, "Job"])
async def test_a_template_is_defaulted_alike_whatever_embeds_it(
        http: aiohttp.ClientSession, kind: str) -> None:
    body = workload(kind, name=f"d{kind.lower()}")
    body["spec"]["template"]["metadata"]["creationTimestamp"] = None
    body["spec"]["template"]["spec"]["containers"][0]["args"] = None
    status, out, _ = await request(http, "POST", PATHS[kind], copy.deepcopy(body))
    assert status == 201, out
    template = out["spec"]["template"]
    assert "creationTimestamp" not in template["metadata"]
    assert "args" not in template["spec"]["containers"][0]
    # a Pod's own default, not a template's
    assert "enableServiceLinks" not in template["spec"]
    assert template["spec"]["dnsPolicy"] == "ClusterFirst"
    assert template["spec"]["containers"][0]["imagePullPolicy"] == "Always"  # no tag: latest
