"""Concurrent writes of one object: unconditional ones all land, preconditions still hold.

Kubernetes retries a write that names no resourceVersion on a fresh read when it loses the
compare-and-swap (``GuaranteedUpdate``), so many clients patching one object at once all
succeed; only a write whose precondition is stale gets 409. The first tests run on SQLite,
where requests really interleave (each commit yields to the event loop); the later ones let
"another server" write between a read and its compare-and-swap.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.flaky_backend import FlakyBackend
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


@pytest.fixture
async def sqlite_http(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    config = ServerConfig(port=0, storage=StorageConfig(kind="sqlite",
                                                        path=tmp_path / "state.db"))
    async with Server(config) as server, \
            aiohttp.ClientSession(base_url=server.url) as session:
        yield session


def _patch(i: int) -> tuple[str, Any, str]:
    """The i-th writer's patch: a label and a data key of its own, by one of four types."""
    kind = (MERGE, JSON_PATCH, STRATEGIC, APPLY)[i % 4]
    if kind == JSON_PATCH:
        return kind, [{"op": "add", "path": f"/data/k{i}", "value": str(i)},
                      {"op": "add", "path": f"/metadata/labels/l{i}", "value": "x"}], ""
    body = {"metadata": {"labels": {f"l{i}": "x"}}, "data": {f"k{i}": str(i)}}
    if kind == APPLY:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "shared", "labels": {f"l{i}": "x"}},
                "data": {f"k{i}": str(i)}}
        return kind, body, f"?fieldManager=writer-{i}"
    return kind, body, ""


async def test_fifty_concurrent_patches_of_every_type_all_land(
        sqlite_http: aiohttp.ClientSession) -> None:
    http = sqlite_http
    status, _, _ = await request(http, "POST", CONFIGMAPS, {
        "metadata": {"name": "shared", "labels": {"base": "x"}}, "data": {"base": "x"}})
    assert status == 201

    async def write(i: int) -> tuple[int, Any]:
        kind, body, query = _patch(i)
        status, reply, _ = await request(http, "PATCH", f"{CONFIGMAPS}/shared{query}", body,
                                         content_type=kind)
        return status, reply

    results = await asyncio.gather(*(write(i) for i in range(50)))
    assert [status for status, _ in results] == [200] * 50, [
        reply for status, reply in results if status != 200][:1]
    status, final, _ = await request(http, "GET", f"{CONFIGMAPS}/shared")
    assert status == 200
    assert final["data"] == {"base": "x", **{f"k{i}": str(i) for i in range(50)}}
    assert final["metadata"]["labels"] == {"base": "x", **{f"l{i}": "x" for i in range(50)}}
    appliers = {e["manager"] for e in final["metadata"]["managedFields"]
                if e["operation"] == "Apply"}
    assert appliers == {f"writer-{i}" for i in range(50) if i % 4 == 3}


async def test_concurrent_unconditional_updates_status_and_scale_all_land(
        sqlite_http: aiohttp.ClientSession) -> None:
    http = sqlite_http
    await install_widgets(http)
    status, _, _ = await request(http, "POST", WIDGETS, widget("w", size=1, spec={
        "size": 1, "replicas": 1}))
    assert status == 201

    async def label(i: int) -> int:
        status, _, _ = await request(http, "PATCH", f"{WIDGETS}/w", {
            "metadata": {"labels": {f"l{i}": "x"}}}, content_type=MERGE)
        return status

    async def status_patch(i: int) -> int:
        status, _, _ = await request(http, "PATCH", f"{WIDGETS}/w/status",
                                     {"status": {"phase": f"p{i}"}}, content_type=MERGE)
        return status

    async def scale_patch(i: int) -> int:
        status, _, _ = await request(http, "PATCH", f"{WIDGETS}/w/scale",
                                     {"spec": {"replicas": 10 + i}}, content_type=MERGE)
        return status

    async def scale_put(i: int) -> int:
        status, _, _ = await request(http, "PUT", f"{WIDGETS}/w/scale", {
            "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w"},
            "spec": {"replicas": 20 + i}})
        return status

    writers = [f(i) for i in range(8) for f in (label, status_patch, scale_patch, scale_put)]
    assert await asyncio.gather(*writers) == [200] * len(writers)
    _, final, _ = await request(http, "GET", f"{WIDGETS}/w")
    assert final["metadata"]["labels"] == {f"l{i}": "x" for i in range(8)}
    assert final["spec"]["replicas"] in {*range(10, 18), *range(20, 28)}
    assert final["status"]["phase"] in {f"p{i}" for i in range(8)}


async def test_concurrent_updates_without_resource_version_all_land(
        sqlite_http: aiohttp.ClientSession) -> None:
    http = sqlite_http
    status, _, _ = await request(http, "POST", CONFIGMAPS,
                                 {"metadata": {"name": "replaced"}, "data": {}})
    assert status == 201

    async def put(i: int) -> tuple[int, Any]:
        status, reply, _ = await request(http, "PUT", f"{CONFIGMAPS}/replaced", {
            "metadata": {"name": "replaced"}, "data": {"writer": str(i)}})
        return status, reply

    results = await asyncio.gather(*(put(i) for i in range(20)))
    assert [status for status, _ in results] == [200] * 20
    revisions = {int(reply["metadata"]["resourceVersion"]) for _, reply in results}
    assert len(revisions) == 20  # each one a write of its own
    _, final, _ = await request(http, "GET", f"{CONFIGMAPS}/replaced")
    last = max(results, key=lambda r: int(r[1]["metadata"]["resourceVersion"]))[1]
    assert final["data"] == last["data"]


async def test_a_stale_precondition_still_conflicts(
        sqlite_http: aiohttp.ClientSession) -> None:
    http = sqlite_http
    status, created, _ = await request(http, "POST", CONFIGMAPS,
                                       {"metadata": {"name": "guarded"}, "data": {}})
    assert status == 201
    rv = created["metadata"]["resourceVersion"]

    async def guarded(i: int) -> int:
        status, _, _ = await request(http, "PATCH", f"{CONFIGMAPS}/guarded", {
            "metadata": {"resourceVersion": rv}, "data": {f"k{i}": "x"}},
            content_type=MERGE)
        return status

    statuses = await asyncio.gather(*(guarded(i) for i in range(10)))
    assert sorted(statuses) == [200] + [409] * 9
    # a json patch that tests the resourceVersion, a PUT and an apply naming it: all stale
    status, _, _ = await request(http, "PATCH", f"{CONFIGMAPS}/guarded", [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/data/late", "value": "x"}], content_type=JSON_PATCH)
    assert status == 422
    status, _, _ = await request(http, "PUT", f"{CONFIGMAPS}/guarded", {
        "metadata": {"name": "guarded", "resourceVersion": rv}, "data": {}})
    assert status == 409
    status, _, _ = await request(http, "PATCH", f"{CONFIGMAPS}/guarded?fieldManager=a", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "guarded", "resourceVersion": rv}}, content_type=APPLY)
    assert status == 409
    status, _, _ = await request(http, "PATCH", f"{WIDGETS}/none/scale", {
        "spec": {"replicas": 1}}, content_type=MERGE)
    assert status == 404


# --- another server's write between the read and the compare-and-swap -------------------------
#
# Within one server, writes of one object queue (registry/keylocks.py), so they rarely race;
# writes through another server on the same storage still do. The backend below lets "another
# server" write the object just before each compare-and-swap, which then fails: the write must
# be computed again on the newer object (both changes land), unless it named a
# resourceVersion.


def other_server_labels(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["other"] = "server"
    return obj


@pytest.fixture
async def interfered() -> AsyncIterator[tuple[FlakyBackend, aiohttp.ClientSession]]:
    backend = FlakyBackend()
    await backend.start()
    try:
        async with Server(ServerConfig(port=0), backend=backend) as server, \
                aiohttp.ClientSession(base_url=server.url) as session:
            yield backend, session
    finally:
        await backend.close()


WRITES = [
    ("merge", "PATCH", "", {"data": {"mine": "x"}}, MERGE),
    ("json", "PATCH", "", [{"op": "add", "path": "/data/mine", "value": "x"}], JSON_PATCH),
    ("strategic", "PATCH", "", {"data": {"mine": "x"}}, STRATEGIC),
    ("apply", "PATCH", "?fieldManager=me", {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "raced"},
                                            "data": {"mine": "x"}}, APPLY),
    ("put", "PUT", "", None, "application/json"),
]


@pytest.mark.parametrize(("method", "query", "body", "content_type"),
                         [w[1:] for w in WRITES], ids=[w[0] for w in WRITES])
async def test_a_write_that_loses_its_compare_and_swap_is_computed_again(
        interfered: tuple[FlakyBackend, aiohttp.ClientSession], method: str, query: str,
        body: Any, content_type: str) -> None:
    backend, http = interfered
    status, created, _ = await request(http, "POST", CONFIGMAPS, {
        "metadata": {"name": "raced"}, "data": {"base": "x"}})
    assert status == 201
    if body is None:  # a PUT without resourceVersion of what the client read
        body = {"metadata": {"name": "raced", "labels": {"other": "server"}},
                "data": {"base": "x", "mine": "x"}}
    backend.interferences = [other_server_labels, other_server_labels]
    status, reply, _ = await request(http, method, f"{CONFIGMAPS}/raced{query}", body,
                                     content_type=content_type)
    assert status == 200, reply
    assert backend.interferences == []  # both compare-and-swaps were lost, then one won
    _, final, _ = await request(http, "GET", f"{CONFIGMAPS}/raced")
    assert final["data"]["mine"] == "x"
    assert final["metadata"]["labels"] == {"other": "server"}
    assert int(final["metadata"]["resourceVersion"]) == int(
        created["metadata"]["resourceVersion"]) + 3


async def test_status_scale_and_delete_retry_and_preconditions_hold(
        interfered: tuple[FlakyBackend, aiohttp.ClientSession]) -> None:
    backend, http = interfered
    await install_widgets(http)
    status, _, _ = await request(http, "POST", WIDGETS, widget("w", spec={
        "size": 1, "replicas": 1}))
    assert status == 201
    for path, body in ((f"{WIDGETS}/w/status", {"status": {"phase": "Ready"}}),
                       (f"{WIDGETS}/w/scale", {"spec": {"replicas": 4}})):
        backend.interferences = [other_server_labels]
        status, reply, _ = await request(http, "PATCH", path, body, content_type=MERGE)
        assert status == 200, reply
        assert backend.interferences == []
    _, final, _ = await request(http, "GET", f"{WIDGETS}/w")
    assert (final["status"]["phase"], final["spec"]["replicas"]) == ("Ready", 4)
    assert final["metadata"]["labels"] == {"other": "server"}
    # a precondition the client named is not retried away: 409
    rv = final["metadata"]["resourceVersion"]
    backend.interferences = [other_server_labels]
    status, _, _ = await request(http, "PATCH", f"{WIDGETS}/w", {
        "metadata": {"resourceVersion": rv, "annotations": {"a": "b"}}}, content_type=MERGE)
    assert status == 409
    # a delete that marks the object (it has a finalizer) is retried too
    status, _, _ = await request(http, "PATCH", f"{WIDGETS}/w", {
        "metadata": {"finalizers": ["example.com/hold"]}}, content_type=MERGE)
    assert status == 200
    backend.interferences = [other_server_labels]
    status, marked, _ = await request(http, "DELETE", f"{WIDGETS}/w")
    assert status == 200, marked
    assert marked["metadata"]["deletionTimestamp"]
    assert backend.interferences == []


async def test_writes_of_one_object_in_one_server_queue_instead_of_racing(
        tmp_path: Path) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="sqlite",
                                                        path=tmp_path / "state.db"))
    async with Server(config) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        status, _, _ = await request(http, "POST", CONFIGMAPS,
                                     {"metadata": {"name": "queued"}})
        assert status == 201
        backend = server.backend
        update = backend.update
        attempts = 0

        async def counted(key: str, value: bytes, expected_revision: int) -> Any:
            nonlocal attempts
            attempts += 1
            return await update(key, value, expected_revision)

        backend.update = counted  # type: ignore[method-assign]

        async def write(i: int) -> int:
            status, _, _ = await request(http, "PATCH", f"{CONFIGMAPS}/queued",
                                         {"data": {f"k{i}": "v"}}, content_type=MERGE)
            return status

        assert await asyncio.gather(*(write(i) for i in range(30))) == [200] * 30
        assert attempts == 30  # one compare-and-swap each, none lost
