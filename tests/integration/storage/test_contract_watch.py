"""Contract: watch replays the kept log from a revision, then goes live; bounded; closable."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.storage import Backend, Event, EventType, KeyValue, Unavailable, WatchLagged
from tests.integration.storage.storage_testkit import Opener, brief, drain, let_tasks_run, take


async def _writes(backend: Backend) -> None:
    a = await backend.create("/a/1", b"a1")           # 1
    await backend.create("/b/1", b"b1")               # 2
    await backend.update("/a/1", b"a2", a.mod_revision)  # 3
    await backend.create("/a/2", b"x")                # 4
    await backend.delete("/a/1")                      # 5
    await backend.delete("/b/1", 2)                   # 6


async def test_watch_from_a_revision_replays_exactly_the_suffix_then_goes_live(
        backend: Backend) -> None:
    await _writes(backend)
    stream = backend.watch("/a/", 3)

    replayed = await take(stream, 3)
    await backend.create("/b/2", b"other prefix")      # 7
    await backend.create("/a/3", b"live")              # 8
    live = await take(stream, 1)

    assert brief(replayed) == [
        ("PUT", "/a/1", b"a2", 3),
        ("PUT", "/a/2", b"x", 4),
        ("DELETE", "/a/1", b"a2", 5),
    ]
    assert brief(live) == [("PUT", "/a/3", b"live", 8)]


@pytest.mark.parametrize("start", [0, 1])
async def test_watch_from_the_beginning_replays_everything(backend: Backend,
                                                           start: int) -> None:
    await _writes(backend)

    events = await take(backend.watch("", start), 6)

    assert [e.revision for e in events] == [1, 2, 3, 4, 5, 6]
    assert brief(events)[1] == ("PUT", "/b/1", b"b1", 2)


async def test_events_carry_previous_values(backend: Backend) -> None:
    await _writes(backend)

    create, update, _, delete = await take(backend.watch("/a/", 1), 4)

    assert create == Event(EventType.PUT, KeyValue("/a/1", b"a1", 1, 1), None)
    assert create.is_create
    assert update == Event(EventType.PUT, KeyValue("/a/1", b"a2", 1, 3),
                           KeyValue("/a/1", b"a1", 1, 1))
    assert not update.is_create
    assert delete == Event(EventType.DELETE, KeyValue("/a/1", b"a2", 1, 5),
                           KeyValue("/a/1", b"a2", 1, 3))


async def test_watch_from_the_next_revision_sees_only_new_events(backend: Backend) -> None:
    await _writes(backend)
    stream = backend.watch("/", await backend.current_revision() + 1)

    pending = asyncio.ensure_future(take(stream, 2))
    await let_tasks_run()
    await backend.create("/a/9", b"1")
    await backend.update("/a/9", b"2", 7)

    assert brief(await pending) == [("PUT", "/a/9", b"1", 7), ("PUT", "/a/9", b"2", 8)]


async def test_watch_from_a_future_revision_waits_for_it(backend: Backend) -> None:
    stream = backend.watch("/", 3)

    pending = asyncio.ensure_future(take(stream, 2))
    await let_tasks_run()
    for i in range(4):
        await backend.create(f"/k/{i}", b"x")

    assert [e.revision for e in await pending] == [3, 4]


async def test_stream_does_not_start_before_its_first_step(backend: Backend) -> None:
    stream = backend.watch("/", 1)
    for i in range(5):
        await backend.create(f"/k/{i}", b"x")

    assert [e.revision for e in await take(stream, 5)] == [1, 2, 3, 4, 5]


async def test_many_events_are_replayed_in_order_across_pages(open_backend: Opener) -> None:
    backend = await open_backend(watch_buffer=7)  # replay pages hold at most 7 events
    for i in range(40):
        await backend.create(f"/k/{i:02d}", b"x")
        await backend.create(f"/other/{i:02d}", b"x")
    stream = backend.watch("/k/", 1)

    events = await take(stream, 40)
    await backend.create("/k/live", b"x")

    assert [e.kv.key for e in events] == [f"/k/{i:02d}" for i in range(40)]
    assert [e.revision for e in events] == list(range(1, 81, 2))
    assert brief(await take(stream, 1)) == [("PUT", "/k/live", b"x", 81)]


async def test_each_event_is_delivered_once_while_writes_race_the_replay(
        backend: Backend) -> None:
    for i in range(50):
        await backend.create(f"/k/{i}", b"x")
    stream = backend.watch("/", 1)

    async def writer() -> None:
        for i in range(50, 100):
            await backend.create(f"/k/{i}", b"x")

    writing = asyncio.ensure_future(writer())
    events = await take(stream, 100)
    await writing

    assert [e.revision for e in events] == list(range(1, 101))


async def test_watcher_that_stops_reading_is_ended_with_watch_lagged(
        open_backend: Opener) -> None:
    backend = await open_backend(watch_buffer=8)
    stream = backend.watch("/", 1)
    pending = asyncio.ensure_future(anext(stream))
    await let_tasks_run()  # the stream is live and waiting

    await backend.create("/k/0", b"x")
    first = await pending
    for i in range(1, 30):
        await backend.create(f"/k/{i}", b"x")
    with pytest.raises(WatchLagged) as caught:
        await take(stream, 30)

    assert first.revision == 1
    assert caught.value.last_revision == 1
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    resumed = await take(backend.watch("/", caught.value.last_revision + 1), 29)
    assert [e.revision for e in resumed] == list(range(2, 31))


async def test_lagged_watcher_leaves_other_watchers_alone(open_backend: Opener) -> None:
    backend = await open_backend(watch_buffer=4)
    slow = backend.watch("/", 1)
    fast = backend.watch("/", 1)
    slow_pending = asyncio.ensure_future(anext(slow))
    fast_events = asyncio.ensure_future(take(fast, 10))
    await let_tasks_run()

    await backend.create("/k/0", b"x")
    # The slow watcher is live once it has seen a write (a remote backend registers a
    # watch only some time after its first step).
    assert (await slow_pending).revision == 1
    for i in range(1, 10):
        await backend.create(f"/k/{i}", b"x")
        await let_tasks_run()

    assert [e.revision for e in await fast_events] == list(range(1, 11))
    with pytest.raises(WatchLagged):
        await take(slow, 10)


async def test_close_ends_every_watch(backend: Backend) -> None:
    await backend.create("/a/1", b"x")
    live = backend.watch("/a/", 1)
    assert len(await take(live, 1)) == 1
    draining = asyncio.ensure_future(drain(live))
    unstarted = backend.watch("/", 1)
    await let_tasks_run()

    await backend.close()

    assert await draining == []
    assert await drain(unstarted) == []
    with pytest.raises(Unavailable):
        backend.watch("/", 1)


async def test_aclose_stops_one_stream(backend: Backend) -> None:
    stream = backend.watch("/", 1)
    await backend.create("/a", b"x")
    await take(stream, 1)

    await stream.aclose()  # type: ignore[attr-defined]

    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_cancelled_step_loses_no_event(backend: Backend) -> None:
    stream = backend.watch("/", 1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await anext(stream)

    await backend.create("/a", b"x")

    assert [e.revision for e in await take(stream, 1)] == [1]
