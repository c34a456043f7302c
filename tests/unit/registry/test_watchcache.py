"""The watch cache on a memory backend: freshness, replay, the window, bounded watchers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.registry import history as hist
from setpoint.registry.watchcache import WatchCache
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


def big(n: int, size: int = 100_000) -> bytes:
    return b'{"metadata":{"name":"big","labels":{"n":"%d"}},"data":{"pad":"%s"}}' % (
        n, b"x" * size)


async def test_history_of_a_big_object_is_bounded_by_bytes(backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend, max_bytes=1024 * 1024)
    try:
        first = await backend.create(PREFIX + "ns/big", big(0))
        revision = first.mod_revision
        for i in range(1, 100):
            revision = (await backend.update(PREFIX + "ns/big", big(i), revision)).mod_revision
        await cache.wait_fresh()
        assert cache.history_bytes <= 1024 * 1024
        assert 5 <= cache.history_events <= 11  # about 100 KB each
        assert cache.oldest_watchable() > first.mod_revision
        with pytest.raises(errors.Expired):
            cache.watch(PREFIX, first.mod_revision)
        # the window that is kept replays exactly, old versions decoded from their bytes
        since = cache.oldest_watchable()
        watcher = cache.watch(PREFIX, since)
        replayed = [await watcher.next(1) for _ in range(revision - since)]
        assert [e.revision for e in replayed if e] == list(range(since + 1, revision + 1))
        assert [e.object["metadata"]["labels"]["n"] for e in replayed if e] == [
            str(i) for i in range(100 - (revision - since), 100)]
        assert all(e.prev is not None and e.prev["metadata"]["resourceVersion"] == str(
            e.revision - 1) for e in replayed if e)
        watcher.close()
    finally:
        await stop(task)


async def test_live_events_share_the_cached_objects(backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend)
    try:
        watcher = cache.watch(PREFIX, cache.revision)
        kv = await backend.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
        added = await watcher.next(1)
        assert added is not None
        assert added.object is cache.get(PREFIX + "ns/a")
        await backend.update(PREFIX + "ns/a", b'{"metadata":{"name":"a"},"data":{}}',
                             kv.mod_revision)
        modified = await watcher.next(1)
        assert modified is not None
        assert modified.object is cache.get(PREFIX + "ns/a")
        assert modified.prev is added.object  # one copy: the object that was current
        watcher.close()
    finally:
        await stop(task)


async def test_a_stalled_watcher_is_ended_when_its_events_leave_the_history(
        backend: MemoryBackend) -> None:
    cache, task = await run_cache(backend, max_bytes=300_000)
    try:
        stalled = cache.watch(PREFIX, cache.revision)
        reading = cache.watch(PREFIX, cache.revision)
        kv = await backend.create(PREFIX + "ns/big", big(0))
        await cache.wait_fresh()
        first = await stalled.next(1)  # it reads one event, then stops reading
        assert first is not None
        assert await reading.next(1) is not None
        revision = kv.mod_revision
        for i in range(1, 10):
            revision = (await backend.update(PREFIX + "ns/big", big(i), revision)).mod_revision
            await cache.wait_fresh()
            event = await reading.next(1)  # a watcher that keeps up is not affected
            assert event is not None
            assert event.revision == revision
        assert stalled.lagged
        assert stalled.idle()  # what it had pending was dropped with it
        assert await stalled.next(1) is None
        assert not reading.lagged
        # its client watches again from the last revision it saw: gone, so 410 and relist
        with pytest.raises(errors.Expired):
            cache.watch(PREFIX, first.revision)
        assert cache.watcher_count() == 1
        reading.close()
    finally:
        await stop(task)


async def test_resource_size_follows_writes(backend: MemoryBackend) -> None:
    a = b'{"metadata":{"name":"a"}}'
    await backend.create(PREFIX + "ns/a", a)
    cache, task = await run_cache(backend)
    try:
        assert cache.resource_size(PREFIX) == (1, len(a))
        b = b'{"metadata":{"name":"b"},"data":{"k":"v"}}'
        kv = await backend.create(PREFIX + "other/b", b)
        await cache.wait_fresh()
        assert cache.resource_size(PREFIX) == (2, len(a) + len(b))
        assert cache.resource_size(PREFIX + "other/") == (2, len(a) + len(b))  # the resource's
        await backend.update(PREFIX + "other/b", a, kv.mod_revision)
        await backend.delete(PREFIX + "ns/a")
        await cache.wait_fresh()
        assert cache.resource_size(PREFIX) == (1, len(a))
        assert cache.resource_size("/registry/core/secrets/") == (0, 0)
    finally:
        await stop(task)


async def test_a_wait_ends_at_its_deadline_whatever_deadlines_came_before(
        backend: MemoryBackend) -> None:
    """A watcher keeps one alarm for its waits: a wait with a later deadline than the armed
    one waits on past it, a wait with an earlier one is woken in time, and an event ends
    a wait at once."""
    cache, task = await run_cache(backend)
    try:
        watcher = cache.watch(PREFIX, cache.revision)
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):  # arms the alarm at +0.05 s
            await watcher.next_until(loop.time() + 0.05)
        start = loop.time()
        with pytest.raises(TimeoutError):  # an earlier alarm went off: it waits on
            await watcher.next_until(start + 0.15)
        assert loop.time() >= start + 0.15
        pending = asyncio.ensure_future(watcher.next_until(loop.time() + 3600))
        await asyncio.sleep(0)  # the alarm is set an hour ahead
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        async with asyncio.timeout(5):  # brought forward: the wait ends in time
            with pytest.raises(TimeoutError):
                await watcher.next_until(loop.time() + 0.05)
        kv = await backend.create(PREFIX + "ns/a", b'{"metadata":{"name":"a"}}')
        event = await watcher.next_until(loop.time() + 3600)
        assert event is not None
        assert event.revision == kv.mod_revision
        watcher.close()
        assert await watcher.next_until(loop.time() + 3600) is None
    finally:
        await stop(task)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(accept=st.lists(st.booleans(), min_size=1, max_size=8),
       pauses=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=8),
       bursts=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=8))
async def test_a_sink_and_the_reader_see_every_event_once_in_order(
        accept: list[bool], pauses: list[int], bursts: list[int]) -> None:
    """Events a sink takes from the fan-out and events the reader takes, together, are every
    event once in revision order, whatever the sink declines and however slowly the reader
    goes back to waiting."""
    backend = MemoryBackend()
    await backend.start()
    cache, task = await run_cache(backend)
    sent: list[int] = []
    asked = 0

    def sink(entry: hist.Entry) -> bool:
        nonlocal asked
        taken = accept[asked % len(accept)]
        asked += 1
        if taken:
            sent.append(entry.revision)
        return taken

    async def read() -> None:
        n = 0
        while (event := await watcher.next()) is not None:
            for _ in range(pauses[n % len(pauses)]):  # converting, draining the last write
                await asyncio.sleep(0)
            sent.append(event.revision)
            n += 1

    try:
        watcher = cache.watch(PREFIX, cache.revision)
        watcher.set_sink(sink)
        reader = asyncio.create_task(read())
        revisions: list[int] = []
        for b, size in enumerate(bursts):
            for i in range(size):
                kv = await backend.create(f"{PREFIX}ns/o{b}-{i}", b'{"metadata":{}}')
                revisions.append(kv.mod_revision)
            await asyncio.sleep(0)
        await cache.wait_fresh()
        async with asyncio.timeout(5):
            while len(sent) < len(revisions):  # noqa: ASYNC110 - the reader runs meanwhile
                await asyncio.sleep(0)
        watcher.close()
        await reader
        assert sent == revisions
        if any(accept):
            assert asked > 0  # the sink was offered events while the reader waited
    finally:
        await stop(task)
        await backend.close()


async def test_a_sink_is_not_asked_while_the_reader_holds_an_event(backend: MemoryBackend
                                                                    ) -> None:
    """The reader took an event and has not come back for the next: the next goes to the
    reader's queue, not to the sink, so it cannot overtake the one in hand."""
    cache, task = await run_cache(backend)
    try:
        watcher = cache.watch(PREFIX, cache.revision)
        offered: list[int] = []
        watcher.set_sink(lambda entry: offered.append(entry.revision) is None)
        waiting = asyncio.create_task(watcher.next())
        await asyncio.sleep(0)
        first = await backend.create(PREFIX + "ns/a", b'{"metadata":{}}')
        await cache.wait_fresh()
        assert offered == [first.mod_revision]  # parked and caught up: the sink took it
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        second = await backend.create(PREFIX + "ns/b", b'{"metadata":{}}')
        await cache.wait_fresh()
        assert offered == [first.mod_revision]  # nobody parked: queued for the reader
        got = await watcher.next(1)
        assert got is not None
        assert got.revision == second.mod_revision
        watcher.close()
        third = await backend.create(PREFIX + "ns/c", b'{"metadata":{}}')
        await cache.wait_fresh()
        assert third.mod_revision not in offered  # a closed watcher's sink is dropped
    finally:
        await stop(task)
