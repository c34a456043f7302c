"""The watch fan-out on its own, over a list standing in for a backend's history."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from setpoint.storage import Event, EventType, Expired, KeyValue, WatchLagged
from setpoint.storage.fanout import Fanout


def put(revision: int, key: str = "/k") -> Event:
    return Event(EventType.PUT, KeyValue(key, b"v", revision, revision), None)


class History:
    """A log with a compacted revision; records every read it serves."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.compacted = 0
        self.reads: list[tuple[str, int, int, int]] = []

    async def read(self, prefix: str, start: int, end: int, limit: int) -> Sequence[Event]:
        self.reads.append((prefix, start, end, limit))
        if start <= self.compacted:
            raise Expired(start, self.compacted)
        matching = [e for e in self.events
                    if start <= e.revision <= end and e.kv.key.startswith(prefix)]
        return matching[:limit]

    def commit(self, fanout: Fanout, *events: Event) -> None:
        self.events.extend(events)
        fanout.publish(events)


async def steps() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_replay_reads_pages_up_to_the_published_revision() -> None:
    history = History()
    fanout = Fanout(revision=0, buffer=10, page_size=3)
    history.commit(fanout, *(put(r) for r in range(1, 8)))

    stream = fanout.watch(history.read, "/", 2)
    events = [await anext(stream) for _ in range(6)]

    assert [e.revision for e in events] == [2, 3, 4, 5, 6, 7]
    assert history.reads == [("/", 2, 7, 3), ("/", 5, 7, 3)]
    assert fanout.watchers == 0  # still replaying: not subscribed yet


async def test_stream_subscribes_once_caught_up_and_gets_live_events() -> None:
    history = History()
    fanout = Fanout(revision=0)
    history.commit(fanout, put(1))
    stream = fanout.watch(history.read, "/", 1)
    assert (await anext(stream)).revision == 1

    pending = asyncio.ensure_future(anext(stream))
    await steps()
    assert fanout.watchers == 1
    history.commit(fanout, put(2))

    assert (await pending).revision == 2
    assert len(history.reads) == 1


async def test_events_published_during_a_replay_read_are_not_lost() -> None:
    history = History()
    fanout = Fanout(revision=0, page_size=100)
    history.commit(fanout, put(1), put(2))
    gate = asyncio.Event()

    async def slow_read(prefix: str, start: int, end: int, limit: int) -> Sequence[Event]:
        await gate.wait()
        return await history.read(prefix, start, end, limit)

    stream = fanout.watch(slow_read, "/", 1)
    first = asyncio.ensure_future(anext(stream))
    await steps()
    history.commit(fanout, put(3))  # lands while the replay of [1, 2] is in flight
    gate.set()

    events = [await first, await anext(stream), await anext(stream)]
    assert [e.revision for e in events] == [1, 2, 3]


async def test_live_events_below_the_start_are_skipped() -> None:
    fanout = Fanout(revision=0)
    history = History()
    stream = fanout.watch(history.read, "/", 3)
    pending = asyncio.ensure_future(anext(stream))
    await steps()

    history.commit(fanout, put(1), put(2), put(3))

    assert (await pending).revision == 3


async def test_prefix_filters_live_and_replayed_events() -> None:
    history = History()
    fanout = Fanout(revision=0)
    history.commit(fanout, put(1, "/a/x"), put(2, "/b/x"))
    stream = fanout.watch(history.read, "/a/", 1)

    assert (await anext(stream)).kv.key == "/a/x"
    pending = asyncio.ensure_future(anext(stream))
    await steps()
    history.commit(fanout, put(3, "/b/y"), put(4, "/a/y"))
    assert (await pending).revision == 4


async def test_overflow_drops_the_buffer_and_raises_watch_lagged() -> None:
    history = History()
    fanout = Fanout(revision=0, buffer=3)
    stream = fanout.watch(history.read, "/", 1)
    pending = asyncio.ensure_future(anext(stream))
    await steps()
    history.commit(fanout, put(1))
    assert (await pending).revision == 1

    history.commit(fanout, put(2), put(3))
    history.commit(fanout, put(4), put(5))  # 4 pending > 3

    assert fanout.watchers == 0
    with pytest.raises(WatchLagged) as caught:
        await anext(stream)
    assert caught.value.last_revision == 1
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_expired_start_raises_before_any_event() -> None:
    history = History()
    fanout = Fanout(revision=0)
    history.commit(fanout, put(1), put(2), put(3))
    history.compacted = 2

    with pytest.raises(Expired):
        await anext(fanout.watch(history.read, "/", 2))
    assert (await anext(fanout.watch(history.read, "/", 3))).revision == 3


async def test_close_ends_waiting_and_replaying_streams() -> None:
    history = History()
    fanout = Fanout(revision=0)
    history.commit(fanout, put(1))
    live = fanout.watch(history.read, "/", 2)
    waiting = asyncio.ensure_future(anext(live))
    replaying = fanout.watch(history.read, "/", 1)
    await steps()

    fanout.close()

    with pytest.raises(StopAsyncIteration):
        await waiting
    with pytest.raises(StopAsyncIteration):
        await anext(replaying)
    fanout.close()


def test_publish_rejects_out_of_order_events() -> None:
    fanout = Fanout(revision=5)
    with pytest.raises(ValueError, match="published after"):
        fanout.publish([put(5)])
    with pytest.raises(ValueError, match="published after"):
        fanout.publish([put(7), put(6)])


@pytest.mark.parametrize("options", [{"buffer": 0}, {"page_size": 0}])
def test_sizes_must_be_positive(options: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="positive"):
        Fanout(revision=0, **options)
