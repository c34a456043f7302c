"""In-flight limits: one request more than ``max_[mutating_]requests_inflight`` is a 429 with
``Retry-After: 1``, counted per kind (read-only, mutating); watches are never counted.

A request is held in flight by the storage it waits on: the backend below blocks the next
create, or the next consistent read, until the test releases it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import orjson
import pytest

from setpoint.server.limits import Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import MemoryBackend, StorageConfig
from setpoint.storage import interface as st
from tests.integration.api import rawhttp
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


class HeldBackend(MemoryBackend):
    """Holds the next create (or the next current-revision read, which every consistent GET
    and LIST makes) after :meth:`hold` until :meth:`release`."""

    def __init__(self) -> None:
        super().__init__()
        self._hold: str | None = None
        self.held = asyncio.Event()
        self._release = asyncio.Event()

    def hold(self, what: str) -> None:
        self._hold = what
        self.held.clear()
        self._release.clear()

    def release(self) -> None:
        self._release.set()

    async def _maybe_hold(self, what: str) -> None:
        if self._hold == what:
            self._hold = None
            self.held.set()
            await self._release.wait()

    async def create(self, key: str, value: bytes) -> st.KeyValue:
        await self._maybe_hold("create")
        return await super().create(key, value)

    async def current_revision(self) -> int:
        await self._maybe_hold("read")
        return await super().current_revision()


@pytest.fixture
async def held() -> AsyncIterator[tuple[Server, HeldBackend]]:
    backend = HeldBackend()
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          compaction_interval=None,
                          limits=Limits(max_requests_inflight=1,
                                        max_mutating_requests_inflight=1))
    async with Server(config, backend=backend) as server:
        yield server, backend


def configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def assert_429(status: int, body: dict[str, object], headers: object) -> None:
    assert status == 429, body
    assert body["kind"] == "Status"
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Too many requests, please try again later."
    assert headers["Retry-After"] == "1"  # type: ignore[index]


async def metric(http: aiohttp.ClientSession, line_start: str) -> float:
    async with http.get("/metrics") as response:
        assert response.status == 200
        for line in (await response.text()).splitlines():
            if line.startswith(line_start + " "):
                return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no series {line_start}")


async def test_one_write_more_than_the_limit_is_429(held: tuple[Server, HeldBackend]) -> None:
    server, backend = held
    async with aiohttp.ClientSession(base_url=server.url) as http:
        backend.hold("create")
        first = asyncio.create_task(request(http, "POST", CONFIGMAPS, configmap("first")))
        await asyncio.wait_for(backend.held.wait(), 10)
        assert await metric(
            http, 'apiserver_current_inflight_requests{request_kind="mutating"}') == 1

        status, body, headers = await request(http, "POST", CONFIGMAPS, configmap("second"))
        assert_429(status, body, headers)
        # reads are limited separately
        status, _, _ = await request(http, "GET", CONFIGMAPS)
        assert status == 200

        backend.release()
        status, _, _ = await first
        assert status == 201
        status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("second"))
        assert status == 201
        assert await metric(
            http, 'apiserver_dropped_requests_total{request_kind="mutating"}') == 1
        assert await metric(http, 'apiserver_request_total{verb="POST",dry_run="",group="",'
                                   'version="v1",resource="configmaps",subresource="",'
                                   'scope="resource",component="apiserver",code="429"}') == 1


async def test_watches_do_not_count_against_the_read_limit(
        held: tuple[Server, HeldBackend]) -> None:
    server, backend = held
    async with aiohttp.ClientSession(base_url=server.url) as http:
        # a watch open for the whole test, and a read held in flight beside it
        watch = await http.get(CONFIGMAPS + "?watch=true&allowWatchBookmarks=false")
        assert watch.status == 200
        backend.hold("read")
        first = asyncio.create_task(request(http, "GET", CONFIGMAPS))
        await asyncio.wait_for(backend.held.wait(), 10)

        status, body, headers = await request(http, "GET", CONFIGMAPS + "/x")
        assert_429(status, body, headers)

        # more watches are still served, and see what is written meanwhile
        second = await http.get(CONFIGMAPS + "?watch=1")
        assert second.status == 200
        assert await metric(
            http, 'apiserver_longrunning_requests{verb="WATCH",group="",version="v1",'
                  'resource="configmaps",subresource="",scope="namespace",'
                  'component="apiserver"}') == 2
        status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("seen"))
        assert status == 201
        for stream in (watch, second):
            event = orjson.loads(await asyncio.wait_for(stream.content.readline(), 10))
            assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "seen")
            stream.close()

        backend.release()
        status, _, _ = await first
        assert status == 200
        status, _, _ = await request(http, "GET", CONFIGMAPS + "/seen")
        assert status == 200


async def test_probes_and_metrics_are_not_limited(held: tuple[Server, HeldBackend]) -> None:
    server, backend = held
    async with aiohttp.ClientSession(base_url=server.url) as http:
        backend.hold("read")
        first = asyncio.create_task(request(http, "GET", CONFIGMAPS))
        await asyncio.wait_for(backend.held.wait(), 10)
        for path in ("/livez", "/healthz", "/metrics", "/readyz/informer-sync"):
            async with http.get(path) as response:
                assert response.status == 200, path
        status, _, _ = await request(http, "GET", "/version")
        assert status == 429
        backend.release()
        assert (await first)[0] == 200


async def test_writes_whose_bodies_trickle_in_take_no_slot(
        held: tuple[Server, HeldBackend]) -> None:
    """With one mutating slot, three clients stalled halfway through their bodies do not
    block another write; each stalled write is served once its body is complete."""
    server, _ = held
    body = orjson.dumps(configmap("slow"))
    stalled = []
    for i in range(3):
        conn = await rawhttp.Connection.open(server.url)
        whole = orjson.dumps(configmap(f"slow-{i}"))
        await conn.send_head("POST", CONFIGMAPS, {"Content-Type": "application/json",
                                                  "Content-Length": str(len(whole))})
        await conn.send(whole[:10])
        stalled.append((conn, whole))
    async with aiohttp.ClientSession(server.url) as http:
        status, created, _ = await request(http, "POST", CONFIGMAPS, orjson.loads(body))
        assert status == 201, created
    for conn, whole in stalled:
        await conn.send(whole[10:])
        response = await conn.read_response()
        assert response.status == 201, response.body[:300]
        await conn.close()
