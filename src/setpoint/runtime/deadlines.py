"""Time limits on the injected clock: ``asyncio.timeout`` for an :class:`AsyncClock`.

``asyncio.timeout`` reads the event loop's time, which a test's
:class:`~setpoint.runtime.clock.FakeAsyncClock` does not control. :func:`deadline` bounds a
block by the injected clock instead: when the clock reaches the deadline, the current task is
cancelled and the block raises ``TimeoutError``.

Invariants: a cancellation that does not come from this deadline (the task's owner cancelling
it) propagates as ``CancelledError``, never as ``TimeoutError``, also when both happen; a block
that finishes before the deadline is not disturbed, and the timer is always cancelled on exit.

Non-guarantees: like ``asyncio.timeout``, the block is interrupted only at an ``await``; code
that swallows ``CancelledError`` inside the block defeats the limit.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from setpoint.runtime import clock as rtclock

T = TypeVar("T")


@contextlib.asynccontextmanager
async def deadline(clock: rtclock.AsyncClock, seconds: float | None) -> AsyncIterator[None]:
    """Raise ``TimeoutError`` from the block if it runs ``seconds`` of clock time (None: never)."""
    if seconds is None:
        yield
        return
    task = asyncio.current_task()
    if task is None:  # pragma: no cover - always inside a task under asyncio
        raise RuntimeError("deadline() needs a running task")
    baseline = task.cancelling()
    fired = False

    def expire() -> None:
        nonlocal fired
        fired = True
        task.cancel()

    timer = clock.call_at(clock.monotonic() + max(0.0, seconds), expire)
    try:
        yield
    except asyncio.CancelledError:
        if fired and task.uncancel() <= baseline:
            raise TimeoutError(f"not done within {seconds:g}s") from None
        raise
    else:
        if fired:  # the block ended between the timer firing and the cancellation landing
            task.uncancel()
    finally:
        timer.cancel()


async def wait_for(aw: Awaitable[T], clock: rtclock.AsyncClock, seconds: float | None) -> T:
    """Await ``aw`` within ``seconds`` of clock time; ``TimeoutError`` otherwise."""
    async with deadline(clock, seconds):
        return await aw
