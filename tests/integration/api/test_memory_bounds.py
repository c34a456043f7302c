"""Memory bounds through the API: the watch cache's history by bytes, concurrent LISTs by a
budget of response bytes (429 with Retry-After beyond it)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
MERGE = "application/merge-patch+json"


def configmap(name: str, size: int) -> dict[str, Any]:
    # below 64 KiB per body: a size every server version reads whole
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"pad": "x" * size}}


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for ``condition`` to hold (a positive signal, polled)."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 - server state, with no event to wait on
            await asyncio.sleep(0.005)


async def first_event(http: aiohttp.ClientSession, path: str) -> dict[str, Any]:
    async with http.get(path) as response:
        assert response.status == 200
        async with asyncio.timeout(5):
            line = await response.content.readline()
    event: dict[str, Any] = orjson.loads(line)
    return event


async def test_watch_cache_history_is_bounded_by_bytes(tmp_path: Path) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          watch_cache_bytes=512 * 1024)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        status, created, _ = await request(http, "POST", CONFIGMAPS, configmap("big", 50_000))
        assert status == 201, created
        first_rv = int(created["metadata"]["resourceVersion"])
        rv = first_rv
        for i in range(40):  # small patches of a big object: each event is the whole object
            status, body, _ = await request(http, "PATCH", CONFIGMAPS + "/big",
                                            {"metadata": {"labels": {"n": str(i)}}},
                                            content_type=MERGE)
            assert status == 200, body
            rv = int(body["metadata"]["resourceVersion"])
        assert server.cache is not None
        assert server.cache.history_bytes <= 512 * 1024
        # a watch from before the window: 410 in band, the client relists
        gone = await first_event(http, f"{CONFIGMAPS}?watch=true&resourceVersion={first_rv}")
        assert gone["type"] == "ERROR"
        assert gone["object"]["code"] == 410
        assert gone["object"]["reason"] == "Expired"
        # a watch from inside it replays exactly
        recent = await first_event(http, f"{CONFIGMAPS}?watch=true&resourceVersion={rv - 1}")
        assert recent["type"] == "MODIFIED"
        assert recent["object"]["metadata"]["resourceVersion"] == str(rv)
        assert recent["object"]["metadata"]["labels"] == {"n": "39"}


class StalledList:
    """A LIST whose client does not read its response: a tiny receive window, so that the
    server's writes wait on it and the LIST stays in flight."""

    def __init__(self, url: str, path: str) -> None:
        self._url = url
        self._path = path
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> StalledList:
        host, port = self._url.removeprefix("http://").rsplit(":", 1)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        _, self._writer = await asyncio.open_connection(sock=sock, limit=4096)
        self._writer.write(f"GET {self._path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        await self._writer.drain()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._writer is not None
        self._writer.close()
        # the server sees the connection reset; a response it was still writing is abandoned
        try:
            await self._writer.wait_closed()
        except ConnectionError:
            pass


@pytest.fixture
async def budgeted(tmp_path: Path) -> AsyncIterator[tuple[Server, aiohttp.ClientSession]]:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          list_budget_bytes=1024 * 1024)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        yield server, http


async def test_concurrent_big_lists_beyond_the_budget_get_429(
        budgeted: tuple[Server, aiohttp.ClientSession]) -> None:
    server, http = budgeted
    lists = server.lists
    assert lists is not None
    # about 8 MB of objects: more than the socket buffers between a server and a client
    # that does not read, so such a LIST stays in flight
    for i in range(160):
        status, body, _ = await request(http, "POST", CONFIGMAPS,
                                        configmap(f"cm-{i:03d}", 50_000))
        assert status == 201, body

    async with StalledList(server.url, CONFIGMAPS):
        await until(lambda: lists.reserved > 0)
        waiting = asyncio.create_task(request(http, "GET", CONFIGMAPS))
        await until(lambda: lists.waiting == 1)
        # the budget is taken and the line is full: refused at once, retry later
        status, body, headers = await request(http, "GET", CONFIGMAPS)
        assert status == 429, body
        assert headers["Retry-After"] == "1"
        assert body["reason"] == "TooManyRequests"
        assert body["message"] == "Too many requests, please try again later."
        assert body["details"]["retryAfterSeconds"] == 1
        # small requests are served meanwhile
        status, body, _ = await request(http, "GET", CONFIGMAPS + "/cm-000")
        assert status == 200, body
        status, body, _ = await request(http, "GET", "/api/v1/namespaces/default/secrets")
        assert status == 200, body
        status, body, _ = await request(http, "GET", CONFIGMAPS + "?limit=2")
        assert status == 200, body
        assert len(body["items"]) == 2
        status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("small", 10))
        assert status == 201, body
        assert not waiting.done()
    # the stalled client went away: its reservation is released and the waiting LIST runs
    status, body, _ = await waiting
    assert status == 200, body
    assert len(body["items"]) == 161
    assert lists.reserved == 0
    assert lists.rejected == 1


async def test_streamed_list_is_the_same_json(
        budgeted: tuple[Server, aiohttp.ClientSession]) -> None:
    _, http = budgeted
    for i in range(30):
        status, body, _ = await request(http, "POST", CONFIGMAPS,
                                        configmap(f"cm-{i:03d}", 20_000))
        assert status == 201, body
    async with http.get(CONFIGMAPS) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        raw = await response.read()
    listed = orjson.loads(raw)
    assert raw == orjson.dumps(listed)  # one compact document, as json_response writes it
    assert list(listed) == ["apiVersion", "kind", "metadata", "items"]
    assert listed["kind"] == "ConfigMapList"
    assert [item["metadata"]["name"] for item in listed["items"]] == [
        f"cm-{i:03d}" for i in range(30)]
    partial = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    async with http.get(CONFIGMAPS, headers={"Accept": partial}) as response:
        assert response.status == 200
        meta = orjson.loads(await response.read())
    assert meta["kind"] == "PartialObjectMetadataList"
    assert len(meta["items"]) == 30
    assert "data" not in meta["items"][0]
