"""Pods and Nodes through the API: defaulting, validation, immutability, binding, eviction,
graceful deletion, status, tables and field selectors."""

from __future__ import annotations

from typing import Any

import aiohttp

from tests.integration.api.helpers import request

PODS = "/api/v1/namespaces/default/pods"
NODES = "/api/v1/nodes"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
SMP = "application/strategic-merge-patch+json"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                            "spec": {"containers": [{"name": "app", "image": "python:3.12"}]}}
    body["spec"].update(spec)
    return body


async def bind(http: aiohttp.ClientSession, name: str, node: str) -> tuple[int, Any]:
    status, body, _ = await request(http, "POST", f"{PODS}/{name}/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    return status, body


async def test_a_created_pod_is_defaulted_as_kubernetes_does(
        http: aiohttp.ClientSession) -> None:
    status, created, headers = await request(http, "POST", PODS, pod(
        "web", containers=[{"name": "app", "image": "nginx", "colour": "red",
                            "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"memory": "64Mi"}}}]))
    assert status == 201, created
    assert r'unknown field \"spec.containers[0].colour\"' in headers.get("Warning", "")
    spec = created["spec"]
    assert spec["restartPolicy"] == "Always"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["schedulerName"] == "default-scheduler"
    assert spec["securityContext"] == {}
    assert spec["enableServiceLinks"] is True
    assert spec["priority"] == 0
    assert spec["serviceAccountName"] == "default"
    container = spec["containers"][0]
    assert "colour" not in container
    assert container["imagePullPolicy"] == "Always"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    assert container["terminationMessagePolicy"] == "File"
    assert container["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert container["resources"]["requests"] == {"memory": "64Mi"}
    mount = container["volumeMounts"][0]
    assert mount["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert [v["name"] for v in spec["volumes"]] == [mount["name"]]
    assert {t["key"] for t in spec["tolerations"]} == {"node.kubernetes.io/not-ready",
                                                       "node.kubernetes.io/unreachable"}
    assert created["status"] == {"phase": "Pending", "qosClass": "Burstable"}


async def test_invalid_pods_are_refused_with_kubernetes_messages(
        http: aiohttp.ClientSession) -> None:
    bad = pod("bad", containers=[
        {"name": "App", "image": ""},
        {"name": "b", "image": "x", "ports": [{"containerPort": 0}],
         "env": [{"name": "A=B"}], "volumeMounts": [{"name": "nope", "mountPath": "/d"}],
         "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}},
        {"name": "b", "image": "x"}])
    status, body, _ = await request(http, "POST", PODS, bad)
    assert status == 422, body
    causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
    assert ("spec.containers[0].name", "FieldValueInvalid") in causes
    assert ("spec.containers[0].image", "FieldValueRequired") in causes
    assert ("spec.containers[1].ports[0].containerPort", "FieldValueInvalid") in causes
    assert ("spec.containers[1].env[0].name", "FieldValueInvalid") in causes
    assert ("spec.containers[1].volumeMounts[0].name", "FieldValueNotFound") in causes
    assert ("spec.containers[1].resources.requests[cpu]", "FieldValueInvalid") in causes
    assert ("spec.containers[2].name", "FieldValueDuplicate") in causes
    assert "must be less than or equal to cpu limit of 1" in body["message"]
    status, body, _ = await request(http, "POST", PODS, pod("empty", containers=[]))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.containers"
    status, body, _ = await request(http, "POST", PODS, pod("typed", containers=[
        {"name": "a", "image": "x", "ports": [{"containerPort": "80"}]}]))
    assert status == 400, body
    assert "cannot unmarshal string into Go struct field ContainerPort" in body["message"]


async def test_the_spec_is_immutable_but_for_images(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("imm")))[0] == 201
    status, patched, _ = await request(
        http, "PATCH", f"{PODS}/imm",
        {"spec": {"containers": [{"name": "app", "image": "python:3.13"}]}}, content_type=SMP)
    assert status == 200, patched
    assert patched["spec"]["containers"][0]["image"] == "python:3.13"
    # the strategic merge kept the rest of the container (merged by name)
    assert patched["spec"]["containers"][0]["volumeMounts"]
    status, body, _ = await request(
        http, "PATCH", f"{PODS}/imm", {"spec": {"restartPolicy": "Never"}}, content_type=SMP)
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than `spec.containers[*].image`" \
        in body["message"]
    status, body, _ = await request(
        http, "PATCH", f"{PODS}/imm", {"spec": {"nodeName": "n1"}}, content_type=SMP)
    assert status == 422, body


async def test_binding_sets_the_node_once(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("b1")))[0] == 201
    status, body = await bind(http, "b1", "node-1")
    assert status == 201, body
    assert body["status"] == "Success"
    _, got, _ = await request(http, "GET", f"{PODS}/b1")
    assert got["spec"]["nodeName"] == "node-1"
    assert [c["type"] for c in got["status"]["conditions"]] == ["PodScheduled"]
    status, body = await bind(http, "b1", "node-2")
    assert status == 409, body
    assert body["message"] == ('Operation cannot be fulfilled on pods/binding "b1": pod b1 is '
                               'already assigned to node "node-1"')
    status, body, _ = await request(http, "POST", f"{PODS}/b1/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "other"},
        "target": {"name": "node-1"}})
    assert status == 400, body
    status, body, _ = await request(http, "POST", f"{PODS}/b1/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b1"},
        "target": {"kind": "Pod"}})
    assert status == 422, body
    status, body = await bind(http, "missing", "node-1")
    assert status == 404, body
    _, listed, _ = await request(http, "GET", f"{PODS}?fieldSelector=spec.nodeName%3Dnode-1")
    assert [p["metadata"]["name"] for p in listed["items"]] == ["b1"]


async def test_a_bound_pod_is_deleted_gracefully(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("g1")))[0] == 201
    assert (await bind(http, "g1", "node-1"))[0] == 201
    status, marked, _ = await request(http, "DELETE", f"{PODS}/g1")
    assert status == 200, marked
    assert marked["kind"] == "Pod"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["deletionTimestamp"]
    # the agent reports status meanwhile: the pod stays
    marked["status"]["phase"] = "Running"
    status, body, _ = await request(http, "PUT", f"{PODS}/g1/status", marked)
    assert status == 200, body
    _, table, _ = await request(http, "GET", f"{PODS}/g1", headers=TABLE)
    assert table["rows"][0]["cells"][2] == "Terminating"
    # a longer grace period changes nothing, a shorter one moves the deadline
    status, again, _ = await request(http, "DELETE", f"{PODS}/g1?gracePeriodSeconds=60")
    assert again["metadata"]["deletionGracePeriodSeconds"] == 30
    status, again, _ = await request(http, "DELETE", f"{PODS}/g1?gracePeriodSeconds=10")
    assert again["metadata"]["deletionGracePeriodSeconds"] == 10
    assert again["metadata"]["deletionTimestamp"] < marked["metadata"]["deletionTimestamp"]
    status, done, _ = await request(http, "DELETE", f"{PODS}/g1", {
        "kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
        "preconditions": {"uid": marked["metadata"]["uid"]}})
    assert status == 200, done
    assert done["kind"] == "Pod"  # Kubernetes answers with the deleted pod, not a Status
    assert done["metadata"]["uid"] == marked["metadata"]["uid"]
    assert (await request(http, "GET", f"{PODS}/g1"))[0] == 404


async def test_an_unbound_pod_is_deleted_at_once(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("u1")))[0] == 201
    status, body, _ = await request(http, "DELETE", f"{PODS}/u1")
    assert status == 200
    assert body["kind"] == "Pod"
    assert (await request(http, "GET", f"{PODS}/u1"))[0] == 404


async def test_eviction_deletes_through_the_graceful_path(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("e1")))[0] == 201
    assert (await bind(http, "e1", "node-1"))[0] == 201
    status, body, _ = await request(http, "POST", f"{PODS}/e1/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e1"},
        "deleteOptions": {"gracePeriodSeconds": 5}})
    assert status == 201, body
    _, got, _ = await request(http, "GET", f"{PODS}/e1")
    assert got["metadata"]["deletionGracePeriodSeconds"] == 5
    status, body, _ = await request(http, "POST", f"{PODS}/e1/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e1"},
        "deleteOptions": {"gracePeriodSeconds": 0}})
    assert status == 201  # already being deleted: success, nothing done
    assert (await request(http, "GET", f"{PODS}/e1"))[0] == 200


async def test_status_and_table(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PODS, pod("t1", initContainers=[
        {"name": "init", "image": "busybox"}])))[0] == 201
    _, got, _ = await request(http, "GET", f"{PODS}/t1")
    got["status"] = {"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
         "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    got["spec"]["restartPolicy"] = "Never"  # ignored through /status
    status, body, _ = await request(http, "PUT", f"{PODS}/t1/status", got)
    assert status == 200, body
    assert body["spec"]["restartPolicy"] == "Always"
    _, table, _ = await request(http, "GET", f"{PODS}?includeObject=None", headers=TABLE)
    names = [c["name"] for c in table["columnDefinitions"]]
    assert names == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                     "Nominated Node", "Readiness Gates"]
    row = table["rows"][0]["cells"]
    assert row[:4] == ["t1", "0/1", "Init:0/1", "0"]
    assert row[5:] == ["<none>", "<none>", "<none>", "<none>"]


async def test_nodes(http: aiohttp.ClientSession) -> None:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"podCIDR": "10.244.1.0/24",
                     "taints": [{"key": "a", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0-setpoint"}}}
    status, created, _ = await request(http, "POST", NODES, node)
    assert status == 201, created
    assert created["spec"]["podCIDRs"] == ["10.244.1.0/24"]
    assert created["status"]["allocatable"] == {"cpu": "2", "memory": "4Gi", "pods": "110"}
    _, table, _ = await request(http, "GET", NODES, headers=TABLE)
    cells = table["rows"][0]["cells"]
    assert cells[:3] == ["n1", "Ready", "control-plane"]
    assert cells[4:6] == ["v1.32.0-setpoint", "10.0.0.5"]
    status, body, _ = await request(http, "PATCH", f"{NODES}/n1",
                                    {"spec": {"podCIDR": "10.244.2.0/24",
                                              "podCIDRs": ["10.244.2.0/24"]}},
                                    content_type=SMP)
    assert status == 422, body
    assert "node updates may not change podCIDR" in body["message"]
    status, body, _ = await request(http, "PATCH", f"{NODES}/n1",
                                    {"spec": {"unschedulable": True}}, content_type=SMP)
    assert status == 200, body
    _, table, _ = await request(http, "GET", f"{NODES}/n1", headers=TABLE)
    assert table["rows"][0]["cells"][1] == "Ready,SchedulingDisabled"
    _, listed, _ = await request(http, "GET", f"{NODES}?fieldSelector=spec.unschedulable%3Dtrue")
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
    status, body, _ = await request(http, "POST", NODES, {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"},
                            {"key": "a", "effect": "NoSchedule"}, {"key": "b"}]}})
    assert status == 422, body
    causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
    assert causes == {("spec.taints[1]", "FieldValueDuplicate"),
                      ("spec.taints[2].effect", "FieldValueRequired")}
