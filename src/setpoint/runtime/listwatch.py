"""The loop that drives the watcher state machine against a real (or scripted) API.

:func:`run_watcher` performs the actions :func:`setpoint.runtime.watcher.step` asks for:
it lists pages and opens watches through a :class:`ListWatcher`, waits out backoffs, and
feeds back what happened, including the two inputs only a clock can produce: the stream's
inactivity timeout and the resync period. It yields the watcher's events.

Invariants:

- All waiting is on the injected :class:`~setpoint.runtime.clock.AsyncClock` (backoff,
  inactivity, resync), so a fake clock controls every delay; randomness (backoff jitter, the
  watch timeout asked of the server) comes from the injected ``random.Random``.
- At most one task is alive: the pending read of the open stream. A stream that is
  :class:`Buffered` (the client's is) hands out events it already holds without one: a
  task and a timer are made only when the next event needs a read. It survives a resync
  (the stream is kept), is cancelled when the stream is abandoned, and the stream is closed
  (``aclose``) before any list, re-watch or backoff, and when the generator is closed.
- Reconnect backoff is client-go's reflector backoff: 0.8 s doubling to 30 s, multiplied by
  a uniform factor in [1, 2) for jitter, starting over once failures are 2 minutes apart.
  A server's ``Retry-After`` is honoured when it is longer.

Non-guarantees: errors are logged (at INFO, as they are all retried), not yielded; the
generator never ends by itself; close it with ``contextlib.aclosing`` or cancel its consumer.
An abandoned, unclosed generator keeps its read task until it is garbage-collected. The
resync timer is checked only while a stream is read: one due during a list or a backoff
fires when reading resumes. Silence is measured from when the driver starts waiting for the
next event, so a slow consumer never makes a healthy stream look dead (nor can it tell a dead
one sooner).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from setpoint.runtime import clock as rtclock
from setpoint.runtime import watcher

logger = logging.getLogger(__name__)

Obj = watcher.Obj


class ListWatcher(Protocol):
    """The two calls the watcher makes (an adapter over the client implements them)."""

    async def list(self, *, resource_version: str, limit: int,
                   continue_token: str | None) -> Obj:
        """One list page: ``{"metadata": {"resourceVersion", "continue"}, "items": [...]}``."""

    def watch(self, *, resource_version: str, timeout_seconds: int) -> AsyncIterator[Obj]:
        """Watch events as ``{"type", "object"}`` dicts; the request may be sent lazily.

        An ERROR may come as an event or be raised (``Expired``/``Gone`` for 410); the
        iterator ends when the server closes the stream.
        """


@dataclass(frozen=True, slots=True, kw_only=True)
class BackoffConfig:
    """Reconnect backoff: ``min(initial·factor^n, cap) · (1 + jitter·U[0,1))``."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    #: failures further apart than this start over from ``initial``
    reset_after: float = 120.0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.cap:
            raise ValueError("backoff needs 0 < initial <= cap")
        if self.factor < 1 or self.jitter < 0 or self.reset_after <= 0:
            raise ValueError("backoff needs factor >= 1, jitter >= 0, reset_after > 0")


class ReconnectBackoff:
    """The delay before each retry; the n-th consecutive failure waits about ``initial·2^n``."""

    def __init__(self, config: BackoffConfig, clock: rtclock.AsyncClock,
                 rng: random.Random) -> None:
        self._config = config
        self._clock = clock
        self._rng = rng
        self._attempt = 0
        self._last: float | None = None

    def next_delay(self) -> float:
        c = self._config
        now = self._clock.monotonic()
        if self._last is not None and now - self._last >= c.reset_after:
            self._attempt = 0
        self._last = now
        base = min(c.initial * c.factor ** min(self._attempt, 64), c.cap)
        self._attempt += 1
        return base * (1.0 + c.jitter * self._rng.random())


@dataclass(frozen=True, slots=True, kw_only=True)
class WatcherConfig:
    #: items per list page (kube-rs's default)
    page_size: int = 500
    #: the first list: "any" resourceVersion ("0", may be served stale from a cache) or
    #: "consistent" (""); a relist after a 410 is always consistent
    initial_list: Literal["any", "consistent"] = "any"
    #: watches ask the server to end after a random time in [watch_timeout, 2·watch_timeout)
    watch_timeout: float = 300.0
    #: a stream silent this long is dead (servers send a bookmark every minute)
    inactivity_timeout: float = 70.0
    #: replay the store this often (None: never), as client-go's resync period
    resync_period: float | None = None
    backoff: BackoffConfig = field(default_factory=BackoffConfig)

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError("page_size must be positive")
        if self.watch_timeout < 1 or self.inactivity_timeout <= 0:
            raise ValueError("watch_timeout must be at least 1 s, inactivity_timeout positive")
        if self.resync_period is not None and self.resync_period <= 0:
            raise ValueError("resync_period must be positive (or None)")


async def _next(stream: AsyncIterator[Obj]) -> Obj:
    return await anext(stream)


class Buffered(Protocol):
    """A watch stream that can hand out an event already received without awaiting."""

    def next_nowait(self) -> Obj | None:
        """The next event if it is already here, else ``None`` (the next one needs a read).
        Raises what reading it would raise."""


class _Stream:
    """The open watch stream, its one pending read, and the one timer of its waits.

    The timer is lazy: a wait asks to be woken at its deadline (the silence limit or the
    resync); the timer is armed only when none is armed for that time or earlier, and when it
    fires before the current wait's deadline (a later read moved the deadline on) it is armed
    again for that deadline instead of waking anyone. A busy stream thus costs no timer per
    event, only one firing per inactivity period.
    """

    def __init__(self, stream: AsyncIterator[Obj], clock: rtclock.AsyncClock) -> None:
        self.stream = stream
        self.read: asyncio.Task[Obj] | None = None
        #: when the pending read started (silence is measured from there)
        self.waiting_since = 0.0
        nowait = getattr(stream, "next_nowait", None)
        self._nowait: Callable[[], Obj | None] | None = nowait if callable(nowait) else None
        self._clock = clock
        self._timer: rtclock.Timer | None = None
        self._timer_at = math.inf
        self._deadline = math.inf
        self._woken: asyncio.Future[None] | None = None

    def wake_at(self, deadline: float, woken: asyncio.Future[None]) -> None:
        """Resolve ``woken`` once the clock reaches ``deadline`` (unless it is done first)."""
        self._deadline, self._woken = deadline, woken
        if deadline < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._clock.call_at(deadline, self._alarm)
            self._timer_at = deadline

    def _alarm(self) -> None:
        self._timer, self._timer_at = None, math.inf
        woken = self._woken
        if woken is None or woken.done():
            return  # nobody waits: the next wait arms it again
        if self._clock.monotonic() >= self._deadline:
            woken.set_result(None)
        else:
            self._timer = self._clock.call_at(self._deadline, self._alarm)
            self._timer_at = self._deadline

    def ready_event(self) -> Obj | None:
        """An event already received, taken without a task or a timer (``None`` when a read
        is pending or the stream cannot say)."""
        if self.read is not None or self._nowait is None:
            return None
        return self._nowait()

    def pending_read(self) -> tuple[asyncio.Task[Obj], bool]:
        """The read in progress, and whether it was just started."""
        if self.read is None:
            self.read = asyncio.ensure_future(_next(self.stream))
            return self.read, True
        return self.read, False

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, math.inf
        read, self.read = self.read, None
        if read is not None:
            if not read.done():
                read.cancel()
                await asyncio.wait({read})
            if not read.cancelled():
                read.exception()  # mark an abandoned read's error as retrieved
        aclose = getattr(self.stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


async def _wait(stream: _Stream, task: asyncio.Task[Obj], deadline: float) -> None:
    """Wait until ``task`` is done or the clock reaches ``deadline``, whichever is first
    (the stream's lazy timer; the task's completion through a callback, not
    ``asyncio.wait``)."""
    if task.done():
        return
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(_: object) -> None:
        if not woken.done():
            woken.set_result(None)

    task.add_done_callback(wake)
    stream.wake_at(deadline, woken)
    try:
        await woken
    finally:
        task.remove_done_callback(wake)
        woken.cancel()


async def _read(stream: _Stream, clock: rtclock.AsyncClock, config: WatcherConfig,
                next_resync: float) -> tuple[watcher.Input, float]:
    """Wait for the stream's next event, its inactivity timeout or the resync, whichever
    comes first; the input for the state machine and the next resync time."""
    read, started = stream.pending_read()
    if started:
        stream.waiting_since = clock.monotonic()
    await _wait(stream, read, min(stream.waiting_since + config.inactivity_timeout, next_resync))
    if read.done():
        stream.read = None
        try:
            return watcher.WatchEventReceived(read.result()), next_resync
        except StopAsyncIteration:
            return watcher.WatchEnded(), next_resync
        except Exception as e:
            return watcher.WatchFailed(e), next_resync
    if config.resync_period is not None and clock.monotonic() >= next_resync:
        return watcher.ResyncDue(), clock.monotonic() + config.resync_period
    return watcher.InactivityTimeout(), next_resync


async def run_watcher(lw: ListWatcher, *, clock: rtclock.AsyncClock,
                      config: WatcherConfig | None = None,
                      rng: random.Random | None = None
                      ) -> AsyncGenerator[watcher.WatcherEvent, None]:
    """List, then watch, forever, yielding the watcher's events.

    ``rng`` drives the jitter of backoffs and watch timeouts; pass a seeded one for
    reproducible runs.
    """
    config = config or WatcherConfig()
    rng = rng or random.Random()
    backoff = ReconnectBackoff(config.backoff, clock, rng)
    _, state, action = watcher.initial(config.initial_list == "consistent")
    stream: _Stream | None = None
    period = config.resync_period
    next_resync = clock.monotonic() + period if period is not None else float("inf")
    try:
        while True:
            if stream is not None and isinstance(
                    action, watcher.Backoff | watcher.ListPage | watcher.StartWatch):
                await stream.close()
                stream = None
            if isinstance(action, watcher.Backoff):
                delay = backoff.next_delay()
                if action.retry_after is not None:
                    delay = max(delay, action.retry_after)
                logger.info("watcher retrying in %.2fs: %s", delay, action.reason)
                await rtclock.sleep(clock, delay)
                action = action.then
            inp: watcher.Input
            if isinstance(action, watcher.ListPage):
                try:
                    page = await lw.list(resource_version=action.resource_version,
                                         limit=config.page_size,
                                         continue_token=action.continue_token)
                    inp = watcher.ListResult(page)
                except Exception as e:
                    inp = watcher.ListFailed(e)
            else:
                if isinstance(action, watcher.StartWatch):
                    timeout = int(config.watch_timeout * (1.0 + rng.random()))
                    stream = _Stream(lw.watch(resource_version=action.resource_version,
                                              timeout_seconds=timeout), clock)
                if stream is None:  # pragma: no cover - step() never asks for it
                    raise RuntimeError(f"{action!r} without an open stream")
                try:
                    # already received (a busy stream delivers several per read): no task,
                    # no timer, and the stream is not silent
                    ready = stream.ready_event()
                except Exception as e:
                    inp = watcher.WatchFailed(e)
                else:
                    if ready is not None:
                        inp = watcher.WatchEventReceived(ready)
                    else:
                        inp, next_resync = await _read(stream, clock, config, next_resync)
            events, state, action = watcher.step(state, inp)
            for event in events:
                yield event
    finally:
        if stream is not None:
            await stream.close()
