"""API servers in this process on a real etcd: several on one etcd, outages, shared etcds."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import CRD_V1, WIDGETS, request, widget
from tests.integration.storage import etcd_server

pytestmark = [
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[etcd_server.EtcdServer]:
    with etcd_server.running(tmp_path / "etcd", *etcd_server.PROGRESS_EVERY_100MS) as server:
        yield server


def config(etcd: etcd_server.EtcdServer, prefix: str = "") -> ServerConfig:
    return ServerConfig(port=0, storage=StorageConfig(
        kind="etcd", endpoints=(etcd.endpoint,), prefix=prefix))


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        yield stack


async def serve(stack: AsyncExitStack, server_config: ServerConfig
                ) -> tuple[Server, aiohttp.ClientSession]:
    server = await stack.enter_async_context(Server(server_config))
    http = await stack.enter_async_context(aiohttp.ClientSession(base_url=server.url))
    return server, http


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": name}}


async def next_event(response: aiohttp.ClientResponse, timeout: float = 10.0
                     ) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        line = await response.content.readline()
    assert line, "the watch ended"
    event: dict[str, Any] = orjson.loads(line)
    return event


async def until_status(http: aiohttp.ClientSession, method: str, path: str, body: Any,
                       expected: int, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status, reply, _ = await request(http, method, path, body)
        if status == expected:
            return reply
        assert time.monotonic() < deadline, (status, reply)
        await asyncio.sleep(0.1)


async def test_a_write_through_one_server_is_watched_on_the_other(
        etcd: etcd_server.EtcdServer, stack: AsyncExitStack) -> None:
    _, a = await serve(stack, config(etcd))
    _, b = await serve(stack, config(etcd))
    _, page, _ = await request(b, "GET", CONFIGMAPS)
    rv = page["metadata"]["resourceVersion"]
    async with b.get(f"{CONFIGMAPS}?watch=true&resourceVersion={rv}") as watch:
        delays = []
        for i in range(20):
            status, created, _ = await request(a, "POST", CONFIGMAPS, configmap(f"c{i}"))
            assert status == 201, created
            acknowledged = time.perf_counter()
            event = await next_event(watch)
            delays.append(time.perf_counter() - acknowledged)
            assert event["type"] == "ADDED"
            assert event["object"]["metadata"] == created["metadata"]
    delays.sort()
    print(f"watch delay across servers: median {delays[10] * 1e3:.1f} ms, "
          f"max {delays[-1] * 1e3:.1f} ms")


async def test_a_crd_created_through_one_server_serves_on_the_other(
        etcd: etcd_server.EtcdServer, stack: AsyncExitStack) -> None:
    _, a = await serve(stack, config(etcd))
    _, b = await serve(stack, config(etcd))

    status, body, _ = await request(a, "POST",
                                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                    CRD_V1)
    assert status == 201, body

    await until_status(b, "GET", WIDGETS, None, 200)
    created = await until_status(b, "POST", WIDGETS, widget("w1"), 201)
    status, fetched, _ = await request(a, "GET", f"{WIDGETS}/w1")
    assert status == 200
    assert fetched["metadata"]["uid"] == created["metadata"]["uid"]


async def test_unreachable_etcd_is_503_with_retry_after_and_recovers_without_restart(
        etcd: etcd_server.EtcdServer, stack: AsyncExitStack) -> None:
    _, http = await serve(stack, config(etcd))
    status, first, _ = await request(http, "POST", CONFIGMAPS, configmap("before"))
    assert status == 201, first
    rv = first["metadata"]["resourceVersion"]
    watch = await stack.enter_async_context(
        http.get(f"{CONFIGMAPS}?watch=true&resourceVersion={rv}"))

    etcd.stop()

    for method, path, body in [("POST", CONFIGMAPS, configmap("during")),
                               ("GET", CONFIGMAPS, None),
                               ("GET", f"{CONFIGMAPS}/before", None)]:
        status, reply, headers = await request(http, method, path, body)
        assert status == 503, (method, path, reply)
        assert reply["kind"] == "Status"
        assert reply["reason"] == "ServiceUnavailable"
        assert headers["Retry-After"] == "1"
    # reads that accept any cached state are still served from memory
    status, cached, _ = await request(http, "GET", f"{CONFIGMAPS}?resourceVersion=0")
    assert status == 200
    assert [i["metadata"]["name"] for i in cached["items"]] == ["before"]

    etcd.start()  # same data and ports, as a restarted member

    after = await until_status(http, "POST", CONFIGMAPS, configmap("after"), 201)
    event = await next_event(watch)  # the cache's storage watch resumed by itself
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "after")
    assert event["object"]["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]
    status, page, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200
    assert [i["metadata"]["name"] for i in page["items"]] == ["after", "before"]


async def test_clusters_sharing_an_etcd_do_not_stall_each_others_reads(
        etcd: etcd_server.EtcdServer, stack: AsyncExitStack) -> None:
    _, a = await serve(stack, config(etcd, "/clusters/a"))
    _, b = await serve(stack, config(etcd, "/clusters/b"))
    status, _, _ = await request(a, "POST", CONFIGMAPS, configmap("mine"))
    assert status == 201
    for i in range(5):  # etcd's newest revision now belongs to cluster b
        status, _, _ = await request(b, "POST", CONFIGMAPS, configmap(f"theirs{i}"))
        assert status == 201

    started = time.perf_counter()
    status, page, _ = await request(a, "GET", CONFIGMAPS)  # waits for a progress marker
    waited = time.perf_counter() - started

    assert status == 200
    assert [i["metadata"]["name"] for i in page["items"]] == ["mine"]
    print(f"fresh read behind another cluster's write: {waited * 1e3:.0f} ms")


async def test_the_server_compacts_etcd_periodically(etcd: etcd_server.EtcdServer,
                                                     stack: AsyncExitStack) -> None:
    server, http = await serve(stack, dataclasses.replace(config(etcd), compaction_interval=0.2))
    revisions = []
    for i in range(5):
        status, created, _ = await request(http, "POST", CONFIGMAPS, configmap(f"c{i}"))
        assert status == 201
        revisions.append(int(created["metadata"]["resourceVersion"]))

    deadline = time.monotonic() + 10
    while await server.backend.compacted_revision() < revisions[-1]:
        assert time.monotonic() < deadline, await server.backend.compacted_revision()
        await asyncio.sleep(0.1)

    # history is gone from etcd, but the cache still serves recent watches and fresh reads
    async with http.get(f"{CONFIGMAPS}?watch=true&resourceVersion={revisions[0]}") as watch:
        event = await next_event(watch)
    assert event["object"]["metadata"]["name"] == "c1"
    status, page, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200
    assert len(page["items"]) == 5
