"""The watch cache follows progress markers and starts with recent storage history."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.apimachinery import errors
from setpoint.registry.watchcache import WatchCache
from setpoint.storage import MemoryBackend

PREFIX = "/registry/core/configmaps/"
OBJ = b'{"metadata":{}}'


@pytest.fixture
async def backend() -> AsyncIterator[MemoryBackend]:
    b = MemoryBackend()
    await b.start()
    yield b
    await b.close()


async def run_cache(backend: MemoryBackend, **kwargs: int
                    ) -> tuple[WatchCache, asyncio.Task[None]]:
    cache = WatchCache(backend, **kwargs)
    task = asyncio.create_task(cache.run())
    await cache.wait_ready()
    return cache, task


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_writes_outside_the_registry_do_not_stall_fresh_reads(
        backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend)
    try:
        await backend.create(PREFIX + "ns/a", OBJ)
        other = await backend.create("/elsewhere/b", OBJ)  # the store's newest revision

        async with asyncio.timeout(2):
            assert await cache.wait_fresh() == other.mod_revision
        assert cache.get(PREFIX + "ns/a") is not None
        # a watch from that revision sees the next write under /registry/ and nothing else
        watcher = cache.watch(PREFIX, other.mod_revision)
        created = await backend.create(PREFIX + "ns/c", OBJ)
        event = await watcher.next(1)
        assert event is not None
        assert (event.key, event.revision) == (PREFIX + "ns/c", created.mod_revision)
        watcher.close()
    finally:
        await stop(task)


async def test_a_new_cache_replays_recent_history_for_watches(backend: MemoryBackend) -> None:
    revisions = [(await backend.create(f"{PREFIX}ns/o{i}", OBJ)).mod_revision
                 for i in range(6)]
    deleted = await backend.delete(f"{PREFIX}ns/o0")

    cache, task = await run_cache(backend)  # as a restarted server's cache
    try:
        assert cache.revision == deleted.mod_revision
        assert [k for k, _ in cache.items(PREFIX)] == [f"{PREFIX}ns/o{i}" for i in range(1, 6)]
        watcher = cache.watch(PREFIX, revisions[2])
        replayed = [await watcher.next(1) for _ in range(4)]
        assert [(e.type, e.revision) for e in replayed if e] == [
            ("ADDED", revisions[3]), ("ADDED", revisions[4]), ("ADDED", revisions[5]),
            ("DELETED", deleted.mod_revision)]
        watcher.close()
    finally:
        await stop(task)


async def test_history_on_start_is_bounded_by_capacity_and_compaction(
        backend: MemoryBackend) -> None:
    for i in range(10):
        await backend.create(f"{PREFIX}ns/o{i}", OBJ)   # revisions 1..10
    await backend.compact(3)

    cache, task = await run_cache(backend, capacity=5)
    try:
        assert cache.oldest_watchable() == 5  # 10 - capacity
        assert cache.count(PREFIX) == 10
        with pytest.raises(errors.Expired):
            cache.watch(PREFIX, 4)
    finally:
        await stop(task)

    cache, task = await run_cache(backend, capacity=100)
    try:
        assert cache.oldest_watchable() == 3  # the compacted revision
    finally:
        await stop(task)


async def test_counts_under_a_resource_or_narrower_are_those_of_a_scan(
        backend: MemoryBackend) -> None:
    keys = [f"{PREFIX}a/x", f"{PREFIX}a/y", f"{PREFIX}b/x", "/registry/apps/deployments/a/d",
            "/registry/core/namespaces/a"]
    for key in keys:
        await backend.create(key, OBJ)
    cache, task = await run_cache(backend)
    try:
        for prefix in (PREFIX, f"{PREFIX}a/", f"{PREFIX}b/", f"{PREFIX}c/",
                       "/registry/core/namespaces/", "/registry/core/secrets/",
                       "/registry/apps/deployments/", "/registry/policies/x/",
                       f"{PREFIX}a/x"):
            assert cache.count(prefix) == sum(k.startswith(prefix) for k in keys), prefix
    finally:
        await stop(task)
