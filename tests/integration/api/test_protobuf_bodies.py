"""Protobuf request bodies of every built-in kind the server serves, through the whole API path.

Bodies are written as client-go's typed clients write them (``tests.protobuf_encoder``); the
same object is also sent as JSON, and both must be stored alike. Writes of each verb that
takes a body: create, update, and delete with ``DeleteOptions``.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.apimachinery import protobuf
from tests.integration.api.helpers import CRD_V1, WIDGETS, request, widget
from tests.protobuf_encoder import Encoder, ld

PROTOBUF = "application/vnd.kubernetes.protobuf"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
VOLATILE = ("name", "uid", "resourceVersion", "creationTimestamp", "managedFields", "labels")


async def post_protobuf(http: aiohttp.ClientSession, path: str,
                        obj: dict[str, Any]) -> tuple[int, Any]:
    status, body, _ = await request(http, "POST", path, raw=Encoder().body(obj),
                                    content_type=PROTOBUF)
    return status, body


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for name in VOLATILE:
        out["metadata"].pop(name, None)
    # what the server allocates or names per object: a Service's address and node ports, a
    # pod's token volume (named after its uid)
    spec = out.get("spec") or {}
    if out.get("kind") == "Service":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    if out.get("kind") == "Pod":
        text = orjson.dumps(out).decode()
        for volume in spec.get("volumes") or []:
            if volume["name"].startswith("kube-api-access-"):
                text = text.replace(volume["name"], "kube-api-access")
        out = orjson.loads(text)
    return out


def renamed(obj: dict[str, Any], name: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = name
    return out


# objects in Go's JSON shape (what the decoder returns for them), by collection path
SERVED: list[tuple[str, str, dict[str, Any]]] = [
    ("namespace", "/api/v1/namespaces",
     {"apiVersion": "v1", "kind": "Namespace",
      "metadata": {"name": "x", "annotations": {"a": "b"}},
      "spec": {"finalizers": ["kubernetes"]}, "status": {}}),
    ("configmap", "/api/v1/namespaces/default/configmaps",
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
      "immutable": False, "data": {"a": "1", "empty": ""}, "binaryData": {"b": "AAEC/w=="}}),
    ("secret", "/api/v1/namespaces/default/secrets",
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"},
      "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"}, "type": "kubernetes.io/tls"}),
    ("lease", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
     {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"},
      "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
               "acquireTime": "2026-01-01T00:00:00.123456Z",
               "renewTime": "2026-01-01T00:00:01.000000Z", "leaseTransitions": 0}}),
    ("event", "/api/v1/namespaces/default/events",
     {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "x", "namespace": "default"},
      "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "cm",
                         "apiVersion": "v1"},
      "reason": "Made", "message": "made it", "source": {"component": "test"},
      "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:05Z",
      "count": 2, "type": "Normal", "reportingComponent": "test", "reportingInstance": "i"}),
    ("events.k8s.io", "/apis/events.k8s.io/v1/namespaces/default/events",
     {"apiVersion": "events.k8s.io/v1", "kind": "Event",
      "metadata": {"name": "x", "namespace": "default"},
      "eventTime": "2026-01-01T00:00:00.250000Z", "reportingController": "example.com/c",
      "reportingInstance": "c-1", "action": "Make", "reason": "Made",
      "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "cm"},
      "note": "made it", "type": "Normal", "deprecatedSource": {}}),
    ("pod", "/api/v1/namespaces/default/pods",
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"app": "x"}},
      "spec": {"containers": [{"name": "app", "image": "python:3.12",
                               "command": ["python3", "-m", "http.server"],
                               "ports": [{"containerPort": 8000, "protocol": "TCP"}],
                               "env": [{"name": "A", "value": "1"}],
                               "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
                               "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
               "volumes": [{"name": "data", "emptyDir": {}}],
               "terminationGracePeriodSeconds": 5},
      "status": {}}),
    ("node", "/api/v1/nodes",
     {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"},
      "spec": {"podCIDR": "10.244.0.0/24", "podCIDRs": ["10.244.0.0/24"],
               "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
      "status": {"capacity": {"cpu": "2"}, "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                 "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                              "kernelVersion": "", "osImage": "", "containerRuntimeVersion": "",
                              "kubeletVersion": "v1.32.0", "kubeProxyVersion": "",
                              "operatingSystem": "linux", "architecture": "amd64"}}}),
    ("service", "/api/v1/namespaces/default/services",
     {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
      "spec": {"ports": [{"name": "http", "protocol": "TCP", "port": 80,
                          "targetPort": "http"}], "selector": {"app": "x"},
               "type": "NodePort"},
      "status": {"loadBalancer": {}}}),
    ("endpoints", "/api/v1/namespaces/default/endpoints",
     {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "x"},
      "subsets": [{"addresses": [{"ip": "10.0.0.1"}],
                   "ports": [{"port": 80, "protocol": "TCP"}]}]}),
    ("endpointslice", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
     {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": {"name": "x"},
      "addressType": "IPv4",
      "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
      "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}),
    ("deployment", "/apis/apps/v1/namespaces/default/deployments",
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
      "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}},
               "strategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "10%"}},
               "template": {"metadata": {"labels": {"app": "x"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    ("replicaset", "/apis/apps/v1/namespaces/default/replicasets",
     {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "x"},
      "spec": {"replicas": 0, "selector": {"matchExpressions": [
          {"key": "app", "operator": "In", "values": ["x"]}]},
               "template": {"metadata": {"labels": {"app": "x"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    ("job", "/apis/batch/v1/namespaces/default/jobs",
     {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
      "spec": {"parallelism": 2, "completions": 4, "backoffLimit": 1, "manualSelector": True,
               "selector": {"matchLabels": {"app": "x"}},
               "template": {"metadata": {"labels": {"app": "x"}},
                            "spec": {"restartPolicy": "Never",
                                     "containers": [{"name": "c", "image": "busybox",
                                                     "command": ["true"]}]}}},
      "status": {}}),
    ("cronjob", "/apis/batch/v1/namespaces/default/cronjobs",
     {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "x"},
      "spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC",
               "concurrencyPolicy": "Forbid", "suspend": False,
               "jobTemplate": {"metadata": {}, "spec": {"template": {"metadata": {}, "spec": {
                   "restartPolicy": "OnFailure",
                   "containers": [{"name": "c", "image": "busybox"}]}}}}},
      "status": {}}),
    ("daemonset", "/apis/apps/v1/namespaces/default/daemonsets",
     {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
      "spec": {"selector": {"matchLabels": {"app": "x"}},
               "template": {"metadata": {"labels": {"app": "x"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                                     "nodeSelector": {"disk": "ssd"}}},
               "updateStrategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": "25%"}},
               "minReadySeconds": 3},
      "status": {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                 "desiredNumberScheduled": 0, "numberReady": 0}}),
    ("statefulset", "/apis/apps/v1/namespaces/default/statefulsets",
     {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "x"},
      "spec": {"replicas": 2, "serviceName": "x", "podManagementPolicy": "Parallel",
               "selector": {"matchLabels": {"app": "x"}},
               "template": {"metadata": {"labels": {"app": "x"}},
                            "spec": {"containers": [{
                                "name": "c", "image": "busybox",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}},
               "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                         "spec": {"accessModes": ["ReadWriteOnce"]}}],
               "updateStrategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"partition": 1}},
               "ordinals": {"start": 3}, "minReadySeconds": 3},
      "status": {"replicas": 0}}),
    ("controllerrevision", "/apis/apps/v1/namespaces/default/controllerrevisions",
     {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": "x"},
      "data": {"spec": {"template": {"$patch": "replace",
                                     "metadata": {"labels": {"app": "x"}}}}},
      "revision": 4}),
]


@pytest.mark.parametrize(("path", "obj"), [c[1:] for c in SERVED], ids=[c[0] for c in SERVED])
async def test_a_protobuf_create_stores_what_the_json_create_stores(
        http: aiohttp.ClientSession, path: str, obj: dict[str, Any]) -> None:
    status, by_protobuf = await post_protobuf(http, path, renamed(obj, "by-protobuf"))
    assert status == 201, by_protobuf
    status, by_json, _ = await request(http, "POST", path, renamed(obj, "by-json"))
    assert status == 201, by_json
    assert comparable(by_protobuf) == comparable(by_json)
    status, read, _ = await request(http, "GET", f"{path}/by-protobuf")
    assert status == 200
    assert comparable(read) == comparable(by_json)
    # and the same fields are owned
    assert owned(by_protobuf) == owned(by_json)


def owned(obj: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(e["manager"], e["operation"], e.get("fieldsV1"))
            for e in obj["metadata"]["managedFields"]]


async def test_a_custom_resource_definition_sent_as_protobuf_serves_its_schema(
        http: aiohttp.ClientSession) -> None:
    crd = copy.deepcopy(CRD_V1)
    crd["spec"]["versions"][0]["served"] = True
    status, created = await post_protobuf(http, CRDS, crd)
    assert status == 201, created
    twin = copy.deepcopy(CRD_V1)
    twin["metadata"]["name"] = "widgets.example.org"
    twin["spec"]["group"] = "example.org"
    status, by_json, _ = await request(http, "POST", CRDS, twin)
    assert status == 201, by_json
    by_json["spec"]["group"] = "example.com"
    assert created["spec"] == by_json["spec"]
    for _ in range(200):
        status, _, _ = await request(http, "GET", WIDGETS)
        if status == 200:
            break
        await asyncio.sleep(0.02)
    # the schema came through: its default applies and its minimum is enforced
    status, made, _ = await request(http, "POST", WIDGETS, widget("w", size=2))
    assert status == 201, made
    assert made["spec"]["color"] == "red"
    status, refused, _ = await request(http, "POST", WIDGETS, widget("bad", size=-1))
    assert status == 422, refused


async def test_updates_and_delete_options_as_protobuf(http: aiohttp.ClientSession) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}
    status, created = await post_protobuf(http, path, lease)
    assert status == 201, created
    update = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
              "metadata": {"name": "leader",
                           "resourceVersion": created["metadata"]["resourceVersion"]},
              "spec": {"holderIdentity": "b", "renewTime": "2026-01-01T00:00:00.500000Z"}}
    status, updated, _ = await request(http, "PUT", f"{path}/leader",
                                       raw=Encoder().body(update), content_type=PROTOBUF)
    assert status == 200, updated
    assert updated["spec"] == {"holderIdentity": "b",
                               "renewTime": "2026-01-01T00:00:00.500000Z"}
    # the same resourceVersion again: a conflict, so the protobuf metadata was read
    status, conflict, _ = await request(http, "PUT", f"{path}/leader",
                                        raw=Encoder().body(update), content_type=PROTOBUF)
    assert status == 409, conflict

    def options(uid: str) -> bytes:
        return Encoder().body({"apiVersion": "coordination.k8s.io/v1", "kind": "DeleteOptions",
                               "preconditions": {"uid": uid}})

    status, refused, _ = await request(http, "DELETE", f"{path}/leader", raw=options("other"),
                                       content_type=PROTOBUF)
    assert status == 409, refused
    assert "Precondition failed" in refused["message"]
    status, deleted, _ = await request(http, "DELETE", f"{path}/leader",
                                       raw=options(created["metadata"]["uid"]),
                                       content_type=PROTOBUF)
    assert status == 200, deleted


@pytest.mark.parametrize(("raw", "message"), [
    (protobuf.MAGIC + ld(1, ld(1, "storage.k8s.io/v1") + ld(2, "StorageClass")),
     "unable to decode protobuf body: no protobuf decoding for kind 'StorageClass' in "
     "version 'storage.k8s.io/v1'"),
    (protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap")) + ld(2, ld(1, ld(1, b"\xff"))),
     "unable to decode protobuf body: metadata.name is not valid UTF-8"),
    (b'{"apiVersion": "v1", "kind": "ConfigMap"}',
     "unable to decode protobuf body: missing the k8s protobuf prefix (k8s\\x00)"),
], ids=["unknown-kind", "bad-utf8", "json-as-protobuf"])
async def test_undecodable_bodies_are_400(http: aiohttp.ClientSession, raw: bytes,
                                          message: str) -> None:
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps",
                                    raw=raw, content_type=PROTOBUF)
    assert status == 400, body
    assert body["kind"] == "Status"
    assert body["message"] == message


async def test_a_body_of_another_kind_is_refused_like_json(http: aiohttp.ClientSession) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"template": {"metadata": {}, "spec": {}}}, "status": {}}
    path = "/api/v1/namespaces/default/configmaps"
    status, by_protobuf = await post_protobuf(http, path, deployment)
    status_json, by_json, _ = await request(http, "POST", path, deployment)
    assert status == status_json == 400, (by_protobuf, by_json)
    assert by_protobuf["message"] == by_json["message"]
