"""Connections that send half a request are closed (after the header timeout, or sooner when
the connection cap is reached), while well-behaved clients keep being served. Each close is
observed on the socket (the server ends the stream), never assumed after a sleep."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.limits import Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api import rawhttp
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
HALF_REQUEST = b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Le"


async def serve(**limits: Any) -> Server:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          compaction_interval=None, limits=Limits(**limits))
    return Server(config)


@pytest.fixture
async def closing() -> AsyncIterator[list[rawhttp.Connection]]:
    opened: list[rawhttp.Connection] = []
    yield opened
    for conn in opened:
        await conn.close()


async def half_sent(url: str, n: int, opened: list[rawhttp.Connection]
                    ) -> list[rawhttp.Connection]:
    conns = []
    for _ in range(n):
        conn = await rawhttp.Connection.open(url)
        await conn.send(HALF_REQUEST)
        conns.append(conn)
        opened.append(conn)
    return conns


async def closed_metric(http: aiohttp.ClientSession, reason: str) -> float:
    async with http.get("/metrics") as response:
        text = await response.text()
    line = f'setpoint_closed_connections_total{{reason="{reason}"}} '
    return float(next(x for x in text.splitlines() if x.startswith(line)).rsplit(" ", 1)[1])


async def test_half_sent_requests_are_closed_after_the_header_timeout(
        closing: list[rawhttp.Connection]) -> None:
    async with await serve(header_timeout=0.5) as server:
        stalled = await half_sent(server.url, 200, closing)
        async with aiohttp.ClientSession(base_url=server.url) as http:
            status, _, _ = await request(http, "POST", CONFIGMAPS, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fine"}})
            assert status == 201
            closed = await asyncio.wait_for(
                asyncio.gather(*(c.closed_by_server() for c in stalled)), 30)
            assert all(closed)
            assert await closed_metric(http, "header_timeout") >= len(stalled)
            status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/fine")
            assert status == 200


async def test_a_trickled_header_is_closed_too(closing: list[rawhttp.Connection]) -> None:
    """Bytes that keep coming do not extend the header timeout."""
    async with await serve(header_timeout=0.5) as server:
        conn = (await half_sent(server.url, 1, closing))[0]

        async def trickle() -> None:
            for i in range(10_000):
                await conn.send(b"X-Slow-%d: y\r\n" % i)
                await asyncio.sleep(0.05)

        dripping = asyncio.create_task(trickle())
        try:
            assert await asyncio.wait_for(conn.closed_by_server(), 30)
        finally:
            dripping.cancel()
            await asyncio.gather(dripping, return_exceptions=True)


async def test_at_the_cap_the_longest_waiting_connections_make_room(
        closing: list[rawhttp.Connection]) -> None:
    server = await serve(max_connections=10, header_timeout=600)
    async with server, aiohttp.ClientSession(base_url=server.url) as http:
        # an established client with a watch open, served all along
        watch = await http.get(CONFIGMAPS + "?watch=true")
        assert watch.status == 200
        first = await half_sent(server.url, 30, closing)
        # the first 21 half-sent requests made room for later ones (the watch stays)
        assert await asyncio.wait_for(
            asyncio.gather(*(c.closed_by_server() for c in first[:21])), 30)
        status, _, _ = await request(http, "POST", CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "served"}})
        assert status == 201
        event = orjson.loads(await asyncio.wait_for(watch.content.readline(), 10))
        assert event["object"]["metadata"]["name"] == "served"
        watch.close()
        assert await closed_metric(http, "evicted") >= 21


async def test_connections_beyond_the_cap_are_refused_when_all_are_busy(
        closing: list[rawhttp.Connection]) -> None:
    server = await serve(max_connections=3)
    async with server, aiohttp.ClientSession(base_url=server.url) as http:
        watches = [await http.get(CONFIGMAPS + "?watch=true") for _ in range(3)]
        assert [w.status for w in watches] == [200, 200, 200]
        extra = await rawhttp.Connection.open(server.url)
        closing.append(extra)
        await extra.send_head("GET", "/version", {})
        response = await asyncio.wait_for(extra.read_response(), 10)
        assert response.status == 503
        assert response.headers["retry-after"] == "1"
        assert response.json()["reason"] == "ServiceUnavailable"
        assert await asyncio.wait_for(extra.closed_by_server(), 10)
        watches[0].close()
        assert await asyncio.wait_for(served_again(server.url, closing), 10)
        for w in watches[1:]:
            w.close()


async def served_again(url: str, opened: list[rawhttp.Connection]) -> bool:
    """Once a connection closes, a new one is served (the server sees the close a moment
    after the client makes it)."""
    while True:
        conn = await rawhttp.Connection.open(url)
        opened.append(conn)
        await conn.send_head("GET", "/version", {"Connection": "close"})
        if (await conn.read_response()).status == 200:
            return True
        await asyncio.sleep(0.01)


async def test_idle_kept_alive_connections_are_closed(
        closing: list[rawhttp.Connection]) -> None:
    async with await serve(idle_timeout=0.5) as server:
        conn = await rawhttp.Connection.open(server.url)
        closing.append(conn)
        for _ in range(3):  # requests keep it open, then it idles out
            await conn.send_head("GET", "/version", {})
            assert (await asyncio.wait_for(conn.read_response(), 10)).status == 200
        assert await asyncio.wait_for(conn.closed_by_server(), 30)
