"""Watches over TLS on the lean client, against a secured in-process server, on asyncio's
loop and on uvloop: events arrive, a slow reader holds a flood back (the unread bytes stay
bounded), closing a stream or the client under a waiting reader ends it at once, and every
connection is closed and uncounted afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import api, http1, watch
from setpoint.client import config as cfg
from setpoint.server.server import Server
from setpoint.testing import eventually
from tests.integration.api.helpers import secured_config

CM = ("v1", "ConfigMap")
PATH = "/api/v1/namespaces/default/configmaps"
HIGH_WATER = 64 * 1024
#: past the high-water mark: one read of the TLS layer's buffer (256 KiB) and the socket's
SLACK = 512 * 1024


def pool_of(client: api.Client) -> http1.Pool:
    pool = client._transport._pool
    assert pool is not None
    return pool


def assert_nothing_streams(pool: http1.Pool) -> None:
    assert not pool._streaming
    assert pool._count == len(pool._idle)  # only kept-alive request connections remain


async def on_secure_server(tmp_path: Path,
                           scenario: Callable[[api.Client], Awaitable[None]]) -> None:
    config = secured_config(tmp_path)
    async with Server(config):
        assert config.kubeconfig_path is not None
        client_config = cfg.load_kubeconfig(config.kubeconfig_path, request_timeout=30)
        assert client_config.is_https
        async with api.Client(client_config) as client:
            await scenario(client)


async def watch_stream(client: api.Client, rv: str) -> watch.Watch:
    async def opener() -> tuple[Any, str, str]:
        stream = await client._transport.stream(
            "GET", PATH, params={"watch": "1", "resourceVersion": rv})
        return stream, "v1", "ConfigMap"
    return watch.Watch(opener, inactivity_timeout=30)


async def flood_and_close(client: api.Client) -> None:
    """A slow reader of a large replay; then a reader closed under, then the client."""
    payload = "x" * 48 * 1024
    names = [f"big-{i}" for i in range(48)]  # about 2.3 MiB of events
    for name in names:
        await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": name, "namespace": "default"},
                             "data": {"v": payload}})
    events = await watch_stream(client, "0")
    async with events:
        stream = events._response
        assert isinstance(stream, http1.Stream)
        connection = stream._connection
        assert connection is not None
        # nobody reads: past the high-water mark the connection stops reading the socket
        await eventually(lambda: connection.paused, what="the stream paused")
        assert HIGH_WATER < stream._parser.buffered <= HIGH_WATER + SLACK
        seen: list[str] = []
        most_waiting = 0
        while len(seen) < len(names):
            await asyncio.sleep(0)  # the loop delivers what the socket has
            most_waiting = max(most_waiting, stream._parser.buffered)
            event = await anext(events)
            seen.append(event.object["metadata"]["name"])
        assert sorted(seen) == sorted(names)
        assert most_waiting <= HIGH_WATER + SLACK
        assert not connection.paused  # taken: reading resumed

        # a reader waiting on a silent stream; another task closes it
        reading = asyncio.create_task(anext(events))
        await asyncio.sleep(0)
        await events.aclose()
        with pytest.raises(StopAsyncIteration):
            await reading
    pool = pool_of(client)
    assert_nothing_streams(pool)

    # closing the client under a waiting watch ends it as a lost connection
    async with client.watch(CM, namespace="default", resource_version="0") as again:
        for _ in names:
            await anext(again)
        reading = asyncio.create_task(anext(again))
        await asyncio.sleep(0)
        await client.close()
        with pytest.raises(errors.ServiceUnavailable, match="client is closed"):
            await reading
    assert pool._count == 0
    assert not pool._streaming


async def test_a_watch_over_tls_is_flow_controlled_and_closes_cleanly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "STREAM_HIGH_WATER", HIGH_WATER)
    await on_secure_server(tmp_path, flood_and_close)


def test_a_watch_over_tls_on_uvloop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uvloop = pytest.importorskip("uvloop")
    monkeypatch.setattr(http1, "STREAM_HIGH_WATER", HIGH_WATER)
    uvloop.run(on_secure_server(tmp_path, flood_and_close))
