"""Request deadlines with one timer for all of them.

A request's timeout is a deadline on the loop's clock; every future the request waits on
(a free connection, the response, a stream's head) is tracked with it while it waits.
:class:`Deadlines` keeps one timer, armed for the earliest deadline it knows; when it fires,
every tracked future whose deadline has passed fails with ``TimeoutError``, and the timer is
armed again for the earliest deadline left. Tracking a future is a dict insertion, where a
timer per request (what ``asyncio.timeout`` does) costs a timer's creation and cancellation
on every request; with equal timeouts, later requests have later deadlines and the timer is
not touched at all.

Invariants: a tracked future whose deadline passes is failed, by the first firing at or after
its deadline; a future untracked (or done) before is never touched. Non-guarantees: a
deadline fires no earlier than the loop's timer resolution allows (about a millisecond on
uvloop), and only while the loop runs.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any


class Deadlines:
    """The deadlines of one client's requests (see the module docstring)."""

    def __init__(self) -> None:
        self._due: dict[asyncio.Future[Any], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf

    def at(self, timeout: float | None) -> Deadline | None:
        """The deadline ``timeout`` seconds from now (``None``: none)."""
        if timeout is None:
            return None
        return Deadline(self, asyncio.get_running_loop().time() + timeout)

    def track(self, future: asyncio.Future[Any], when: float) -> None:
        self._due[future] = when
        if when < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(when, self._fire)
            self._timer_at = when

    def untrack(self, future: asyncio.Future[Any]) -> None:
        self._due.pop(future, None)

    def _fire(self) -> None:
        self._timer, self._timer_at = None, math.inf
        if not self._due:
            return
        now = asyncio.get_running_loop().time()
        expired = [future for future, when in self._due.items() if when <= now]
        for future in expired:
            del self._due[future]
            if not future.done():
                future.set_exception(TimeoutError("the request's deadline passed"))
        if self._due:
            earliest = min(self._due.values())
            self._timer = asyncio.get_running_loop().call_at(earliest, self._fire)
            self._timer_at = earliest


class Deadline:
    """One request's deadline: :meth:`wait` awaits a future, failing it when it passes."""

    __slots__ = ("_deadlines", "when")

    def __init__(self, deadlines: Deadlines, when: float) -> None:
        self._deadlines = deadlines
        self.when = when

    async def wait(self, future: asyncio.Future[Any]) -> Any:
        if future.done():
            return future.result()
        self._deadlines.track(future, self.when)
        try:
            return await future
        finally:
            self._deadlines.untrack(future)

    def remaining(self) -> float:
        return self.when - asyncio.get_running_loop().time()
