"""The work queue between event handlers and reconcile workers.

A :class:`WorkQueue` holds **keys, not events** (typically ``namespace/name``): a handler says
"this object needs attention", and a worker later reconciles the object's current state from
the cache. Its guarantees, as client-go's ``workqueue`` package states them:

- **Deduplicated**: adding a key that is already waiting is a no-op; it keeps its place.
- **Stingy**: a key is never handed to two workers at once. A key added while a worker holds
  it is marked *dirty* and handed out once more after that worker calls :meth:`done`
  (however many times it was added meanwhile).
- **Fair**: keys are handed out in the order they became ready (FIFO), or, with a
  ``priority`` config, by weighted priority classes (:mod:`setpoint.runtime.fairness`:
  changes before initial-list items and resyncs, but every class keeps a share of the turns,
  so nothing waits forever); waiting workers are served in the order they asked.
- **Multiple producers and consumers**: any number of coroutines may add, and any number of
  workers may ``await get()``, all in one event loop.
- **Delayed adds**: :meth:`add_after` makes a key ready after a delay; a key waiting with
  several delays keeps only the earliest (one heap entry per key, so the delay heap is
  bounded by the number of distinct keys).
- **Rate limited retries**: :meth:`add_rate_limited` delays a key by its
  :class:`~setpoint.runtime.ratelimit.RateLimiter` (by default the max of per-key
  exponential backoff 5 ms·2^n ≤ 1000 s and an overall 10/s, burst 100 token bucket);
  :meth:`forget` resets a key's backoff after success.
- **Shutdown**: after :meth:`shut_down` adds are ignored and delayed keys are dropped; keys
  already ready are still handed out, then :meth:`get` raises :class:`ShutDown` to every
  waiting and future caller. :meth:`shut_down_with_drain` also waits until every key
  handed out (or still ready) has been marked done.

- **Triggers**: every add may say why (a :class:`~setpoint.runtime.triggers.Trigger`); the
  triggers of the adds merged into one pending key travel with it (bounded per key, see
  :mod:`setpoint.runtime.triggers`) and :meth:`triggers` returns them while a worker holds
  the key.

The internal sets (see the field comments) satisfy: ``ready ⊆ dirty``, ``ready ∩ processing
= ∅``, each key is at most once in ``ready``, and the keys with pending triggers are dirty
(held ones: processing; delayed ones: delayed).

Non-guarantees: no bound on the number of distinct keys (callers enqueue one
key per object, so this is bounded by the objects watched); a key waiting in the delay heap
that is also added directly is processed now *and* again when its delay expires (the delay
was asked for explicitly); dropping delayed keys at shutdown loses them. All methods must be
called from the event loop's thread; time is read only from the injected clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from setpoint.runtime import clock as rtclock
from setpoint.runtime import fairness, ratelimit
from setpoint.runtime import triggers as rttriggers

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue is shut down and has nothing left to hand out."""


class QueueMetrics(Protocol):
    """Callbacks behind controller-runtime's ``workqueue_*`` metrics.

    ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds``
    are gauges read on demand: see :meth:`WorkQueue.unfinished_work_seconds`.
    """

    def on_add(self) -> None:
        """A key was accepted (``workqueue_adds_total``); dedup no-ops are not counted."""

    def on_depth(self, depth: int) -> None:
        """The number of ready keys changed (``workqueue_depth``)."""

    def on_queue_latency(self, seconds: float) -> None:
        """A key waited this long from add to get (``workqueue_queue_duration_seconds``)."""

    def on_work_duration(self, seconds: float) -> None:
        """A key was held this long from get to done (``workqueue_work_duration_seconds``)."""

    def on_retry(self) -> None:
        """A rate-limited re-add (``workqueue_retries_total``)."""


class NoMetrics:
    """Discards every measurement."""

    def on_add(self) -> None:
        pass

    def on_depth(self, depth: int) -> None:
        pass

    def on_queue_latency(self, seconds: float) -> None:
        pass

    def on_work_duration(self, seconds: float) -> None:
        pass

    def on_retry(self) -> None:
        pass


class WorkQueue(Generic[K]):
    """A deduplicating, stingy, fair queue of keys with delays and rate-limited retries.

    >>> import asyncio
    >>> from setpoint.runtime.clock import FakeAsyncClock
    >>> async def demo() -> list[str]:
    ...     q: WorkQueue[str] = WorkQueue(clock=FakeAsyncClock())
    ...     q.add("default/a"); q.add("default/b"); q.add("default/a")
    ...     got = [await q.get(), await q.get()]
    ...     for key in got:
    ...         q.done(key)
    ...     return got
    >>> asyncio.run(demo())
    ['default/a', 'default/b']
    """

    def __init__(self, *, clock: rtclock.AsyncClock | None = None,
                 rate_limiter: ratelimit.RateLimiter[K] | None = None,
                 metrics: QueueMetrics | None = None,
                 priority: fairness.PriorityConfig | None = None) -> None:
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._limiter: ratelimit.RateLimiter[K] = (
            rate_limiter or ratelimit.default_controller_rate_limiter(self._clock))
        self._metrics: QueueMetrics = metrics or NoMetrics()
        # keys to hand out, oldest first; each also in _dirty and never in _processing
        self._ready: fairness.ReadyOrder[K] = (
            fairness.WeightedPriority(priority) if priority is not None else fairness.Fifo())
        # keys that need processing: ready ones, and held ones added again while held
        self._dirty: set[K] = set()
        # keys held by a worker (between get and done), with the time each was handed out
        self._processing: dict[K, float] = {}
        # when each dirty key was added, for the queue-latency metric
        self._added_at: dict[K, float] = {}
        # delayed keys: the earliest ready time of each; the heap may hold stale entries
        # (a time no longer equal to _delayed[key]), at most about as many as live ones
        self._delayed: dict[K, float] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._timer: rtclock.Timer | None = None
        self._timer_at = 0.0
        # workers waiting in get(), served first come first served
        self._getters: deque[asyncio.Future[None]] = deque()
        # callers of shut_down_with_drain, woken when nothing is ready or held
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        # why each key is wanted: pending (dirty) keys, held keys, delayed keys
        self._triggers: dict[K, rttriggers.Merged] = {}
        self._held_triggers: dict[K, rttriggers.Merged] = {}
        self._delayed_triggers: dict[K, rttriggers.Merged] = {}

    # --- adding ----------------------------------------------------------------------

    def add(self, key: K, trigger: rttriggers.Trigger | None = None) -> None:
        """Mark ``key`` as needing processing (a no-op if it already does, except that
        ``trigger`` is merged into its triggers)."""
        if self._shutting_down:
            return
        if trigger is not None:
            self._merge_trigger(self._triggers, key, trigger)
        if key in self._dirty:
            if trigger is not None and key not in self._processing:
                self._ready.raise_to(key, (trigger.cause,))
            return
        self._dirty.add(key)
        self._added_at[key] = self._clock.monotonic()
        self._metrics.on_add()
        if key in self._processing:
            return  # handed out again by done()
        self._push_ready(key)

    def add_after(self, key: K, delay: float,
                  trigger: rttriggers.Trigger | None = None) -> None:
        """Add ``key`` once ``delay`` seconds have passed; the earliest of several delays wins
        (the triggers of all of them are merged)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key, trigger)
            return
        if trigger is not None:
            self._merge_trigger(self._delayed_triggers, key, trigger)
        at = self._clock.monotonic() + delay
        current = self._delayed.get(key)
        if current is not None and current <= at:
            return
        self._delayed[key] = at
        heapq.heappush(self._heap, (at, next(self._seq), key))
        if len(self._heap) > 2 * len(self._delayed) + 16:
            self._compact_heap()
        self._arm_timer()

    def add_rate_limited(self, key: K, trigger: rttriggers.Trigger | None = None) -> None:
        """Add ``key`` after its rate limiter's delay (counts a retry)."""
        if self._shutting_down:
            return
        self._metrics.on_retry()
        self.add_after(key, self._limiter.when(key), trigger)

    def forget(self, key: K) -> None:
        """Stop tracking ``key``'s failures (it succeeded); does not remove it from the queue."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """Rate-limited re-adds of ``key`` since it was last forgotten."""
        return self._limiter.num_requeues(key)

    def triggers(self, key: K) -> tuple[rttriggers.Trigger, ...]:
        """Why the held ``key`` was handed out: the distinct triggers merged into it (``()``
        when it is not held or nobody said)."""
        merged = self._held_triggers.get(key)
        return merged.freeze() if merged is not None else ()

    def merged_adds(self, key: K) -> int:
        """How many adds with a trigger were merged into the held ``key``."""
        merged = self._held_triggers.get(key)
        return merged.count if merged is not None else 0

    # --- taking ----------------------------------------------------------------------

    async def get(self) -> K:
        """The next ready key, waiting for one; the caller must call :meth:`done` with it.

        Raises :class:`ShutDown` once the queue is shut down and nothing is ready.
        """
        while not self._ready:
            if self._shutting_down:
                raise ShutDown("the work queue is shut down")
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_getter()  # pass our wake-up on; we will not take a key
                elif waiter in self._getters:
                    self._getters.remove(waiter)
                raise
        key = self._ready.pop()
        self._dirty.discard(key)
        now = self._clock.monotonic()
        self._processing[key] = now
        merged = self._triggers.pop(key, None)
        if merged is not None:
            self._held_triggers[key] = merged
        added = self._added_at.pop(key, now)
        self._metrics.on_depth(len(self._ready))
        self._metrics.on_queue_latency(now - added)
        return key

    def done(self, key: K) -> None:
        """The worker is finished with ``key``; if it was added meanwhile, it is ready again.

        Raises ``ValueError`` for a key that is not being processed (a double ``done``).
        """
        try:
            started = self._processing.pop(key)
        except KeyError:
            raise ValueError(f"done({key!r}): the key is not being processed") from None
        self._held_triggers.pop(key, None)
        self._metrics.on_work_duration(self._clock.monotonic() - started)
        if key in self._dirty:
            self._push_ready(key)
        self._wake_drainers()

    # --- shutting down ---------------------------------------------------------------

    def shut_down(self) -> None:
        """Ignore further adds, drop delayed keys, and let getters finish the ready ones."""
        if self._shutting_down:
            return
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._delayed.clear()
        self._delayed_triggers.clear()
        self._heap.clear()
        while self._getters:
            self._wake_getter()
        self._wake_drainers()

    async def shut_down_with_drain(self) -> None:
        """Shut down, then wait until every ready or held key has been marked done.

        Needs running workers to make progress; bound it with a timeout.
        """
        self.shut_down()
        while self._ready or self._processing:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drainers.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._drainers:
                    self._drainers.remove(waiter)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    # --- observing -------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys ready to be handed out (``workqueue_depth``)."""
        return len(self._ready)

    @property
    def processing(self) -> int:
        """Keys held by workers."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Distinct keys waiting for a delay to pass."""
        return len(self._delayed)

    def unfinished_work_seconds(self) -> float:
        """Total time the held keys have been held (``workqueue_unfinished_work_seconds``)."""
        now = self._clock.monotonic()
        return sum(now - t for t in self._processing.values())

    def longest_running_processor_seconds(self) -> float:
        """The longest any held key has been held (``..._longest_running_processor_seconds``)."""
        now = self._clock.monotonic()
        return max((now - t for t in self._processing.values()), default=0.0)

    # --- internals -------------------------------------------------------------------

    def _push_ready(self, key: K) -> None:
        merged = self._triggers.get(key)
        causes = {t.cause for t in merged.triggers} if merged is not None else ()
        self._ready.push(key, causes)
        self._metrics.on_depth(len(self._ready))
        self._wake_getter()

    def _wake_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _wake_drainers(self) -> None:
        if self._shutting_down and not self._ready and not self._processing:
            for waiter in self._drainers:
                if not waiter.done():
                    waiter.set_result(None)

    def _compact_heap(self) -> None:
        self._heap = [(at, seq, key) for at, seq, key in self._heap
                      if self._delayed.get(key) == at]
        heapq.heapify(self._heap)

    def _arm_timer(self) -> None:
        """Keep one clock timer set for the earliest live delay."""
        while self._heap and self._delayed.get(self._heap[0][2]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        if not self._heap:
            return
        at = self._heap[0][0]
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self._clock.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = self._clock.monotonic()
        while self._heap and self._heap[0][0] <= now:
            at, _, key = heapq.heappop(self._heap)
            if self._delayed.get(key) == at:
                del self._delayed[key]
                merged = self._delayed_triggers.pop(key, None)
                if merged is not None and not self._shutting_down:
                    pending = self._triggers.get(key)
                    if pending is None:
                        self._triggers[key] = merged
                    else:
                        pending.merge(merged)
                self.add(key)
        self._arm_timer()

    @staticmethod
    def _merge_trigger(into: dict[K, rttriggers.Merged], key: K,
                       trigger: rttriggers.Trigger) -> None:
        merged = into.get(key)
        if merged is None:
            merged = into[key] = rttriggers.Merged()
        merged.add(trigger)
