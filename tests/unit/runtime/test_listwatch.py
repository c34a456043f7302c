"""The watcher's driver against a scripted API, on a fake clock.

Like kube-rs's mock tests: each scenario scripts the list answers and watch streams (events,
errors, silences, ends) and checks the events, the calls made, and when they were made.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from setpoint.apimachinery import errors
from setpoint.runtime import clock as rtclock
from setpoint.runtime import informercache as c
from setpoint.runtime import listwatch as lw
from setpoint.runtime import watcher as w
from setpoint.runtime.clock import FakeAsyncClock

pytestmark = pytest.mark.usefixtures("no_leaked_tasks", "stream_kind")


@pytest.fixture(params=["async", "buffered"])
def stream_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every scenario twice: streams read only by awaiting, and streams that hand out what
    they already hold without awaiting (as the client's watch does)."""
    monkeypatch.setattr(Scripted, "buffered", request.param == "buffered")
    return str(request.param)


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": rv}}


def page(*items: dict[str, Any], rv: str = "10", cont: str | None = None) -> dict[str, Any]:
    metadata = {"resourceVersion": rv} | ({"continue": cont} if cont else {})
    return {"kind": "ConfigMapList", "metadata": metadata, "items": list(items)}


def ev(kind: str, o: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": o}


def bookmark(rv: str) -> dict[str, Any]:
    return ev("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": rv}})


EXPIRED = ev("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                       "message": "too old resource version"})


class Silent:
    """The stream sends nothing more (until it is closed)."""


@dataclass
class Pause:
    """The stream sends nothing for this many seconds of clock time."""

    seconds: float


SILENT = Silent()
StreamItem = dict[str, Any] | Exception | Silent | Pause


class BufferedStream:
    """A scripted stream that, like the client's, hands out what is at the head of its script
    without awaiting (:meth:`next_nowait`: an event, or the exception it raises); a silence
    or a pause needs a read."""

    def __init__(self, api: Scripted, script: builtins.list[StreamItem]) -> None:
        self.api = api
        self.script = builtins.list(script)
        self.taken_nowait = 0
        self.closed = False

    def __aiter__(self) -> BufferedStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while self.script:
            item = self.script.pop(0)
            if isinstance(item, Silent):
                await asyncio.Event().wait()
            elif isinstance(item, Pause):
                await rtclock.sleep(self.api.clock, item.seconds)
            elif isinstance(item, Exception):
                raise item
            else:
                return item
        raise StopAsyncIteration

    def next_nowait(self) -> dict[str, Any] | None:
        if not self.script or isinstance(self.script[0], Silent | Pause):
            return None
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        self.taken_nowait += 1
        return item

    async def aclose(self) -> None:
        if not self.closed:
            self.closed = True
            self.api.closed += 1


@dataclass
class Scripted:
    """A ListWatcher answering from scripts, recording (call, resourceVersion, token, time).

    With ``buffered`` (every scenario runs both ways), its streams are
    :class:`BufferedStream` s, as the client's are."""

    buffered: ClassVar[bool] = False

    clock: FakeAsyncClock
    lists: list[dict[str, Any] | Exception]
    watches: list[list[StreamItem]]
    calls: list[tuple[str, str, str | None, float]] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)
    timeouts: list[int] = field(default_factory=list)
    closed: int = 0
    streams: builtins.list[BufferedStream] = field(default_factory=builtins.list)

    async def list(self, *, resource_version: str, limit: int,
                   continue_token: str | None) -> dict[str, Any]:
        self.calls.append(("list", resource_version, continue_token, self.clock.monotonic()))
        self.limits.append(limit)
        if not self.lists:
            await asyncio.Event().wait()
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def watch(self, *, resource_version: str,
              timeout_seconds: int) -> AsyncIterator[dict[str, Any]]:
        self.calls.append(("watch", resource_version, None, self.clock.monotonic()))
        self.timeouts.append(timeout_seconds)
        script = self.watches.pop(0) if self.watches else [SILENT]
        if self.buffered:
            stream = BufferedStream(self, script)
            self.streams.append(stream)
            return stream
        return self._stream(script)

    async def _stream(self, script: builtins.list[StreamItem]) -> AsyncIterator[dict[str, Any]]:
        try:
            for item in script:
                if isinstance(item, Silent):
                    await asyncio.Event().wait()
                elif isinstance(item, Pause):
                    await rtclock.sleep(self.clock, item.seconds)
                elif isinstance(item, Exception):
                    raise item
                else:
                    yield item
        finally:
            self.closed += 1

    def call_list(self) -> builtins.list[tuple[str, str, str | None]]:
        return [call[:3] for call in self.calls]

    def times(self) -> builtins.list[float]:
        return [call[3] for call in self.calls]


class LowRandom(random.Random):
    """No jitter: every backoff is its base delay, every watch timeout its minimum."""

    def random(self) -> float:
        return 0.0


async def take(clock: FakeAsyncClock, events: AsyncIterator[w.WatcherEvent],
               n: int) -> list[w.WatcherEvent]:
    return [await clock.drive(anext(events)) for _ in range(n)]


def watch_events(api: Scripted, clock: FakeAsyncClock, **config: Any
                 ) -> contextlib.aclosing[AsyncGenerator[w.WatcherEvent, None]]:
    gen = lw.run_watcher(api, clock=clock, config=lw.WatcherConfig(**config), rng=LowRandom())
    return contextlib.aclosing(gen)


# --- scenarios ---------------------------------------------------------------------------


async def test_paginated_list_then_watch(clock: FakeAsyncClock) -> None:
    a, b, d = obj("a", "3"), obj("b", "4"), obj("d", "11")
    api = Scripted(clock, lists=[page(a, cont="t1"), page(b, rv="10")],
                   watches=[[ev("ADDED", d), ev("DELETED", a)]])
    async with watch_events(api, clock, page_size=1) as events:
        got = await take(clock, events, 6)
    assert got == [w.Init(), w.InitApply(a), w.InitApply(b), w.InitDone(), w.Apply(d),
                   w.Delete(a)]
    assert api.call_list() == [("list", "0", None), ("list", "", "t1"), ("watch", "10", None)]
    assert api.limits == [1, 1]
    assert api.timeouts == [300]  # the minimum, with no jitter
    assert clock.monotonic() == 0  # nothing waited
    assert api.closed == 1
    if api.buffered:  # both events were taken as they were, with no read task
        assert [stream.taken_nowait for stream in api.streams] == [2]


async def test_consistent_first_list(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page()], watches=[])
    async with watch_events(api, clock, initial_list="consistent") as events:
        await take(clock, events, 2)
    assert api.call_list()[0] == ("list", "", None)


async def test_410_mid_stream_relists_and_the_cache_replaces_atomically(
        clock: FakeAsyncClock) -> None:
    a, b, d, b2 = obj("a", "3"), obj("b", "4"), obj("d", "11"), obj("b", "25")
    api = Scripted(clock, lists=[page(a, b, rv="10"), page(b2, rv="30")],
                   watches=[[ev("ADDED", d), EXPIRED], [ev("ADDED", obj("e", "31"))]])
    cache = c.Cache()
    deleted: list[str] = []
    cache.subscribe(c.Handlers(delete=lambda o: deleted.append(o["metadata"]["name"])))
    async with watch_events(api, clock) as events:
        for event in await take(clock, events, 5):  # the list and the first event
            cache.apply(event)
        assert cache.keys() == ["default/a", "default/b", "default/d"]
        cache.apply(await clock.drive(anext(events)))  # Init of the relist
        cache.apply(await clock.drive(anext(events)))  # InitApply(b2)
        assert cache.keys() == ["default/a", "default/b", "default/d"]  # not yet replaced
        assert deleted == []
        done = await clock.drive(anext(events))
        assert done == w.InitDone()
        cache.apply(done)
        assert cache.keys() == ["default/b"]
        assert await clock.drive(anext(events)) == w.Apply(obj("e", "31"))
    assert cache.get("default/b") is b2
    assert sorted(deleted) == ["a", "d"]
    # the relist is a consistent read, after a backoff, and the watch resumes from it
    assert api.call_list() == [("list", "0", None), ("watch", "10", None), ("list", "", None),
                               ("watch", "30", None)]
    assert api.times()[2] == pytest.approx(0.8)


async def test_a_raised_expired_relists_too(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10"), page(rv="20")],
                   watches=[[errors.Expired("too old resource version")]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 4)
    assert got == [w.Init(), w.InitDone(), w.Init(), w.InitDone()]
    assert api.call_list()[2] == ("list", "", None)


async def test_bookmarks_move_the_resume_point(clock: FakeAsyncClock) -> None:
    d = obj("d", "11")
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[ev("ADDED", d), bookmark("50")], [ev("MODIFIED", obj("d", "51"))]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 4)
    assert got[2:] == [w.Apply(d), w.Apply(obj("d", "51"))]  # bookmarks are not events
    # the first stream ended after delivering: re-watch at once, from the bookmark
    assert api.call_list()[1:] == [("watch", "10", None), ("watch", "50", None)]
    assert api.times() == [0, 0, 0]


async def test_a_dropped_stream_rewatches_with_growing_backoff(clock: FakeAsyncClock) -> None:
    lost = errors.ServiceUnavailable("connection lost")
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[ev("ADDED", obj("d", "11")), lost], [lost], [lost],
                            [ev("ADDED", obj("e", "12"))]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 4)
    assert got[2:] == [w.Apply(obj("d", "11")), w.Apply(obj("e", "12"))]
    assert api.call_list()[1:] == [("watch", "10", None)] + [("watch", "11", None)] * 3
    assert api.times()[1:] == pytest.approx([0, 0.8, 0.8 + 1.6, 0.8 + 1.6 + 3.2])
    assert api.closed == 4  # every stream was closed


async def test_backoff_jitter_stays_within_twice_the_base(clock: FakeAsyncClock) -> None:
    lost = errors.ServiceUnavailable("connection lost")
    api = Scripted(clock, lists=[page(rv="10")], watches=[[lost]] * 8)
    gen = lw.run_watcher(api, clock=clock, rng=random.Random(3))
    async with contextlib.aclosing(gen) as events:
        await take(clock, events, 2)
        with contextlib.suppress(RuntimeError):  # nothing more is ever yielded
            await clock.drive(anext(events), max_seconds=200)
    gaps = [t1 - t0 for t0, t1 in zip(api.times()[1:], api.times()[2:], strict=False)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30]
    assert len(gaps) >= 7
    for gap, base in zip(gaps, bases, strict=False):
        assert base <= gap < 2 * base
    assert all(300 <= t < 600 for t in api.timeouts)


async def test_a_silent_stream_hits_the_inactivity_timeout(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[ev("ADDED", obj("d", "11")), SILENT],
                            [ev("ADDED", obj("e", "12"))]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 4)
    assert got[3] == w.Apply(obj("e", "12"))
    # 70 s after the last event the stream is dead: re-watch at once from its last rv
    assert api.call_list()[1:] == [("watch", "10", None), ("watch", "11", None)]
    assert api.times()[1:] == [0, 70]
    assert api.closed == 2


async def test_a_stream_silent_from_the_start_backs_off(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[SILENT], [ev("ADDED", obj("e", "12"))]])
    async with watch_events(api, clock, inactivity_timeout=5) as events:
        await take(clock, events, 3)
    assert api.times()[1:] == pytest.approx([0, 5 + 0.8])


async def test_the_inactivity_timer_restarts_with_each_event(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[Pause(60), bookmark("20"), Pause(60), bookmark("30"), Pause(60),
                             ev("ADDED", obj("e", "31"))]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 3)
    assert got[2] == w.Apply(obj("e", "31"))
    assert clock.monotonic() == 180
    assert len(api.calls) == 2  # one list, one watch: never timed out


async def test_a_busy_stream_arms_no_timer_per_event(clock: FakeAsyncClock,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The silence and resync deadlines share one lazy timer per stream: events a second
    apart move the deadline on without a timer each, and silence is still caught."""
    armed: list[float] = []
    call_at = clock.call_at

    def counting(when: float, callback: Any) -> Any:
        armed.append(when)
        return call_at(when, callback)

    monkeypatch.setattr(clock, "call_at", counting)
    script: list[StreamItem] = []
    for i in range(30):
        script += [Pause(1), ev("ADDED", obj(f"o{i}", str(11 + i)))]
    api = Scripted(clock, lists=[page(rv="10")], watches=[[*script, SILENT],
                                                          [ev("ADDED", obj("z", "99"))]])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 33)
    assert got[-1] == w.Apply(obj("z", "99"))
    # the silence after the 30 events was noticed 70 s after the last one
    assert api.times()[1:] == [0, 30 + 70]
    # the scripted pauses arm one timer each; the watcher's waits only a few in all
    # (each event would have armed one before)
    assert len(armed) - 30 <= 5


async def test_a_slow_consumer_does_not_look_like_a_dead_stream(
        clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")],
                   watches=[[ev("ADDED", obj("a", "11")), Pause(10),
                             ev("ADDED", obj("b", "12"))]])
    async with watch_events(api, clock) as events:
        await take(clock, events, 3)
        clock.advance(100)  # the consumer takes longer than the inactivity timeout
        assert await clock.drive(anext(events)) == w.Apply(obj("b", "12"))
    assert len(api.calls) == 2  # one list, one watch: no reconnect


async def test_resync_replays_without_touching_the_stream(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(obj("a", "5"), rv="10")],
                   watches=[[Pause(20), bookmark("20"), Pause(20), bookmark("21"), Pause(25),
                             ev("ADDED", obj("e", "22"))]])
    cache = c.Cache()
    updates: list[tuple[str, float]] = []
    cache.subscribe(c.Handlers(
        update=lambda old, new: updates.append((new["metadata"]["name"], clock.monotonic()))))
    async with watch_events(api, clock, resync_period=30) as events:
        got = await take(clock, events, 6)
        for event in got:
            cache.apply(event)
    assert got[3:] == [w.Resync(), w.Resync(), w.Apply(obj("e", "22"))]
    assert [name for name, _ in updates] == ["a", "a"]
    assert len(api.calls) == 2  # the stream survived both resyncs
    assert clock.monotonic() == 65


async def test_a_failed_list_is_retried(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[errors.ServiceUnavailable("down"),
                                 errors.TooManyRequests("slow down", retry_after=10),
                                 page(rv="10")], watches=[])
    async with watch_events(api, clock) as events:
        assert await take(clock, events, 2) == [w.Init(), w.InitDone()]
    assert api.call_list() == [("list", "0", None)] * 3
    # the backoff (0.8 s), then the server's Retry-After (10 s > 1.6 s)
    assert api.times() == pytest.approx([0, 0.8, 10.8])


async def test_an_expired_continue_token_restarts_the_list(clock: FakeAsyncClock) -> None:
    a, b = obj("a", "3"), obj("b", "4")
    api = Scripted(clock, lists=[page(a, cont="t1"), errors.Expired("continue expired"),
                                 page(a, cont="t2"), page(b, rv="20")], watches=[])
    async with watch_events(api, clock) as events:
        got = await take(clock, events, 6)
    assert got == [w.Init(), w.InitApply(a), w.Init(), w.InitApply(a), w.InitApply(b),
                   w.InitDone()]
    assert api.call_list() == [("list", "0", None), ("list", "", "t1"), ("list", "", None),
                               ("list", "", "t2")]


async def test_closing_the_watcher_closes_the_stream(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")], watches=[[ev("ADDED", obj("a", "11")), SILENT]])
    gen = lw.run_watcher(api, clock=clock)
    await take(clock, gen, 3)  # suspended after the event, the stream open
    assert api.closed == 0
    await gen.aclose()
    assert api.closed == 1
    assert clock.pending_timers == 0


async def test_cancelling_the_consumer_closes_the_stream(clock: FakeAsyncClock) -> None:
    api = Scripted(clock, lists=[page(rv="10")], watches=[[SILENT]])

    async def consume() -> None:
        async with contextlib.aclosing(lw.run_watcher(api, clock=clock)) as events:
            async for _ in events:
                pass

    task = asyncio.ensure_future(consume())
    await clock.settle()  # listed, watching, the read of the silent stream pending
    assert [call[0] for call in api.calls] == ["list", "watch"]
    assert api.closed == 0
    task.cancel()
    await asyncio.wait({task})
    assert api.closed == 1


# --- backoff and configuration -----------------------------------------------------------


def test_reconnect_backoff_grows_caps_and_resets(clock: FakeAsyncClock) -> None:
    backoff = lw.ReconnectBackoff(lw.BackoffConfig(), clock, LowRandom())
    delays = []
    for _ in range(8):
        delays.append(backoff.next_delay())
        clock.advance(delays[-1])
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30])
    clock.advance(89)  # 119 s after the last failure
    assert backoff.next_delay() == 30
    clock.advance(121)  # failures over 2 minutes apart: start over
    assert backoff.next_delay() == pytest.approx(0.8)


def test_reconnect_backoff_jitter_doubles_at_most(clock: FakeAsyncClock) -> None:
    class HighRandom(random.Random):
        def random(self) -> float:
            return 0.999

    backoff = lw.ReconnectBackoff(lw.BackoffConfig(), clock, HighRandom())
    assert backoff.next_delay() == pytest.approx(0.8 * 1.999)


@pytest.mark.parametrize("kwargs", [
    {"page_size": 0}, {"watch_timeout": 0.5}, {"inactivity_timeout": 0},
    {"resync_period": 0},
])
def test_watcher_config_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        lw.WatcherConfig(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"initial": 0}, {"initial": 10, "cap": 5}, {"factor": 0.5}, {"jitter": -1},
    {"reset_after": 0},
])
def test_backoff_config_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="backoff needs"):
        lw.BackoffConfig(**kwargs)
