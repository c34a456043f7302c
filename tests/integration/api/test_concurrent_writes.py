"""Concurrent writes of one object: unconditional ones all land, preconditions still hold.

Kubernetes retries a write that names no resourceVersion on a fresh read when it loses the
compare-and-swap (``GuaranteedUpdate``), so many clients patching one object at once all
succeed; only a write whose precondition is stale gets 409. The server here is on SQLite,
where writes really interleave (each commit yields to the event loop).
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
