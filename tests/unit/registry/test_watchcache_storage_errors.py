"""The watch cache survives every storage error: it resumes, relists, and maps reads to 503.

A storage call that fails in a way the backend does not classify (an etcd answer during a
leader change that is neither "unavailable" nor "compacted") reaches the cache as a bare
``StorageError``. It must neither end the cache's task (which would stop the server's task
group) nor lose or repeat an event for the cache's watchers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.apimachinery import errors
from setpoint.registry.watchcache import WatchCache
from setpoint.storage import StorageError, Unavailable
from tests.flaky_backend import FlakyBackend

PREFIX = "/registry/core/configmaps/"


@pytest.fixture
async def backend() -> AsyncIterator[FlakyBackend]:
    b = FlakyBackend()
    await b.start()
    yield b
    await b.close()


async def stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def create(backend: FlakyBackend, name: str) -> int:
    kv = await backend.create(f"{PREFIX}ns/{name}", b'{"metadata":{"name":"%s"}}'
                              % name.encode())
    return kv.mod_revision


async def test_a_bare_storage_error_in_the_watch_is_resumed_exactly(
        backend: FlakyBackend) -> None:
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_ready()
        watcher = cache.watch(PREFIX, cache.revision)
        first = await create(backend, "a")
        backend.watch_faults.append(StorageError("etcd range: UNKNOWN: raft proposal dropped"))
        backend.watch_faults.append(Unavailable("etcd watch: UNAVAILABLE: leader changed"))
        second = await create(backend, "b")
        third = await create(backend, "c")
        async with asyncio.timeout(10):
            seen = [(await watcher.next()) for _ in range(3)]
        assert [e.revision for e in seen if e] == [first, second, third]
        assert not task.done()
        assert backend.watches >= 3  # followed again after each failure
        assert await cache.wait_fresh() == third
        assert watcher.idle()
    finally:
        await stop(task)


async def test_storage_errors_while_listing_at_start_are_retried(
        backend: FlakyBackend) -> None:
    revision = await create(backend, "a")
    backend.read_faults = [StorageError("etcd range: UNKNOWN: stream removed"),
                           Unavailable("etcd range: UNAVAILABLE: no leader")]
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    try:
        async with asyncio.timeout(10):
            await cache.wait_ready()
        assert cache.get(f"{PREFIX}ns/a") is not None
        assert cache.revision >= revision
        assert not backend.read_faults
    finally:
        await stop(task)


async def test_fresh_reads_answer_503_for_any_storage_error(backend: FlakyBackend) -> None:
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    try:
        await cache.wait_ready()
        backend.read_faults.append(StorageError("etcd range: INTERNAL: something odd"))
        with pytest.raises(errors.ServiceUnavailable) as raised:
            await cache.wait_fresh()
        assert raised.value.retry_after == 1
        await cache.wait_fresh()  # and the next one is served
    finally:
        await stop(task)
