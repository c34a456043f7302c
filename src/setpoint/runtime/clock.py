"""Timers on an injected clock, for code that waits.

:class:`setpoint.apimachinery.clock.Clock` only reads time. The runtime also *waits* (delayed
queue items, watch backoff, inactivity and resync deadlines), so it takes an
:class:`AsyncClock`: a ``Clock`` that can also call back at a monotonic deadline. Every wait in
the runtime is built from :meth:`AsyncClock.call_at`, never from ``asyncio.sleep`` or
``asyncio.timeout`` (which read the event loop's own time), so a test that injects a
:class:`FakeAsyncClock` controls every delay.

Invariants:

- ``call_at(when, callback)`` runs ``callback`` once, in the event loop's thread, no earlier
  than ``monotonic() >= when`` (for the system clock, give or take the loop's timer
  resolution; callers re-check the time). ``Timer.cancel()`` before it runs prevents it and
  is harmless afterwards.
- :class:`FakeAsyncClock` fires due timers in deadline order, ties in the order they were
  set, and sets its time to each deadline before firing it, so a callback reading
  ``monotonic()`` sees exactly its deadline.

Non-guarantees: callbacks must be quick and must not raise (an exception in a system-clock
callback goes to the loop's exception handler; in a fake-clock callback it propagates out of
``advance``). A fake clock does not know when the loop is idle: :meth:`FakeAsyncClock.settle`
yields a fixed number of times, enough for the short chains of wake-ups in this package.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, TypeVar

from setpoint.apimachinery import clock as base

T = TypeVar("T")


class Timer(Protocol):
    def cancel(self) -> None:
        """Prevent the callback if it has not run yet."""


class AsyncClock(base.Clock, Protocol):
    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once ``monotonic()`` reaches ``when``."""


async def sleep_until(clock: AsyncClock, when: float) -> None:
    """Wait until ``clock.monotonic() >= when``; cancellation cancels the timer."""
    if when <= clock.monotonic():
        await asyncio.sleep(0)  # still a suspension point, as asyncio.sleep(0) is
        return
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not future.done():
            future.set_result(None)

    timer = clock.call_at(when, wake)
    try:
        await future
    finally:
        timer.cancel()


async def sleep(clock: AsyncClock, seconds: float) -> None:
    """Wait ``seconds`` of ``clock`` time."""
    await sleep_until(clock, clock.monotonic() + max(0.0, seconds))


class SystemAsyncClock(base.SystemClock):
    """Real time; timers are the running event loop's."""

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        delay = max(0.0, when - self.monotonic())
        return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(order=True)
class _FakeTimer:
    when: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeAsyncClock(base.FakeClock):
    """A clock that moves only when told to, and fires timers as it passes their deadlines.

    ``advance(s)`` is synchronous: it fires every timer due within ``s`` but cannot let the
    woken coroutines run. ``await tick(s)`` yields to the loop after each timer, so a
    coroutine that sleeps again inside the window is woken again, as in real time.
    ``await drive(aw)`` runs an awaitable to completion, jumping the clock to the next timer
    whenever the loop is otherwise idle (tokio's paused-time auto-advance).
    """

    def __init__(self, start: datetime | None = None, *, settle_rounds: int = 50) -> None:
        super().__init__(start)
        self._timers: list[_FakeTimer] = []
        self._seq = itertools.count()
        self._settle_rounds = settle_rounds

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        if when <= self.monotonic():
            try:
                return asyncio.get_running_loop().call_soon(callback)
            except RuntimeError:  # no loop: the next advance fires it
                pass
        timer = _FakeTimer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def next_deadline(self) -> float | None:
        """The earliest pending timer's deadline, or None when nothing waits on this clock."""
        self._drop_cancelled()
        return self._timers[0].when if self._timers else None

    @property
    def pending_timers(self) -> int:
        self._drop_cancelled()
        return sum(1 for t in self._timers if not t.cancelled)

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)

    def _fire_next(self, limit: float) -> bool:
        """Fire the earliest timer due by ``limit``, moving time to it; False if none is."""
        self._drop_cancelled()
        if not self._timers or self._timers[0].when > limit:
            return False
        timer = heapq.heappop(self._timers)
        if timer.when > self.monotonic():
            super().advance(timer.when - self.monotonic())
        timer.callback()
        return True

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock never goes back")
        target = self.monotonic() + seconds
        while self._fire_next(target):
            pass
        super().advance(target - self.monotonic())

    async def settle(self) -> None:
        """Let ready callbacks and woken tasks run (a fixed number of loop iterations)."""
        for _ in range(self._settle_rounds):
            await asyncio.sleep(0)

    async def tick(self, seconds: float = 0.0) -> None:
        """Advance by ``seconds``, letting the loop run after each timer that fires."""
        if seconds < 0:
            raise ValueError("a clock never goes back")
        target = self.monotonic() + seconds
        await self.settle()
        while self._fire_next(target):
            await self.settle()
        super().advance(target - self.monotonic())
        await self.settle()

    async def drive(self, aw: Awaitable[T], *, max_seconds: float = 86400.0) -> T:
        """Await ``aw``, jumping to the next timer whenever nothing else can run.

        Raises ``RuntimeError`` when ``aw`` is stuck with no timer pending (it would wait
        forever) or would need more than ``max_seconds`` of clock time.
        """
        task = asyncio.ensure_future(aw)
        limit = self.monotonic() + max_seconds
        try:
            while True:
                await self.settle()
                if task.done():
                    return task.result()
                deadline = self.next_deadline()
                if deadline is None:
                    raise RuntimeError("stuck: the awaitable waits with no timer pending")
                if deadline > limit:
                    raise RuntimeError(f"not done within {max_seconds}s of clock time")
                self._fire_next(deadline)
        finally:
            if not task.done():
                task.cancel()
                await asyncio.wait({task})  # joins it; the caller's own cancellation propagates
