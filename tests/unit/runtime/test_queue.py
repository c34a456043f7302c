"""The work queue on a fake clock: dedup, stinginess, fairness, delays, retries, shutdown."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

import pytest

from setpoint.runtime import clock as rtclock
from setpoint.runtime import ratelimit
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.queue import ShutDown, WorkQueue

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


@dataclass
class RecordingMetrics:
    adds: int = 0
    depths: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    retries: int = 0

    def on_add(self) -> None:
        self.adds += 1

    def on_depth(self, depth: int) -> None:
        self.depths.append(depth)

    def on_queue_latency(self, seconds: float) -> None:
        self.latencies.append(seconds)

    def on_work_duration(self, seconds: float) -> None:
        self.durations.append(seconds)

    def on_retry(self) -> None:
        self.retries += 1


def new_queue(clock: FakeAsyncClock, **kwargs: object) -> WorkQueue[str]:
    return WorkQueue(clock=clock, **kwargs)  # type: ignore[arg-type]


async def get_now(q: WorkQueue[str]) -> str:
    """A key that must already be ready (fails instead of blocking)."""
    assert len(q) > 0, "nothing is ready"
    return await q.get()


async def drain_ready(q: WorkQueue[str]) -> list[str]:
    keys = []
    while len(q):
        key = await q.get()
        q.done(key)
        keys.append(key)
    return keys


# --- dedup, stinginess, fairness ---------------------------------------------------------


async def test_adding_a_waiting_key_is_a_no_op(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    for key in ["a", "b", "a", "c", "b", "a"]:
        q.add(key)
    assert len(q) == 3
    assert await drain_ready(q) == ["a", "b", "c"]


async def test_a_key_is_never_handed_to_two_workers(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    assert await get_now(q) == "a"
    q.add("a")
    assert len(q) == 0  # dirty, but held: not ready
    second = asyncio.ensure_future(q.get())
    await clock.settle()
    assert not second.done()
    q.done("a")
    await clock.settle()
    assert second.result() == "a"
    q.done("a")


async def test_a_key_added_while_held_is_processed_once_more(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    key = await get_now(q)
    q.add("a")
    q.add("a")
    q.add("a")
    q.add("b")
    q.done(key)
    assert await drain_ready(q) == ["b", "a"]  # "a" re-queued behind "b", once
    assert len(q) == 0
    assert q.processing == 0


async def test_done_of_a_key_not_held_is_an_error(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    with pytest.raises(ValueError, match="not being processed"):
        q.done("a")
    key = await get_now(q)
    q.done(key)
    with pytest.raises(ValueError, match="not being processed"):
        q.done(key)


async def test_waiting_workers_are_served_in_order(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    first = asyncio.ensure_future(q.get())
    await clock.settle()
    second = asyncio.ensure_future(q.get())
    await clock.settle()
    q.add("x")
    q.add("y")
    await clock.settle()
    assert (first.result(), second.result()) == ("x", "y")
    q.done("x")
    q.done("y")


async def test_a_cancelled_waiter_passes_its_key_on(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    first = asyncio.ensure_future(q.get())
    second = asyncio.ensure_future(q.get())
    await clock.settle()
    q.add("x")  # wakes `first`...
    first.cancel()  # ...which is cancelled before it runs
    await clock.settle()
    assert first.cancelled()
    assert second.result() == "x"
    q.done("x")


async def test_a_cancelled_waiter_leaves_no_trace(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    waiter = asyncio.ensure_future(q.get())
    await clock.settle()
    waiter.cancel()
    await asyncio.wait({waiter})
    q.add("x")
    assert await get_now(q) == "x"
    q.done("x")


# --- delays ------------------------------------------------------------------------------


async def test_add_after_is_ready_only_after_the_delay(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add_after("a", 10)
    assert (len(q), q.delayed) == (0, 1)
    await clock.tick(9.99)
    assert len(q) == 0
    await clock.tick(0.01)
    assert (len(q), q.delayed) == (1, 0)


async def test_delayed_keys_become_ready_in_deadline_order(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("middle", 2)
    await clock.tick(5)
    assert await drain_ready(q) == ["early", "middle", "late"]


async def test_the_earliest_delay_wins(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add_after("a", 10)
    q.add_after("a", 5)
    q.add_after("a", 20)  # later than what is already set: ignored
    assert q.delayed == 1
    await clock.tick(5)
    assert len(q) == 1
    await clock.tick(30)
    assert await drain_ready(q) == ["a"]  # once, not three times


async def test_a_non_positive_delay_adds_at_once(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert await drain_ready(q) == ["a", "b"]
    assert clock.pending_timers == 0


async def test_the_delay_heap_stays_bounded_for_one_key(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    for i in range(10_000):
        q.add_after("a", 100_000 - i)  # each one earlier than the last
    assert q.delayed == 1
    assert len(q._heap) <= 2 * q.delayed + 17
    assert clock.pending_timers == 1


async def test_a_delayed_key_added_meanwhile_is_processed_again(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add_after("a", 5)
    q.add("a")
    assert await drain_ready(q) == ["a"]
    await clock.tick(5)
    assert await drain_ready(q) == ["a"]


async def test_a_delayed_key_held_when_due_is_marked_dirty(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    key = await get_now(q)
    q.add_after("a", 1)
    await clock.tick(1)
    assert len(q) == 0
    q.done(key)
    assert await drain_ready(q) == ["a"]


# --- rate limiting -----------------------------------------------------------------------


async def ready_after(q: WorkQueue[str], clock: FakeAsyncClock) -> float:
    """Run the clock until a key is ready; the clock time that took."""
    start = clock.monotonic()
    key = await clock.drive(q.get())
    q.done(key)
    return clock.monotonic() - start


async def test_rate_limited_retries_back_off_exponentially(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    waits = []
    for _ in range(6):
        q.add_rate_limited("a")
        waits.append(await ready_after(q, clock))
    assert waits == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08, 0.16])
    assert q.num_requeues("a") == 6
    q.forget("a")
    assert q.num_requeues("a") == 0
    q.add_rate_limited("a")
    assert await ready_after(q, clock) == pytest.approx(0.005)


async def test_backoff_caps_at_1000_seconds(clock: FakeAsyncClock) -> None:
    q = new_queue(clock, rate_limiter=ratelimit.ItemExponentialBackoff())
    for _ in range(18):
        q.add_rate_limited("a")
        await ready_after(q, clock)
    q.add_rate_limited("a")
    assert await ready_after(q, clock) == pytest.approx(1000.0)
    q.add_rate_limited("a")
    assert await ready_after(q, clock) == pytest.approx(1000.0)


async def test_the_token_bucket_limits_all_retries_to_10_per_second(
        clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    for i in range(130):
        q.add_rate_limited(f"k{i:03}")
    await clock.tick(0.005)
    assert len(q) == 100  # the burst
    await clock.tick(0.1 - 0.005)
    assert len(q) == 101
    await clock.tick(2.0)
    assert len(q) == 121  # then 10 per second
    await clock.tick(1.0)
    assert len(q) == 130
    assert await drain_ready(q) == [f"k{i:03}" for i in range(130)]


async def test_a_custom_rate_limiter(clock: FakeAsyncClock) -> None:
    class Fixed:
        def when(self, key: str) -> float:
            return 7.0

        def forget(self, key: str) -> None:
            pass

        def num_requeues(self, key: str) -> int:
            return 0

    q = new_queue(clock, rate_limiter=Fixed())
    q.add_rate_limited("a")
    assert await ready_after(q, clock) == 7.0


# --- shutdown ----------------------------------------------------------------------------


async def test_shut_down_hands_out_ready_keys_then_raises(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    q.add_after("later", 5)
    q.shut_down()
    assert q.shutting_down
    q.add("b")  # ignored
    q.add_after("c", 1)  # ignored
    q.add_rate_limited("d")  # ignored
    assert (len(q), q.delayed, clock.pending_timers) == (1, 0, 0)
    assert await drain_ready(q) == ["a"]
    with pytest.raises(ShutDown):
        await q.get()
    q.shut_down()  # idempotent


async def test_shut_down_wakes_every_waiting_worker(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    workers = [asyncio.ensure_future(q.get()) for _ in range(3)]
    await clock.settle()
    q.shut_down()
    results = await asyncio.gather(*workers, return_exceptions=True)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_drain_waits_for_held_and_ready_keys(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    q.add("b")
    held = await get_now(q)
    drain = asyncio.ensure_future(q.shut_down_with_drain())
    await clock.settle()
    assert not drain.done()
    q.add("a")  # after shutdown: ignored, so "a" is not handed out again
    q.done(held)
    await clock.settle()
    assert not drain.done()  # "b" is still ready
    assert await drain_ready(q) == ["b"]
    await clock.settle()
    assert drain.done()
    with pytest.raises(ShutDown):
        await q.get()


async def test_drain_processes_a_key_that_was_dirty_at_shutdown(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    q.add("a")
    held = await get_now(q)
    q.add("a")  # dirty before the shutdown: still owed one more pass
    drain = asyncio.ensure_future(q.shut_down_with_drain())
    q.done(held)
    assert await drain_ready(q) == ["a"]
    await clock.settle()
    assert drain.done()


async def test_drain_of_an_idle_queue_returns_at_once(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    await q.shut_down_with_drain()
    assert q.shutting_down


# --- concurrency -------------------------------------------------------------------------


async def test_concurrent_workers_never_share_a_key(clock: FakeAsyncClock) -> None:
    q = new_queue(clock)
    rng = random.Random(7)
    holding: set[str] = set()
    processed: list[str] = []
    last_add: dict[str, float] = {}
    last_start: dict[str, float] = {}

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            assert key not in holding, f"{key} handed to two workers"
            holding.add(key)
            last_start[key] = clock.monotonic()
            await rtclock.sleep(clock, rng.choice([0, 0.01, 0.05, 0.2]))
            if rng.random() < 0.3:
                q.add(key)  # re-added while held
                last_add[key] = clock.monotonic()
            holding.discard(key)
            processed.append(key)
            q.done(key)

    async def producer() -> None:
        for _ in range(400):
            key = f"k{rng.randrange(12)}"
            if rng.random() < 0.2:
                q.add_after(key, rng.choice([0.01, 0.1]))
            else:
                q.add(key)
            last_add[key] = clock.monotonic()
            await rtclock.sleep(clock, rng.choice([0, 0.001, 0.02]))
        await rtclock.sleep(clock, 1.0)  # let the delays pass
        await q.shut_down_with_drain()

    await clock.drive(asyncio.gather(producer(), *(worker() for _ in range(4))))
    assert not holding
    assert len(processed) >= 100
    # every key was handed out at or after its last add: no add is lost
    for key, added in last_add.items():
        assert last_start[key] >= added, key


# --- metrics -----------------------------------------------------------------------------


async def test_metrics_hooks(clock: FakeAsyncClock) -> None:
    metrics = RecordingMetrics()
    q = new_queue(clock, metrics=metrics)
    q.add("a")
    q.add("a")  # dedup: not counted
    q.add("b")
    await clock.tick(2)
    key = await get_now(q)
    await clock.tick(3)
    assert q.unfinished_work_seconds() == 3.0
    assert q.longest_running_processor_seconds() == 3.0
    q.done(key)
    q.add_rate_limited("c")
    assert metrics.adds == 2
    assert metrics.depths == [1, 2, 1]
    assert metrics.latencies == [2.0]
    assert metrics.durations == [3.0]
    assert metrics.retries == 1
    assert q.unfinished_work_seconds() == 0.0
    assert q.longest_running_processor_seconds() == 0.0
