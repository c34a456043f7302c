"""Deadlines on the injected clock."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.runtime import deadlines
from setpoint.runtime.clock import FakeAsyncClock

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


async def test_a_deadline_raises_timeout_at_clock_time(clock: FakeAsyncClock) -> None:
    async def slow() -> None:
        async with deadlines.deadline(clock, 5.0):
            await asyncio.Event().wait()

    task = asyncio.ensure_future(slow())
    await clock.tick(4.9)
    assert not task.done()
    await clock.tick(0.1)
    assert task.done()
    with pytest.raises(TimeoutError):
        task.result()


async def test_finishing_in_time_is_undisturbed(clock: FakeAsyncClock) -> None:
    assert await deadlines.wait_for(asyncio.sleep(0, "x"), clock, 1.0) == "x"
    assert await deadlines.wait_for(asyncio.sleep(0, "y"), clock, None) == "y"
    assert clock.pending_timers == 0


async def test_an_outside_cancellation_stays_a_cancellation(clock: FakeAsyncClock) -> None:
    async def body() -> None:
        async with deadlines.deadline(clock, 5.0):
            await asyncio.Event().wait()

    task = asyncio.ensure_future(body())
    await clock.settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.pending_timers == 0


async def test_a_deadline_inside_a_cancelled_task(clock: FakeAsyncClock) -> None:
    """After catching its own cancellation, a task can still bound its cleanup."""
    outcome: list[str] = []

    async def body() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            try:
                await deadlines.wait_for(asyncio.Event().wait(), clock, 2.0)
            except TimeoutError:
                outcome.append("cleanup timed out")
            raise

    task = asyncio.ensure_future(body())
    await clock.settle()
    task.cancel()
    await clock.tick(2.0)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert outcome == ["cleanup timed out"]
