"""What only the etcd backend promises: outages, timeouts, shared etcds, progress markers."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from setpoint.storage import Event, KeyValue, Unavailable
from tests.integration.storage import etcd_server
from tests.integration.storage.storage_testkit import brief, take

pytestmark = [
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]

if importlib.util.find_spec("aetcd") is not None:
    from setpoint.storage.etcd import EtcdBackend, Progress

RECOVERY = 15.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[etcd_server.EtcdServer]:
    with etcd_server.running(tmp_path / "etcd") as started:
        yield started


@pytest.fixture
async def store(server: etcd_server.EtcdServer) -> AsyncIterator[EtcdBackend]:
    async with EtcdBackend([server.endpoint], timeout=1.0) as backend:
        yield backend


async def _until_available(backend: EtcdBackend, key: str) -> KeyValue | None:
    deadline = time.monotonic() + RECOVERY
    while True:
        try:
            return await backend.get(key)
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_outage_raises_unavailable_then_recovers_without_restart(
        server: etcd_server.EtcdServer, store: EtcdBackend) -> None:
    a = await store.create("/a", b"1")
    stream = store.watch("/", a.mod_revision + 1)
    pending = asyncio.ensure_future(anext(stream))
    await store.create("/b", b"1")
    assert (await pending).revision == 2  # the watch is live

    server.stop()

    with pytest.raises(Unavailable):
        await take(stream, 1)
    for attempt in (store.get("/a"), store.create("/c", b"1"), store.list("/"),
                    store.current_revision(), store.update("/a", b"2", 1)):
        with pytest.raises(Unavailable):
            await attempt
    with pytest.raises(Unavailable):
        await anext(store.watch("/", 3))

    server.start()  # same data dir and ports, as a restarted member

    assert await _until_available(store, "/a") == a
    assert await store.current_revision() == 2
    assert (await store.create("/c", b"1")).mod_revision == 3
    assert brief(await take(store.watch("/", 2), 2)) == [
        ("PUT", "/b", b"1", 2), ("PUT", "/c", b"1", 3)]


def _freeze(pid: int) -> None:
    """Stop ``pid`` and wait until every one of its threads has stopped (a thread running
    on another CPU may still answer a request right after the signal)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    tasks = Path(f"/proc/{pid}/task")
    while time.monotonic() < deadline:
        states = {(task / "stat").read_text().rsplit(")", 1)[1].split()[0]
                  for task in tasks.iterdir()}
        if states <= {"T", "t"}:
            return
        time.sleep(0.01)
    raise AssertionError(f"etcd did not stop: thread states {states}")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
async def test_an_unresponsive_etcd_times_out_as_unavailable(
        server: etcd_server.EtcdServer, store: EtcdBackend) -> None:
    await store.create("/a", b"1")
    process = server._process
    assert process is not None
    _freeze(process.pid)
    try:
        # the call's own deadline ends it: no wait for the frozen member
        with pytest.raises(Unavailable, match="DEADLINE_EXCEEDED"):
            await store.get("/a")
    finally:
        os.kill(process.pid, signal.SIGCONT)

    assert (await _until_available(store, "/a")) is not None


async def test_start_raises_unavailable_until_etcd_is_reachable(tmp_path: Path) -> None:
    server = etcd_server.EtcdServer(tmp_path / "etcd")
    backend = EtcdBackend([server.endpoint], timeout=1.0)
    try:
        with pytest.raises(Unavailable):
            await backend.start()
        server.start()
        await backend.start()  # a failed start leaves the backend startable
        assert await backend.current_revision() == 0
    finally:
        await backend.close()
        server.stop()


async def test_prefixes_partition_one_etcd(server: etcd_server.EtcdServer) -> None:
    async with EtcdBackend([server.endpoint], prefix="/clusters/a") as a, \
            EtcdBackend([server.endpoint], prefix="/clusters/b") as b, \
            EtcdBackend([server.endpoint]) as whole:
        a_events = a.watch("/", 1)
        await a.create("/registry/x", b"a")
        await b.create("/registry/x", b"b")
        await a.create("/registry/y", b"a")

        assert [(kv.key, kv.value) for kv in (await a.list("/")).kvs] == [
            ("/registry/x", b"a"), ("/registry/y", b"a")]
        assert [(kv.key, kv.value) for kv in (await b.list("")).kvs] == [("/registry/x", b"b")]
        assert [kv.key for kv in (await whole.list("")).kvs] == [
            "/clusters/a/registry/x", "/clusters/a/registry/y", "/clusters/b/registry/x"]
        # One etcd, one revision sequence: b's write took revision 2.
        assert brief(await take(a_events, 2)) == [
            ("PUT", "/registry/x", b"a", 1), ("PUT", "/registry/y", b"a", 3)]
        assert await b.current_revision() == 3


async def test_progress_markers_advance_without_events_under_the_prefix(
        tmp_path: Path) -> None:
    interval = ("--experimental-watch-progress-notify-interval", "200ms")
    with etcd_server.running(tmp_path / "etcd", *interval) as server:
        async with EtcdBackend([server.endpoint]) as store:
            await store.create("/a/1", b"x")
            stream = store.watch("/a/", 2, progress=True)
            await store.create("/b/1", b"x")  # revision 2, outside the prefix
            await store.create("/b/2", b"x")  # revision 3

            async with asyncio.timeout(10):
                marker = await anext(stream)
                while isinstance(marker, Progress) and marker.revision < 3:
                    marker = await anext(stream)
            assert marker == Progress(3)

            await store.create("/a/2", b"x")  # revision 4
            async with asyncio.timeout(10):
                item = await anext(stream)
            assert isinstance(item, Event)
            assert (item.kv.key, item.revision) == ("/a/2", 4)


async def test_plain_watches_never_yield_progress_markers(tmp_path: Path) -> None:
    interval = ("--experimental-watch-progress-notify-interval", "100ms")
    with etcd_server.running(tmp_path / "etcd", *interval) as server:
        async with EtcdBackend([server.endpoint]) as store:
            stream = store.watch("/a/", 1)
            await store.create("/b/1", b"x")
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.5):
                    await anext(stream)
            await store.create("/a/1", b"x")
            assert brief(await take(stream, 1)) == [("PUT", "/a/1", b"x", 2)]


async def test_compaction_by_someone_else_is_learned(server: etcd_server.EtcdServer,
                                                      store: EtcdBackend) -> None:
    kv = await store.create("/k", b"0")
    for i in range(1, 20):
        kv = await store.update("/k", str(i).encode(), kv.mod_revision)
    async with EtcdBackend([server.endpoint]) as other:
        await other.compact(13)

    assert await store.compacted_revision() == 13
    assert (await store.get("/k", revision=13)).value == b"12"  # type: ignore[union-attr]


async def test_close_waits_for_every_watch_reader(server: etcd_server.EtcdServer) -> None:
    backend = EtcdBackend([server.endpoint])
    await backend.start()
    await backend.create("/a", b"1")
    streams = [backend.watch("/", 1) for _ in range(5)]
    for stream in streams:
        await take(stream, 1)
    before = len(asyncio.all_tasks())

    await backend.close()

    assert len(asyncio.all_tasks()) < before
    assert [task.get_name() for task in asyncio.all_tasks()
            if "etcd" in task.get_name() or "_follow" in repr(task)] == []
    for stream in streams:
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
