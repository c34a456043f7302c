"""A watch cut because etcd lost its leader resumes without losing or repeating events.

An etcd member ends the watch streams of clients that asked for a leader (as setpoint's do)
once it has had no leader for three election timeouts. The test finds the member carrying
the server's storage watch, kills the other two (kill -9) so that it loses its leader, keeps
them down until it has cut the watch, then restarts them. Meanwhile an HTTP watch on the
server, opened before, must go on undisturbed: every acknowledged create exactly once, in
order; writes during the outage get 503 with Retry-After, reads that accept cached state
still answer.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.storage import etcd_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def watch_streams(member: etcd_server.EtcdServer) -> float:
    """etcd's gauge of the gRPC watch streams open on ``member``."""
    with urllib.request.urlopen(f"{member.endpoint}/metrics", timeout=2) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith("etcd_debugging_mvcc_watch_stream_total "):
                return float(line.split()[1])
    return 0.0


async def create(http: aiohttp.ClientSession, name: str) -> tuple[int, Any, str | None]:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
    async with http.post(CONFIGMAPS, data=orjson.dumps(body),
                         headers={"Content-Type": "application/json"}) as r:
        return r.status, orjson.loads(await r.read()), r.headers.get("Retry-After")


async def create_until_known(http: aiohttp.ClientSession, name: str) -> int | None:
    """The resourceVersion of an acknowledged create, or None if an earlier attempt was
    applied after all (409)."""
    deadline = time.monotonic() + 30
    while True:
        status, body, _ = await create(http, name)
        if status == 201:
            return int(body["metadata"]["resourceVersion"])
        if status == 409:
            return None
        assert status in (503, 504), body
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)


async def test_a_watch_cut_by_leader_loss_resumes_exactly(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="setpoint.registry.watchcache")
    with etcd_server.cluster(tmp_path / "etcd", 3) as etcd:
        config = ServerConfig(port=0, storage=StorageConfig(
            kind="etcd", endpoints=tuple(etcd.endpoints)))
        async with Server(config) as server, \
                aiohttp.ClientSession(base_url=server.url) as http:
            async with http.get(CONFIGMAPS) as r:
                since = (await r.json())["metadata"]["resourceVersion"]
            events: list[tuple[str, int]] = []

            async def watch() -> None:
                async with http.get(f"{CONFIGMAPS}?watch=true&resourceVersion={since}",
                                    timeout=aiohttp.ClientTimeout(total=None)) as response:
                    async for line in response.content:
                        event = orjson.loads(line)
                        assert event["type"] == "ADDED", event
                        meta = event["object"]["metadata"]
                        events.append((meta["name"], int(meta["resourceVersion"])))

            watcher = asyncio.create_task(watch())
            acknowledged: dict[str, int | None] = {}
            for i in range(50):
                acknowledged[f"before-{i}"] = await create_until_known(http, f"before-{i}")

            carrying = [m for m in etcd.members if watch_streams(m) > 0]
            assert len(carrying) == 1, "the server holds exactly one etcd watch"
            others = [m for m in etcd.members if m is not carrying[0]]
            for member in others:
                member.kill()
            outage_started = time.monotonic()
            status, body, retry_after = await create(http, "during")
            assert status in (503, 504), body
            assert retry_after == "1"
            async with http.get(f"{CONFIGMAPS}?resourceVersion=0") as r:
                assert r.status == 200  # served from the cache
            # etcd cuts hasleader streams after 3 election timeouts (3 s) without a leader
            deadline = time.monotonic() + 15
            while "watch cache retrying" not in caplog.text:
                assert time.monotonic() < deadline, "etcd did not cut the watch"
                await asyncio.sleep(0.1)
            outage = time.monotonic() - outage_started

            for member in others:
                await asyncio.to_thread(member.start, wait=False)
            acknowledged["during"] = await create_until_known(http, "during")
            for i in range(50):
                acknowledged[f"after-{i}"] = await create_until_known(http, f"after-{i}")

            async with asyncio.timeout(10):
                while len(events) < len(acknowledged):  # noqa: ASYNC110 - the watch appends
                    await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)  # nothing more may come
            watcher.cancel()
            print(f"\nleader lost for {outage:.1f} s; the server's storage watch was cut "
                  f"and resumed; {len(events)} events watched")

    names = [name for name, _ in events]
    revisions = [rv for _, rv in events]
    assert sorted(names) == sorted(acknowledged), "an event is missing or came twice"
    assert revisions == sorted(set(revisions))
    by_name = dict(events)
    assert all(by_name[n] == rv for n, rv in acknowledged.items() if rv is not None)
