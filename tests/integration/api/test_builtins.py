"""Built-in kinds: two views of Events, Leases, Secrets, ConfigMaps, Namespaces; bookmarks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import orjson

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import request

EVENTS = "/api/v1/namespaces/default/events"
NEW_EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


async def test_events_are_one_store_seen_two_ways(http: aiohttp.ClientSession) -> None:
    core = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "kopf-event-"},
            "involvedObject": {"apiVersion": "example.com/v1", "kind": "Book", "name": "b1",
                               "namespace": "default", "uid": "u-1"},
            "reason": "Shelved", "message": "on the shelf", "type": "Normal",
            "reportingComponent": "kopf", "source": {"component": "kopf"}, "count": 1,
            "firstTimestamp": "2026-01-01T00:00:00.123456+00:00"}
    status, created, _ = await request(http, "POST", EVENTS, core)
    assert status == 201, created
    name = created["metadata"]["name"]
    status, seen, _ = await request(http, "GET", f"{NEW_EVENTS}/{name}")
    assert status == 200
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["regarding"]["name"] == "b1"
    assert seen["note"] == "on the shelf"
    assert seen["reportingController"] == "kopf"
    assert seen["deprecatedCount"] == 1
    selector = ("involvedObject.name%3Db1%2CinvolvedObject.namespace%3Ddefault%2C"
                "involvedObject.kind%3DBook%2CinvolvedObject.uid%3Du-1")
    _, listed, _ = await request(http, "GET", f"{EVENTS}?fieldSelector={selector}&limit=500")
    assert [e["metadata"]["name"] for e in listed["items"]] == [name]
    new = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "n1"},
           "regarding": {"kind": "Book", "name": "b2"}, "note": "new style",
           "reason": "Made", "type": "Normal", "eventTime": "2026-01-01T00:00:00.000000Z",
           "reportingController": "setpoint", "reportingInstance": "x", "action": "Make"}
    status, made, _ = await request(http, "POST", NEW_EVENTS, new)
    assert status == 201, made
    _, as_core, _ = await request(http, "GET", f"{EVENTS}/n1")
    assert as_core["involvedObject"]["name"] == "b2"
    assert as_core["message"] == "new style"


async def test_leases(http: aiohttp.ClientSession) -> None:
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "leader"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                      "acquireTime": "2026-01-01T00:00:00.000000Z",
                      "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0}}
    status, created, _ = await request(http, "POST", path, lease)
    assert status == 201, created
    created["spec"]["holderIdentity"] = "b"
    status, updated, _ = await request(http, "PUT", f"{path}/leader", created)
    assert status == 200
    assert updated["spec"]["holderIdentity"] == "b"
    status, _, _ = await request(http, "PUT", f"{path}/leader", created)
    assert status == 409  # the same resourceVersion again: someone else won


async def test_built_ins_of_named_groups_default_their_type(
        http: aiohttp.ClientSession) -> None:
    # typed clients (the kubernetes client's V1Lease) send neither apiVersion nor kind
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    status, created, _ = await request(http, "POST", path, {
        "metadata": {"name": "typed"}, "spec": {"holderIdentity": "a"}})
    assert status == 201, created
    assert (created["apiVersion"], created["kind"]) == ("coordination.k8s.io/v1", "Lease")


async def test_secret_string_data_and_configmap_immutability(
        http: aiohttp.ClientSession) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "stringData": {"user": "admin"}}
    _, created, _ = await request(http, "POST", "/api/v1/namespaces/default/secrets", secret)
    assert created["data"] == {"user": "YWRtaW4="}
    assert created["type"] == "Opaque"
    assert "stringData" not in created
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "frozen"},
          "data": {"a": "1"}, "immutable": True}
    await request(http, "POST", "/api/v1/namespaces/default/configmaps", cm)
    status, err, _ = await request(http, "PATCH", "/api/v1/namespaces/default/configmaps/frozen",
                                   {"data": {"a": "2"}},
                                   content_type="application/strategic-merge-patch+json")
    assert status == 422, err
    assert "field is immutable when `immutable` is set" in err["message"]
    # a ConfigMap without apiVersion and kind (as the Python client sends it) is fine
    status, _, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": "bare"}, "data": {"x": "y"}})
    assert status == 201


async def test_protected_namespaces_cannot_be_deleted(http: aiohttp.ClientSession) -> None:
    for name in ("default", "kube-system", "kube-public"):
        status, err, _ = await request(http, "DELETE", f"/api/v1/namespaces/{name}")
        assert status == 403, err
        assert err["message"] == (f'namespaces "{name}" is forbidden: this namespace may not '
                                  "be deleted")


async def test_bookmarks_arrive_when_idle(tmp_path: Path) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"), bookmark_interval=0.2)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        _, listed, _ = await request(http, "GET", "/api/v1/namespaces/default/configmaps")
        rv = listed["metadata"]["resourceVersion"]
        path = (f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"
                "&allowWatchBookmarks=true")
        async with http.get(path) as response:
            async with asyncio.timeout(3):
                line = await response.content.readline()
        event = orjson.loads(line)
        assert event["type"] == "BOOKMARK"
        assert event["object"]["kind"] == "ConfigMap"
        assert int(event["object"]["metadata"]["resourceVersion"]) >= int(rv)


async def test_namespaces_are_labelled_with_their_name(tmp_path: Path) -> None:
    backend_config = StorageConfig(kind="sqlite", path=tmp_path / "state.db")
    async with Server(ServerConfig(port=0, storage=backend_config)) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        status, generated, _ = await request(http, "POST", "/api/v1/namespaces", {
            "metadata": {"generateName": "team-", "labels": {
                "kubernetes.io/metadata.name": "forged"}}})
        assert status == 201
        name = generated["metadata"]["name"]
        assert generated["metadata"]["labels"] == {"kubernetes.io/metadata.name": name}
        path = f"/api/v1/namespaces/{name}"
        status, replaced, _ = await request(http, "PUT", path, {
            "metadata": {"name": name, "labels": {"a": "b"}}})
        assert status == 200
        assert replaced["metadata"]["labels"] == {"a": "b", "kubernetes.io/metadata.name": name}
        status, listed, _ = await request(
            http, "GET", f"/api/v1/namespaces?labelSelector=kubernetes.io/metadata.name={name}")
        assert [n["metadata"]["name"] for n in listed["items"]] == [name]
        # a namespace stored without the label (by an older server) is read with it
        storage = server.backend
        key = "/registry/core/namespaces/old"
        await storage.create(key, orjson.dumps({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "old", "uid": "u-old",
                         "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}))
        status, old, _ = await request(http, "GET", "/api/v1/namespaces/old")  # reads fresh
        assert status == 200
        assert old["metadata"]["labels"] == {"kubernetes.io/metadata.name": "old"}
