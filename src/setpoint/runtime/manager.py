"""The manager: runs a set of controllers, their shared caches, probes, metrics and election.

:meth:`Manager.run` does, in order:

1. serves ``/healthz``, ``/readyz`` and ``/metrics`` (aiohttp; port 0 picks a free port, see
   :attr:`Manager.health_url` and :attr:`Manager.metrics_url`), and beside ``/metrics``
   ``/debug/reconciles``: the bounded history of recent reconciles and their triggers
   (:mod:`~setpoint.runtime.history`); a port that cannot be listened on raises
   :class:`ListenError`;
2. resolves every controller's resources through discovery (retried until
   ``cache_sync_timeout``, so a CRD installed just after start is waited for);
3. starts one shared informer per (resource, namespace, form) and waits until all have
   listed, at most ``cache_sync_timeout`` (then it fails with :class:`CacheSyncTimeoutError`);
   ``/readyz`` answers 200 from then on, whether or not this replica leads;
4. without leader election, runs the controllers and the runnables
   (:mod:`~setpoint.runtime.runnable`); with it, competes for the Lease and runs them only
   while leading; with ``sharding`` (instead), runs them at once and reconciles only the
   keys of the shards this replica holds (:mod:`~setpoint.runtime.sharding`). Losing the
   Lease cancels the controllers at once; the manager then competes again, with its
   caches still warm;
5. on :meth:`Manager.stop`, a stop signal, or cancellation of ``run``: stops accepting new
   work, lets the workers finish what is queued within ``graceful_shutdown_timeout`` (then
   cancels them), releases the Lease if configured, stops the informers and the HTTP server.

Invariants: every task the manager starts belongs to a task group inside :meth:`run`; when
``run`` returns or raises, nothing it started is still running and its HTTP ports are closed.
Each leadership term gets fresh work queues; handlers are subscribed to the caches for the
term only, and their first notifications enqueue every cached object (an initial full
reconcile). Cancelling ``run`` shuts down gracefully (bounded by the timeout) before the
cancellation propagates.

Non-guarantees: work delayed in a queue (``requeue_after``, backoffs) is dropped at shutdown
or loss of leadership; the next term's full reconcile covers it. See
:mod:`setpoint.runtime.leaderelection` for what leader election does not guarantee.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import signal
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import TypeVar

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.runtime import budgets as rtbudgets
from setpoint.runtime import (
    builder,
    deadlines,
    engine,
    events,
    handlers,
    informer,
    leaderelection,
    listwatch,
)
from setpoint.runtime import clock as rtclock
from setpoint.runtime import context as rtcontext
from setpoint.runtime import history as rthistory
from setpoint.runtime import informercache as rtcache
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime import reconcile as rtreconcile
from setpoint.runtime import reconcile_events as rtpublish
from setpoint.runtime import registry as rtregistry
from setpoint.runtime import runnable as rtrunnable
from setpoint.runtime import sharding as rtsharding
from setpoint.runtime import triggers as rttriggers

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: controller-runtime's defaults
DEFAULT_CACHE_SYNC_TIMEOUT = 120.0
DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT = 30.0
#: reconciles are published as Events unless a manager is given ``reconcile_events=None``
DEFAULT_RECONCILE_EVENTS = rtpublish.ReconcileEventsConfig()


class CacheSyncTimeoutError(TimeoutError):
    """The informers did not list everything within the cache sync timeout."""


class ListenError(OSError):
    """A probe or metrics port could not be listened on (in use, not permitted, ...)."""


class _Stopped(Exception):
    """A stop was requested while waiting for something else."""


class _Term:
    """One controller during one leadership term: its engine and cache subscriptions."""

    def __init__(self, bound: _Bound, clock: rtclock.AsyncClock,
                 metrics: rtmetrics.MetricsRegistry,
                 history: rthistory.ReconcileHistory | None = None,
                 rng: random.Random | None = None,
                 shards: engine.ShardGate | None = None) -> None:
        controller = bound.resolved.controller
        options = controller.options
        limiter = options.rate_limiter(clock) if options.rate_limiter else None
        #: the threads of a blocking reconcile, one per worker (None for async ones)
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        if controller.blocking:
            self.executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=options.workers, thread_name_prefix=f"reconcile-{bound.name}")
        self.engine = engine.Engine(bound.name, controller.reconciler(bound.ctx, self.executor),
                                    workers=options.workers, clock=clock, rate_limiter=limiter,
                                    metrics=metrics, logger=bound.ctx.logger, history=history,
                                    priority=options.priority, poll=options.poll,
                                    still_exists=lambda r: bound.ctx.cache.get(r.key)
                                    is not None, rng=rng, shards=shards,
                                    on_reconciled=bound.reconciled)
        self.subscriptions: list[rtcache.Subscription] = []
        for watch, inf in zip(bound.resolved.watches, bound.informers, strict=True):
            handler = handlers.QueueingHandler(watch.handler, self.engine.enqueue,
                                               predicate=watch.predicate, name=bound.name,
                                               watch=f"{watch.role} {watch.ref.kind}")
            handler.initial = True  # what the cache replays on subscribing is the initial set
            try:
                self.subscriptions.append(inf.cache.subscribe(handler))
            finally:
                handler.initial = False

    def close(self) -> None:
        for subscription in self.subscriptions:
            subscription.cancel()
        self.subscriptions.clear()
        self.engine.shut_down()

    def finish(self) -> None:
        """After the workers ended: release the threads (a running one is not waited for)."""
        self.close()
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)


class _Bound:
    """A resolved controller with its informers and context."""

    def __init__(self, resolved: builder.ResolvedController, infs: list[informer.Informer],
                 ctx: rtcontext.Context,
                 publisher: rtpublish.ReconcileEvents | None = None) -> None:
        self.resolved = resolved
        self.name = resolved.name
        self.informers = infs
        self.ctx = ctx
        #: publishes its reconciles as Events (None: not published)
        self.publisher = publisher

    async def reconciled(self, request: rtreconcile.Request, entry: rthistory.Entry) -> None:
        """Publish one reconcile of an object still in the cache (a deleted one is not)."""
        if self.publisher is None:
            return
        obj = self.ctx.cache.get(request.key)
        if obj is None:
            return
        ref = self.resolved.ref
        await self.publisher.publish({**obj, "apiVersion": ref.api_version, "kind": ref.kind},
                                     entry)


class Manager:
    """Runs controllers; see the module docstring.

    ``controllers``: a :class:`~setpoint.runtime.registry.Registry` or any iterable of
    :class:`~setpoint.runtime.builder.Controller`; ``runnables``: any
    :class:`~setpoint.runtime.runnable.Runnable` s to run beside them (a manager needs at least
    one controller or runnable). ``health_port`` / ``metrics_port``: None
    serves nothing, 0 a free port; the same non-zero port serves all three endpoints on one
    server. ``reconcile_events``: how each controller publishes its reconciles as
    ``events.k8s.io/v1`` Events (:mod:`~setpoint.runtime.reconcile_events`; on by default,
    bounded per object; None: not published).
    """

    def __init__(self, client: sp_client.Client,
                 controllers: rtregistry.Registry | Iterable[builder.Controller], *,
                 leader_election: leaderelection.LeaderElectionConfig | None = None,
                 health_port: int | None = None, metrics_port: int | None = None,
                 host: str = "127.0.0.1", clock: rtclock.AsyncClock | None = None,
                 rng: random.Random | None = None,
                 cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
                 graceful_shutdown_timeout: float = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT,
                 watcher_config: listwatch.WatcherConfig | None = None,
                 runnables: Iterable[rtrunnable.Runnable] = (),
                 clients: Mapping[str, sp_client.Client] | None = None,
                 history: rthistory.HistoryConfig | None = None,
                 budgets: Mapping[str, rtbudgets.BudgetConfig] | None = None,
                 sharding: rtsharding.ShardingConfig | None = None,
                 reconcile_events: rtpublish.ReconcileEventsConfig | None =
                 DEFAULT_RECONCILE_EVENTS) -> None:
        self.client = client
        #: how reconciles are published as Events (None: they are not)
        self.reconcile_events = reconcile_events
        #: per controller or runnable name, the client its writes and Events go through
        #: (its own identity, as kube-controller-manager gives each controller its own
        #: ServiceAccount); the shared caches read through ``client``
        self.clients: dict[str, sp_client.Client] = dict(clients or {})
        self.controllers: tuple[builder.Controller, ...] = tuple(controllers)
        self.runnables: tuple[rtrunnable.Runnable, ...] = tuple(runnables)
        if not self.controllers and not self.runnables:
            raise ValueError("a manager needs at least one controller or runnable")
        for r in self.runnables:
            if not isinstance(r, rtrunnable.Runnable):
                raise TypeError(f"not a Runnable: {r!r}")
        if cache_sync_timeout <= 0 or graceful_shutdown_timeout <= 0:
            raise ValueError("timeouts must be positive")
        for port in (health_port, metrics_port):
            if port is not None and not 0 <= port <= 65535:
                raise ValueError(f"port out of range: {port}")
        self.leader_election = leader_election
        if sharding is not None:
            if leader_election is not None:
                raise ValueError("a manager is either sharded or leader-elected, not both")
            blocking = [repr(c) for c in self.controllers if c.blocking]
            if blocking:
                raise ValueError(f"sharding cancels the reconciles of a lost shard, which a "
                                 f"blocking (plain 'def') reconcile cannot be: {blocking}")
        self.sharding = sharding
        #: with ``sharding``: this replica's shards (while running)
        self.shards: rtsharding.ShardCoordinator | None = None
        self._health_port = health_port
        self._metrics_port = metrics_port
        self._host = host
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._rng = rng or random.Random()
        self._sync_timeout = cache_sync_timeout
        self._shutdown_timeout = graceful_shutdown_timeout
        self.metrics = rtmetrics.MetricsRegistry()
        #: the recent reconciles of each object (served on ``/debug/reconciles``)
        self.history = rthistory.ReconcileHistory(history)
        #: the external-API budgets every controller and runnable of this manager shares,
        #: by target name (:mod:`~setpoint.runtime.budgets`; ``ctx.budget(name)``)
        self.budgets = rtbudgets.Budgets(budgets, clock=self._clock, metrics=self.metrics)
        # the engines of the current leadership term, by controller name
        self._engines: dict[str, engine.Engine] = {}
        self.informers = informer.SharedInformers(client, clock=self._clock,
                                                  config=watcher_config, rng=self._rng)
        self.elector: leaderelection.LeaderElector | None = None
        if leader_election is not None:
            self.elector = leaderelection.LeaderElector(
                leaderelection.ClientLeaseAPI(client), leader_election, clock=self._clock,
                rng=self._rng, metrics=self.metrics)
        self._bound: list[_Bound] = []
        self._stop: asyncio.Event | None = None
        self._ready = asyncio.Event()
        self._running = False
        self._urls: dict[str, str] = {}
        self._instance = ""

    # --- observing ---------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once every cache has synced (what ``/readyz`` reports)."""
        return self._ready.is_set()

    async def wait_ready(self, timeout: float | None = None) -> None:
        """Wait until :attr:`ready`; ``TimeoutError`` after ``timeout`` seconds of clock time."""
        await deadlines.wait_for(self._ready.wait(), self._clock, timeout)

    @property
    def is_leader(self) -> bool:
        """Whether this manager runs its controllers now (always, without election)."""
        if self.elector is None:
            return self.ready and self._running
        return self.elector.is_leader

    @property
    def health_url(self) -> str | None:
        return self._urls.get("health")

    @property
    def metrics_url(self) -> str | None:
        return self._urls.get("metrics")

    def context(self, name: str) -> rtcontext.Context:
        """The context of the running controller called ``name``."""
        for bound in self._bound:
            if bound.name == name:
                return bound.ctx
        raise KeyError(f"no running controller named {name!r}")

    def reconcile_now(self, controller: str, request: rtreconcile.Request,
                      reason: str = "") -> bool:
        """Ask ``controller`` to reconcile ``request`` now (trigger ``external``, with
        ``reason`` as its detail). False when this manager does not run the controller at
        the moment (not started, stopping, or not the leader); ``KeyError`` for a name no
        controller has."""
        if controller not in {b.name for b in self._bound}:
            raise KeyError(f"no controller named {controller!r}")
        running = self._engines.get(controller)
        if running is None or running.queue.shutting_down:
            return False
        running.enqueue(request, rttriggers.Trigger(rttriggers.CAUSE_EXTERNAL, detail=reason))
        return True

    # --- stopping ----------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to shut down gracefully (safe to call from a signal handler)."""
        if self._stop is not None:
            self._stop.set()

    # --- running -----------------------------------------------------------------------

    async def run(self, *, stop_signals: Sequence[int] = ()) -> None:
        """Run until stopped; ``stop_signals`` (e.g. ``SIGTERM``) call :meth:`stop`."""
        if self._running:
            raise RuntimeError("the manager is already running")
        self._running = True
        self._stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in stop_signals:
            loop.add_signal_handler(sig, self.stop)
        try:
            async with asyncio.TaskGroup() as group:
                body = group.create_task(self._body(), name="manager")
                try:
                    await asyncio.wait({body})
                except asyncio.CancelledError:
                    self.stop()
                    try:
                        async with deadlines.deadline(self._clock, self._shutdown_timeout + 5):
                            await asyncio.wait({body})
                    except TimeoutError:
                        body.cancel()
                    raise
        except BaseExceptionGroup as group_error:
            raise _sole(group_error) from None
        finally:
            for sig in stop_signals:
                loop.remove_signal_handler(sig)
            self._ready.clear()
            self._running = False
            self._urls.clear()

    async def _until_stopped(self, group: asyncio.TaskGroup, aw: Awaitable[T]) -> T:
        """Await ``aw`` in ``group``; raise :class:`_Stopped` if a stop comes first."""
        assert self._stop is not None
        work = group.create_task(_as_coroutine(aw))
        stopper = group.create_task(self._stop.wait())
        try:
            await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            if not work.done():
                work.cancel()
                await asyncio.wait({work})
        if work.cancelled():
            raise _Stopped
        return work.result()

    async def _body(self) -> None:
        async with contextlib.AsyncExitStack() as stack:
            await self._start_servers(stack)
            async with asyncio.TaskGroup() as group:
                try:
                    await self._until_stopped(group, self._bind())
                    self.informers.start(group)
                    try:
                        await self._until_stopped(group, self._wait_synced())
                        self._ready.set()
                        logger.info("caches synced; starting %d controller(s)", len(self._bound))
                        if self.sharding is not None:
                            await self._run_sharded(group, self.sharding)
                        elif self.elector is None:
                            await self._lead()
                        else:
                            await self._campaign(group)
                    finally:
                        await self.informers.stop()
                except _Stopped:
                    pass

    async def _bind(self) -> None:
        """Resolve the controllers (retrying until the sync timeout) and build their caches."""
        started = self._clock.monotonic()
        delay = 0.2
        while True:
            try:
                resolved = [await c.resolve(self.client) for c in self.controllers]
                break
            except (sp_client.NoMatchError, errors.ApiError) as e:
                if self._clock.monotonic() - started + delay > self._sync_timeout:
                    raise
                logger.info("resolving resources failed (retrying in %.1fs): %s", delay, e)
                await rtclock.sleep(self._clock, delay)
                delay = min(delay * 2, 5.0)
        names = [r.name for r in resolved] + [r.name for r in self.runnables]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"controller names must be unique: {duplicates} (use .named())")
        instance = (self.leader_election.identity if self.leader_election
                    else leaderelection.default_identity())
        self._instance = instance
        self._bound = []
        for r in resolved:
            infs = [self.informers.informer(w.ref, namespace=w.namespace,
                                            metadata_only=w.metadata_only) for w in r.watches]
            # a full cache wins over a metadata-only one of the same resource
            pairs = sorted(zip(r.watches, infs, strict=True),
                           key=lambda pair: not pair[0].metadata_only)
            caches = {w.ref: inf.cache for w, inf in pairs}
            log = logging.getLogger(f"setpoint.runtime.controller.{r.name}")
            writer = self.clients.get(r.name, self.client)
            ctx = rtcontext.Context(
                name=r.name, client=writer, resource=r.ref, cache=infs[0].cache,
                recorder=events.EventRecorder(writer, r.name, instance=instance,
                                              clock=self._clock),
                logger=log, caches=caches, aliases=r.aliases(), clock=self._clock,
                budgets=self.budgets)
            publisher = None
            if self.reconcile_events is not None:
                publisher = rtpublish.ReconcileEvents(
                    writer, r.name, instance=instance, clock=self._clock,
                    config=self.reconcile_events)
            self._bound.append(_Bound(r, infs, ctx, publisher))

    async def _wait_synced(self) -> None:
        if not await self.informers.wait_synced(self._sync_timeout):
            raise CacheSyncTimeoutError(
                f"caches not synced within {self._sync_timeout:g}s: "
                + ", ".join(self.informers.unsynced()))

    def _runnable_context(self, runnable: rtrunnable.Runnable,
                          stopping: asyncio.Event) -> rtrunnable.RunnableContext:
        name = runnable.name
        writer = self.clients.get(name, self.client)
        return rtrunnable.RunnableContext(
            name=name, client=writer, informers=self.informers, clock=self._clock,
            metrics=self.metrics,
            recorder=events.EventRecorder(writer, name, instance=self._instance,
                                          clock=self._clock),
            logger=logging.getLogger(f"setpoint.runtime.runnable.{name}"), stopping=stopping)

    async def _lead(self) -> None:
        """Run every controller and runnable until a stop is requested, then drain
        (bounded)."""
        assert self._stop is not None
        terms = [_Term(bound, self._clock, self.metrics, self.history, self._rng,
                       self.shards)
                 for bound in self._bound]
        self._engines = {term.engine.name: term.engine for term in terms}
        stopping = asyncio.Event()
        try:
            async with asyncio.TaskGroup() as group:
                runs = [group.create_task(t.engine.run(), name=f"controller {t.engine.name}")
                        for t in terms]
                extra = [group.create_task(r.run(self._runnable_context(r, stopping)),
                                           name=f"runnable {r.name}")
                         for r in self.runnables]
                runs += extra
                await self._stop.wait()
                stopping.set()
                for term in terms:
                    term.close()
                try:
                    async with deadlines.deadline(self._clock, self._shutdown_timeout):
                        for term in terms:
                            await term.engine.queue.shut_down_with_drain()
                        if extra:
                            await asyncio.wait(extra)
                except TimeoutError:
                    logger.warning("work not finished within %gs; cancelling it",
                                   self._shutdown_timeout)
                    for run in runs:
                        run.cancel()
        finally:
            self._engines = {}
            for term in terms:
                term.finish()

    async def _run_sharded(self, group: asyncio.TaskGroup,
                           config: rtsharding.ShardingConfig) -> None:
        """Keep this replica's shard Leases while the controllers run; the controllers
        reconcile only the keys of the shards held (see :mod:`~setpoint.runtime.sharding`).
        """
        # the budgets are the operator's: this replica uses the part of them that the
        # shards it holds are of all the shards (at least one shard's part)
        def share(held: int) -> None:
            self.budgets.set_share(max(held, 1) / config.shards)

        share(0)
        self.shards = rtsharding.ShardCoordinator(self.client, config, clock=self._clock,
                                                  rng=self._rng,
                                                  on_acquired=self._enqueue_shard,
                                                  on_held=share)
        keeper = group.create_task(self.shards.run(), name=f"shards {config.name}")
        try:
            await self._lead()
        finally:
            keeper.cancel()
            await asyncio.wait({keeper})

    def _enqueue_shard(self, shard: int) -> None:
        """A shard was acquired: reconcile every cached object of it (trigger ``initial``)."""
        assert self.shards is not None
        for bound in self._bound:
            running = self._engines.get(bound.name)
            if running is None:
                continue
            for key in bound.ctx.cache.keys():  # noqa: SIM118 (a Cache, not a dict)
                if self.shards.shard(key) == shard:
                    running.enqueue(rtreconcile.Request.from_key(key), rttriggers.Trigger(
                        rttriggers.CAUSE_INITIAL, detail=f"shard {shard} acquired"))

    async def _campaign(self, group: asyncio.TaskGroup) -> None:
        """Compete for the Lease, lead while holding it, and compete again after a loss."""
        assert self._stop is not None
        assert self.elector is not None
        elector = self.elector
        while not self._stop.is_set():
            election = group.create_task(elector.run(self._lead), name="leader election")
            stopper = group.create_task(self._stop.wait())
            await asyncio.wait({election, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not election.done() and not elector.is_leader:
                election.cancel()  # stopping while a follower: nothing to hand over
            await asyncio.wait({election})
            stopper.cancel()
            if not election.cancelled() and not election.result():
                logger.warning("lost the lease %s; controllers stopped, competing again",
                                   elector.config.lease_name)

    async def _start_servers(self, stack: contextlib.AsyncExitStack) -> None:
        health, metrics = self._health_port, self._metrics_port
        if health is not None and health == metrics and health != 0:
            url = await self._serve(stack, health, {"health", "metrics"})
            self._urls.update(health=url, metrics=url)
            return
        if health is not None:
            self._urls["health"] = await self._serve(stack, health, {"health"})
        if metrics is not None:
            self._urls["metrics"] = await self._serve(stack, metrics, {"metrics"})

    async def _serve(self, stack: contextlib.AsyncExitStack, port: int,
                     endpoints: set[str]) -> str:
        # imported here: aiohttp's server is for managers that serve probes or metrics
        from setpoint.runtime import managerhttp

        served = managerhttp.Endpoints(lambda: self.ready, self.metrics, self.history,
                                       lambda: {b.name for b in self._bound})
        try:
            return await managerhttp.serve(stack, served, self._host, port, endpoints)
        except OSError as e:
            what = " and ".join(sorted(endpoints))
            reason = (os.strerror(e.errno) if e.errno else e.strerror or str(e)
                      or type(e).__name__)
            raise ListenError(e.errno, f"cannot serve {what} on {self._host}:{port}: "
                                       f"{reason}") from e


def _sole(error: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception nested task groups wrapped, or the group when there are several."""
    found: BaseException = error
    while isinstance(found, BaseExceptionGroup) and len(found.exceptions) == 1:
        found = found.exceptions[0]
    return found


async def _as_coroutine(aw: Awaitable[T]) -> T:
    return await aw


#: the signals ``run`` should stop on in a command-line program
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
