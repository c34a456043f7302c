"""The async clock: fake timers fire in order, at their deadlines, and only when told."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.runtime import clock as rtclock
from setpoint.runtime.clock import FakeAsyncClock, SystemAsyncClock

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


async def test_timers_fire_in_deadline_order_at_their_deadline(clock: FakeAsyncClock) -> None:
    fired: list[tuple[str, float]] = []
    clock.call_at(2.0, lambda: fired.append(("b", clock.monotonic())))
    clock.call_at(1.0, lambda: fired.append(("a", clock.monotonic())))
    clock.call_at(2.0, lambda: fired.append(("c", clock.monotonic())))
    clock.advance(1.5)
    assert fired == [("a", 1.0)]
    assert clock.monotonic() == 1.5
    clock.advance(10)
    assert fired == [("a", 1.0), ("b", 2.0), ("c", 2.0)]
    assert clock.monotonic() == 11.5


async def test_cancelled_timer_does_not_fire(clock: FakeAsyncClock) -> None:
    fired: list[int] = []
    timer = clock.call_at(1.0, lambda: fired.append(1))
    assert clock.pending_timers == 1
    timer.cancel()
    assert clock.next_deadline() is None
    clock.advance(2)
    assert fired == []


async def test_past_deadline_runs_soon(clock: FakeAsyncClock) -> None:
    fired: list[int] = []
    clock.call_at(0.0, lambda: fired.append(1))
    await asyncio.sleep(0)
    assert fired == [1]


async def test_sleep_wakes_only_when_time_passes(clock: FakeAsyncClock) -> None:
    task = asyncio.ensure_future(rtclock.sleep(clock, 5))
    await clock.tick(4.9)
    assert not task.done()
    await clock.tick(0.1)
    assert task.done()


async def test_tick_lets_a_coroutine_sleep_repeatedly(clock: FakeAsyncClock) -> None:
    wakes: list[float] = []

    async def every_second() -> None:
        for _ in range(3):
            await rtclock.sleep(clock, 1)
            wakes.append(clock.monotonic())

    task = asyncio.ensure_future(every_second())
    await clock.tick(10)
    assert wakes == [1.0, 2.0, 3.0]
    assert task.done()


async def test_drive_jumps_to_timers(clock: FakeAsyncClock) -> None:
    async def slow() -> str:
        await rtclock.sleep(clock, 30)
        await rtclock.sleep(clock, 30)
        return "done"

    assert await clock.drive(slow()) == "done"
    assert clock.monotonic() == 60


async def test_drive_reports_a_deadlock(clock: FakeAsyncClock) -> None:
    with pytest.raises(RuntimeError, match="stuck"):
        await clock.drive(asyncio.Event().wait())


async def test_drive_respects_its_limit(clock: FakeAsyncClock) -> None:
    with pytest.raises(RuntimeError, match="not done within"):
        await clock.drive(rtclock.sleep(clock, 100), max_seconds=10)
    assert clock.pending_timers == 0  # the abandoned sleep cancelled its timer


async def test_cancelled_sleep_cancels_its_timer(clock: FakeAsyncClock) -> None:
    task = asyncio.ensure_future(rtclock.sleep(clock, 5))
    await clock.settle()
    assert clock.pending_timers == 1
    task.cancel()
    await asyncio.wait({task})
    assert clock.pending_timers == 0


def test_fake_clock_never_goes_back(clock: FakeAsyncClock) -> None:
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(-1)


async def test_system_clock_sleeps_briefly() -> None:
    real = SystemAsyncClock()
    start = real.monotonic()
    await rtclock.sleep(real, 0.005)
    assert real.monotonic() - start >= 0.004
