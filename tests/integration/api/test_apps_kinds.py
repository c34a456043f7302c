"""apps/v1 ReplicaSet and Deployment through the API: defaults, validation with Kubernetes'
messages, the immutable selector, status and scale subresources, tables, discovery."""

from __future__ import annotations

import copy
from typing import Any

import aiohttp

from tests.integration.api.helpers import request

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
REPLICASETS = "/apis/apps/v1/namespaces/default/replicasets"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
SMP = "application/strategic-merge-patch+json"


def deployment(name: str = "web", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}]}}}}
    body["spec"].update(spec)
    return body


def replica_set(name: str = "web", **spec: Any) -> dict[str, Any]:
    body = deployment(name, **spec)
    body["kind"] = "ReplicaSet"
    return body


async def test_deployment_defaults(http: aiohttp.ClientSession) -> None:
    status, obj, _ = await request(http, "POST", DEPLOYMENTS, deployment())
    assert status == 201, obj
    spec = obj["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert obj["metadata"]["generation"] == 1
    assert obj["status"] == {}


async def test_nulls_in_the_template_are_dropped(http: aiohttp.ClientSession) -> None:
    body = deployment()
    body["spec"]["template"]["metadata"]["creationTimestamp"] = None
    body["spec"]["template"]["spec"]["containers"][0]["args"] = None
    status, obj, _ = await request(http, "POST", DEPLOYMENTS, body)
    assert status == 201, obj
    assert obj["spec"]["template"]["metadata"] == {"labels": {"app": "web"}}
    assert "args" not in obj["spec"]["template"]["spec"]["containers"][0]


async def test_replica_set_defaults_and_status(http: aiohttp.ClientSession) -> None:
    status, obj, _ = await request(http, "POST", REPLICASETS, replica_set())
    assert status == 201, obj
    assert obj["spec"]["replicas"] == 1
    assert obj["status"] == {"replicas": 0}
    obj["status"] = {"replicas": 1, "readyReplicas": 2}
    status, body, _ = await request(http, "PUT", f"{REPLICASETS}/web/status", obj)
    assert status == 422, body
    assert "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas" \
        in body["message"]
    obj["status"] = {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                     "observedGeneration": 1}
    status, body, _ = await request(http, "PUT", f"{REPLICASETS}/web/status", obj)
    assert status == 200, body
    assert body["status"]["readyReplicas"] == 1
    assert body["metadata"]["generation"] == 1


async def test_validation_messages(http: aiohttp.ClientSession) -> None:
    cases: list[tuple[dict[str, Any], str]] = []
    no_selector = deployment()
    del no_selector["spec"]["selector"]
    cases.append((no_selector, "spec.selector: Required value"))
    cases.append((deployment(selector={"matchLabels": {"app": "other"}}),
                  "spec.template.metadata.labels: Invalid value: "))
    cases.append((deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {
        "maxSurge": 0, "maxUnavailable": "0%"}}),
        "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 "
        "when `maxSurge` is 0"))
    cases.append((deployment(strategy={"type": "Recreate", "rollingUpdate": {}}),
                  "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy "
                  "`type` is 'Recreate'"))
    cases.append((deployment(strategy={"rollingUpdate": {"maxUnavailable": "150%"}}),
                  "must not be greater than 100%"))
    cases.append((deployment(strategy={"rollingUpdate": {"maxSurge": "x"}}),
                  "a valid percent string must be"))
    cases.append((deployment(replicas=-1),
                  "spec.replicas: Invalid value: -1: must be greater than or equal to 0"))
    cases.append((deployment(minReadySeconds=10, progressDeadlineSeconds=5),
                  "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than "
                  "minReadySeconds"))
    failing = deployment()
    failing["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    cases.append((failing, 'spec.template.spec.restartPolicy: Unsupported value: "OnFailure"'))
    for body, message in cases:
        status, answer, _ = await request(http, "POST", DEPLOYMENTS, body)
        assert status == 422, (body, answer)
        assert message in answer["message"], answer["message"]
    status, answer, _ = await request(http, "POST", DEPLOYMENTS, deployment(replicas="three"))
    assert status == 400, answer


async def test_selector_is_immutable_and_template_changes_bump_generation(
        http: aiohttp.ClientSession) -> None:
    status, obj, _ = await request(http, "POST", DEPLOYMENTS, deployment())
    assert status == 201
    changed = copy.deepcopy(obj)
    changed["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    status, answer, _ = await request(http, "PUT", f"{DEPLOYMENTS}/web", changed)
    assert status == 422
    assert "spec.selector: Invalid value: " in answer["message"]
    assert "field is immutable" in answer["message"]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "c",
                                                              "image": "nginx:1.26"}]}}}}
    status, answer, _ = await request(http, "PATCH", f"{DEPLOYMENTS}/web", patch,
                                      content_type=SMP)
    assert status == 200, answer
    assert answer["metadata"]["generation"] == 2
    assert answer["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert answer["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == \
        "IfNotPresent"


async def test_scale_subresource(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", DEPLOYMENTS, deployment(replicas=2))
    status, scale, _ = await request(http, "GET", f"{DEPLOYMENTS}/web/scale")
    assert status == 200, scale
    assert scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 0, "selector": "app=web"}
    status, scale, _ = await request(http, "PATCH", f"{DEPLOYMENTS}/web/scale",
                                     {"spec": {"replicas": 5}}, content_type=SMP)
    assert status == 200, scale
    _, obj, _ = await request(http, "GET", f"{DEPLOYMENTS}/web")
    assert obj["spec"]["replicas"] == 5
    assert obj["metadata"]["generation"] == 2


async def test_a_scale_patch_takes_the_types_and_gives_the_errors_of_an_object_patch(
        http: aiohttp.ClientSession) -> None:
    await request(http, "POST", DEPLOYMENTS, deployment(replicas=2))
    scale = f"{DEPLOYMENTS}/web/scale"
    status, answer, _ = await request(http, "PATCH", scale, [
        {"op": "replace", "path": "/spec/replicas", "value": 3}],
        content_type="application/json-patch+json")
    assert (status, answer["spec"]) == (200, {"replicas": 3}), answer
    status, answer, _ = await request(http, "PATCH", scale, [
        {"op": "test", "path": "/spec/replicas", "value": 9}],
        content_type="application/json-patch+json")
    assert status == 422, answer
    assert answer["details"]["causes"][0]["field"] == "patch"
    status, answer, _ = await request(http, "PATCH", scale, [1],
                                      content_type="application/merge-patch+json")
    assert status == 400, answer
    assert answer["message"] == "the body of a merge patch must be a JSON object, got an array"
    status, answer, _ = await request(http, "PATCH", scale, {"spec": {"replicas": 4}},
                                      content_type="application/apply-patch+cbor")
    assert status == 415, answer
    assert answer["message"].endswith(
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml")
    _, obj, _ = await request(http, "GET", f"{DEPLOYMENTS}/web")
    assert obj["spec"]["replicas"] == 3


async def test_tables_and_discovery(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", DEPLOYMENTS, deployment(replicas=3))
    await request(http, "POST", REPLICASETS, replica_set("rs", replicas=2))
    _, table, _ = await request(http, "GET", DEPLOYMENTS, headers=TABLE)
    assert [(c["name"], c["priority"]) for c in table["columnDefinitions"]] == [
        ("Name", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Age", 0),
        ("Containers", 1), ("Images", 1), ("Selector", 1)]
    assert table["rows"][0]["cells"][:4] == ["web", "0/3", 0, 0]
    assert table["rows"][0]["cells"][5:] == ["c", "nginx:1.25", "app=web"]
    _, table, _ = await request(http, "GET", REPLICASETS, headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Desired", "Current", "Ready", "Age"]
    assert table["rows"][0]["cells"][:4] == ["rs", 2, 0, 0]
    _, discovery, _ = await request(http, "GET", "/apis/apps/v1")
    by_name = {r["name"]: r for r in discovery["resources"]}
    assert by_name["deployments"]["categories"] == ["all"]
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert by_name["replicasets"]["shortNames"] == ["rs"]
    assert "deployments/scale" in by_name
    assert "replicasets/status" in by_name
