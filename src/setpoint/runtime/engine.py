"""The controller engine: a work queue of requests and the workers that reconcile them.

An :class:`Engine` owns one :class:`~setpoint.runtime.queue.WorkQueue` of
:class:`~setpoint.runtime.reconcile.Request` s and runs ``workers`` coroutines that take a
request, call the reconciler, and act on the outcome (controller-runtime's rules, see
:mod:`setpoint.runtime.reconcile`):

=========================  ==============================================  ===============
outcome                    queue                                           ``result`` label
=========================  ==============================================  ===============
exception                  ``add_rate_limited`` (backoff grows)            error
:class:`TerminalError`     ``forget`` (not retried)                        error
``Result(requeue=True)``   ``add_rate_limited``                            requeue
``Result(requeue_after)``  ``forget``, then ``add_after``                  requeue_after
``Result.done()``          ``forget`` (then ``add_after`` the poll delay,  success
                           with a ``poll`` config)
:class:`BreakerOpenError`  ``add_after`` until the breaker half-opens      requeue_after
=========================  ==============================================  ===============

(:class:`~setpoint.runtime.budgets.BreakerOpenError`: a budget refused an upstream call; the
object is not at fault, so its backoff does not grow. The poll cadence is
:mod:`setpoint.runtime.polling`.)

What feeds the queue (cache handlers) is the builder's and the manager's business: the engine
only exposes :meth:`Engine.enqueue`. Each add may carry a
:class:`~setpoint.runtime.triggers.Trigger`; the engine adds its own for requeues and retries,
makes the merged triggers of a request visible to its reconcile
(:func:`~setpoint.runtime.triggers.current_triggers`), counts reconciles by cause
(``controller_runtime_reconcile_triggers_total``) and records each reconcile in the
manager's :class:`~setpoint.runtime.history.ReconcileHistory` when given one. After each
reconcile (its request marked done, so the object may already run again) it awaits
``on_reconciled`` when given one: the manager publishes the reconcile as an Event there
(:mod:`~setpoint.runtime.reconcile_events`).

Invariants:

- **One reconcile per object at a time**: the queue never hands a request to two workers at
  once; a request added while it is being reconciled runs again afterwards (once).
- At most ``workers`` reconciles run concurrently (``workers`` is bounded, 1..``MAX_WORKERS``).
- Every worker is a task of the task group inside :meth:`Engine.run`; when ``run`` returns or
  raises, no worker is left. A worker cancelled mid-reconcile marks its request done and
  does not requeue it (whoever cancelled the engine decides what happens next).
- Exceptions from the reconciler never end a worker (they are logged, counted and retried;
  a ``Conflict`` is logged at info level without a traceback: a write guarded by what a
  cache said a step behind is the expected way to meet a concurrent change);
  ``BaseException`` s other than cancellation (``KeyboardInterrupt``, ``SystemExit``) do.
- A worker yields to the event loop after every request, even when the reconcile finished
  without suspending (a queue with ready keys hands them out without waiting): a reconciler
  that requeues itself at once cannot starve the rest of the loop.

With a ``shards`` gate (a sharded manager, :mod:`setpoint.runtime.sharding`), a request for
a key whose shard this replica does not hold is skipped (``skipped``, not counted: nothing
ran), and a reconcile runs in a task of its own that losing the shard cancels (recorded as
an error, not requeued: the shard's new owner reconciles the key).

Non-guarantees: requests are not ordered across objects beyond the queue's FIFO; a request
delayed by ``requeue_after`` or a backoff is dropped when the engine shuts down (the next
run starts from a full relist, so nothing is lost for good).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from setpoint.apimachinery import errors
from setpoint.runtime import budgets as rtbudgets
from setpoint.runtime import clock as rtclock
from setpoint.runtime import deadlines, fairness, polling, ratelimit, reconcile
from setpoint.runtime import history as rthistory
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime import queue as rtqueue
from setpoint.runtime import triggers as rttriggers

#: the most workers one controller may run
MAX_WORKERS = 256
#: controller-runtime's default is 1; two lets one slow object not hold up the rest
DEFAULT_WORKERS = 2

RateLimiterFactory = Callable[[rtclock.AsyncClock], ratelimit.RateLimiter[reconcile.Request]]


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep


def describe_error(error: BaseException) -> str:
    """A reconcile's exception in one line that is never empty: its type, its message, and
    for an exception without one (``TimeoutError()`` from ``asyncio.timeout``, a bare
    ``raise KeyError``) where it was raised."""
    message = str(error)
    name = type(error).__name__
    if message and message != "None":
        return f"{name}: {message}"
    every = traceback.extract_tb(error.__traceback__)
    frames = [f for f in every if not f.filename.startswith(_ASYNCIO_DIR)] or list(every)
    where = f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" \
        if frames else ""
    if isinstance(error, TimeoutError):
        return f"{name}: a timeout expired (asyncio.timeout, wait_for or a deadline){where}"
    return f"{name} (without a message){where}"


#: what :meth:`Engine.process` returns for a key of a shard this replica does not hold (not
#: counted in the metrics: nothing ran)
RESULT_SKIPPED = "skipped"


class _Fenced(Exception):
    """The reconcile was cancelled because its key's shard was lost."""


def check_workers(workers: int) -> int:
    if not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, not {workers!r}")
    return workers


class ShardGate(Protocol):
    """What the engine asks a :class:`~setpoint.runtime.sharding.ShardCoordinator`."""

    def owns(self, key: str) -> bool: ...

    def enter(self, key: str, task: asyncio.Task[Any]) -> bool: ...

    def leave(self, key: str, task: asyncio.Task[Any]) -> None: ...


class Engine:
    """The queue and workers of one controller; see the module docstring."""

    def __init__(self, name: str, reconciler: reconcile.Reconciler, *,
                 workers: int = DEFAULT_WORKERS, clock: rtclock.AsyncClock | None = None,
                 rate_limiter: ratelimit.RateLimiter[reconcile.Request] | None = None,
                 metrics: rtmetrics.MetricsRegistry | None = None,
                 logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
                 history: rthistory.ReconcileHistory | None = None,
                 priority: fairness.PriorityConfig | None = None,
                 poll: polling.PollConfig | None = None,
                 still_exists: Callable[[reconcile.Request], bool] | None = None,
                 rng: random.Random | None = None,
                 shards: ShardGate | None = None,
                 on_reconciled: Callable[[reconcile.Request, rthistory.Entry],
                                         Awaitable[None]] | None = None) -> None:
        self.name = name
        #: called after each reconcile (its request already marked done), e.g. to publish
        #: it as an Event (:mod:`~setpoint.runtime.reconcile_events`); must not raise
        self.on_reconciled = on_reconciled
        #: with sharding: which keys this replica may reconcile now
        self.shards = shards
        #: the poll cadence (None: no polling); ``still_exists`` says whether a request's
        #: object is still there to poll (default: always)
        self.poll = poll
        self._still_exists = still_exists
        self._rng = rng or random.Random()
        self.reconciler = reconciler
        self.workers = check_workers(workers)
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        registry = metrics if metrics is not None else rtmetrics.MetricsRegistry()
        self.metrics = rtmetrics.ControllerMetrics(registry, name)
        self.metrics.set_workers(self.workers)
        queue_metrics = rtmetrics.WorkQueueMetrics(registry, name)
        self.queue: rtqueue.WorkQueue[reconcile.Request] = rtqueue.WorkQueue(
            clock=self._clock, rate_limiter=rate_limiter, metrics=queue_metrics,
            priority=priority)
        queue_metrics.attach(self.queue)
        self.log = logger or logging.getLogger(f"setpoint.runtime.controller.{name}")
        self.history = history

    def enqueue(self, request: reconcile.Request,
                trigger: rttriggers.Trigger | None = None) -> None:
        """Ask for ``request`` to be reconciled (a no-op if it is already waiting, but
        ``trigger`` is merged into its reasons)."""
        self.queue.add(request, trigger)

    async def run(self) -> None:
        """Run the workers until the queue is shut down and empty, or until cancelled."""
        async with asyncio.TaskGroup() as group:
            for i in range(self.workers):
                group.create_task(self._worker(), name=f"{self.name} worker {i}")

    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except rtqueue.ShutDown:
                return
            await self.process(request)
            await asyncio.sleep(0)

    async def process(self, request: reconcile.Request) -> str:
        """Reconcile one request taken from the queue; returns the ``result`` label."""
        label, entry = await self._process(request)
        if entry is not None and self.on_reconciled is not None:
            await self.on_reconciled(request, entry)
        return label

    async def _process(self, request: reconcile.Request
                       ) -> tuple[str, rthistory.Entry | None]:
        if self.shards is not None and not self.shards.owns(request.key):
            # another replica's key (or a shard being handed over): its owner reconciles it
            self.queue.forget(request)
            self.queue.done(request)
            return RESULT_SKIPPED, None
        started = self._clock.monotonic()
        started_at = self._clock.now()
        why = self.queue.triggers(request)
        merged = self.queue.merged_adds(request)
        self.metrics.triggered(why)
        self.metrics.worker_started()
        label = rtmetrics.RESULT_ERROR
        error = ""
        token = rttriggers.set_current(why)
        try:
            try:
                result = await self._call(request)
            except asyncio.CancelledError:
                raise
            except _Fenced:
                self.queue.forget(request)
                error = "cancelled: this replica no longer holds the key's shard"
                self.log.info("reconcile of %s cancelled: its shard was lost", request)
            except rtbudgets.BreakerOpenError as e:
                # the upstream is resting: come back when its breaker half-opens (spread a
                # little, so the waiting objects do not all ask at the same instant)
                delay = e.retry_after * (1.0 + self._rng.uniform(0.0, 0.1))
                self.queue.add_after(request, delay, rttriggers.Trigger(
                    rttriggers.CAUSE_RETRY, detail=f"breaker {e.target} open"))
                label = rtmetrics.RESULT_REQUEUE_AFTER
                error = describe_error(e)
                self.log.info("reconciling %s waits for %s", request, e)
            except reconcile.TerminalError as e:
                self.queue.forget(request)
                self.metrics.error(terminal=True)
                error = describe_error(e)
                self.log.error("terminal error reconciling %s (not retried): %s", request,
                               error, exc_info=e)
            except Exception as e:
                self.queue.add_rate_limited(
                    request, rttriggers.Trigger(rttriggers.CAUSE_RETRY,
                                                detail=type(e).__name__))
                self.metrics.error(terminal=False)
                error = describe_error(e)
                if isinstance(e, errors.Conflict):
                    # optimistic concurrency at work (a write guarded by a resourceVersion
                    # read from a cache a step behind): retried on the fresh object, no bug
                    self.log.info("conflict reconciling %s (retry %d): %s", request,
                                  self.queue.num_requeues(request), error)
                else:
                    self.log.error("error reconciling %s (retry %d): %s", request,
                                   self.queue.num_requeues(request), error, exc_info=e)
            else:
                label = self._settle(request, result)
            seconds = self._clock.monotonic() - started
            self.metrics.reconciled(label, seconds)
            entry = rthistory.Entry(started_at.isoformat(), why, merged, label, seconds, error)
            if self.history is not None:
                self.history.record(self.name, request.key, entry)
            return label, entry
        finally:
            rttriggers.reset_current(token)
            self.metrics.worker_finished()
            self.queue.done(request)

    async def _call(self, request: reconcile.Request) -> reconcile.Result:
        """Call the reconciler; with sharding, in a task of its own that losing the key's
        shard cancels (raising :class:`_Fenced` here, not cancelling the worker)."""
        async def call() -> reconcile.Result:
            outcome: object = self.reconciler.reconcile(request)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return reconcile.as_result(outcome)

        if self.shards is None:
            return await call()
        inner = asyncio.ensure_future(call())
        if not self.shards.enter(request.key, inner):
            inner.cancel()
            await asyncio.wait({inner})
            raise _Fenced
        try:
            return await inner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if inner.cancelled() and (current is None or not current.cancelling()):
                raise _Fenced from None
            raise
        finally:
            self.shards.leave(request.key, inner)

    def _settle(self, request: reconcile.Request, result: reconcile.Result) -> str:
        if result.requeue_after is not None:
            self.queue.forget(request)
            self.queue.add_after(request, result.requeue_after, rttriggers.Trigger(
                rttriggers.CAUSE_REQUEUE_AFTER, detail=f"{result.requeue_after:g}s"))
            return rtmetrics.RESULT_REQUEUE_AFTER
        if result.requeue:
            self.queue.add_rate_limited(request,
                                        rttriggers.Trigger(rttriggers.CAUSE_REQUEUE))
            return rtmetrics.RESULT_REQUEUE
        self.queue.forget(request)
        if self.poll is not None and (self._still_exists is None
                                      or self._still_exists(request)):
            self.queue.add_after(request, self.poll.next_delay(self._rng),
                                 rttriggers.Trigger(rttriggers.CAUSE_POLL))
        return rtmetrics.RESULT_SUCCESS

    def shut_down(self) -> None:
        """Stop accepting requests; workers finish what is ready and then end."""
        self.queue.shut_down()

    async def drain(self, timeout: float | None) -> bool:
        """Shut down and wait up to ``timeout`` for every ready or running request to finish.

        True when everything finished; False on timeout (the caller then cancels :meth:`run`).
        """
        try:
            await deadlines.wait_for(self.queue.shut_down_with_drain(), self._clock, timeout)
        except TimeoutError:
            return False
        return True
