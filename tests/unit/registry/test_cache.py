"""The watch cache on a memory backend: freshness, replay, the window, bounded watchers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.apimachinery import errors
from setpoint.registry.cache import WatchCache
from setpoint.storage import MemoryBackend

PREFIX = "/registry/core/configmaps/"


@pytest.fixture
async def backend() -> AsyncIterator[MemoryBackend]:
    b = MemoryBackend()
    await b.start()
    yield b
    await b.close()


async def run_cache(backend: MemoryBackend, **kwargs: int) -> tuple[WatchCache, asyncio.Task[None]]:
    cache = WatchCache(backend, **kwargs)
    task = asyncio.create_task(cache.run())
    await cache.wait_ready()
    return cache, task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_reads_after_a_write_see_it(backend: MemoryBackend) -> None:
    await backend.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
    cache, task = await run_cache(backend)
    try:
        kv = await backend.create(PREFIX + "ns/b", b'{"metadata":{"name":"b"}}')
        revision = await cache.wait_fresh()
        assert revision >= kv.mod_revision
        assert [k for k, _ in cache.items(PREFIX)] == [PREFIX + "ns/a", PREFIX + "ns/b"]
        obj = cache.get(PREFIX + "ns/b")
        assert obj is not None
        assert obj["metadata"]["resourceVersion"] == str(kv.mod_revision)
    finally:
        await stop(task)


async def test_watch_replays_the_window_and_refuses_older(backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend, capacity=5)
    try:
        revisions = [(await backend.create(f"{PREFIX}ns/o{i}", b'{"metadata":{}}')).mod_revision
                     for i in range(8)]
        await cache.wait_fresh()
        watcher = cache.watch(PREFIX, revisions[4])
        replayed = [await watcher.next(1) for _ in range(3)]
        assert [e.revision for e in replayed if e] == revisions[5:]
        watcher.close()
        with pytest.raises(errors.Expired):
            cache.watch(PREFIX, revisions[0])
    finally:
        await stop(task)


async def test_slow_watcher_is_closed_not_buffered(backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend, watcher_buffer=3)
    try:
        slow = cache.watch(PREFIX, cache.revision)
        fast = cache.watch(PREFIX, cache.revision)
        seen = 0
        for i in range(10):
            await backend.create(f"{PREFIX}ns/x{i}", b'{"metadata":{}}')
            await cache.wait_fresh()
            while not fast.idle():
                assert await fast.next(1) is not None
                seen += 1
        assert seen == 10
        assert slow.lagged
        events = [e async for e in slow]
        assert len(events) <= 3
        assert cache.watcher_count() == 1
        fast.close()
        assert cache.watcher_count() == 0
    finally:
        await stop(task)


async def test_delete_event_carries_last_state_at_delete_revision(
        backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend)
    try:
        kv = await backend.create(PREFIX + "ns/d", b'{"metadata":{"name":"d"},"data":{"k":"v"}}')
        await cache.wait_fresh()
        watcher = cache.watch(PREFIX, kv.mod_revision)
        deleted = await backend.delete(PREFIX + "ns/d")
        event = await watcher.next(1)
        assert event is not None
        assert event.type == "DELETED"
        assert event.object["data"] == {"k": "v"}
        assert event.object["metadata"]["resourceVersion"] == str(deleted.mod_revision)
        watcher.close()
    finally:
        await stop(task)
