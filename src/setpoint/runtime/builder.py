"""Declaring a controller: what it is for, what it owns and watches, how it reconciles.

:class:`Controller` is the easy path (controller-runtime's builder)::

    books = (Controller(for_=("example.com/v1", "Book"), reconcile=reconcile_book)
             .owns(("v1", "ConfigMap"))
             .watches("secrets", secret_to_books)
             .with_predicates(predicates.resource_version_changed)
             .with_options(workers=4))

It only *describes* the controller; a :class:`~setpoint.runtime.manager.Manager` runs it.
Resources are named as :class:`setpoint.client.Client` accepts them: an
``(apiVersion, kind)`` pair, a kubectl-style name (``"configmaps"``, ``"books.example.com"``)
or a ``ResourceRef``; they are resolved through discovery when the manager starts.

- ``for_``: changes to these objects enqueue themselves
  (:class:`~setpoint.runtime.handlers.EnqueueSelf`);
- ``owns(kind)``: changes to objects of ``kind`` enqueue their controller owner, when it is
  of the ``for_`` kind (:class:`~setpoint.runtime.handlers.EnqueueOwner`);
- ``watches(kind, mapper)``: changes to objects of ``kind`` enqueue what ``mapper`` returns;
- predicates given to ``for_``/``owns``/``watches`` filter that watch; those given to
  :meth:`Controller.with_predicates` filter every watch of the controller.

The reconcile is either a :class:`~setpoint.runtime.reconcile.Reconciler` (an object with
``async def reconcile(request) -> Result``) or a function ``async def f(request, ctx)``
returning a ``Result`` or ``None``, where ``ctx`` is a :class:`~setpoint.runtime.context.Context`.

**Blocking reconciles**: a reconcile declared with plain ``def`` (a function, or a
``Reconciler`` whose ``reconcile`` is not ``async def``) is detected when the controller is
declared (:attr:`Controller.blocking`) and runs in a thread pool of the controller's own,
with as many threads as it has workers, so blocking SDK calls and CPU work do not stall the
event loop. Such a reconcile calls the async client through
:meth:`~setpoint.runtime.context.Context.run`. If it returns an awaitable anyway (a
wrapper that hides an ``async def``), that is awaited on the event loop.

Invariants: the builder methods return the controller itself (chainable) and only record;
nothing touches the network before :meth:`Controller.resolve`. Options are validated when
set (``workers`` is bounded).

Non-guarantees: changing a controller after a manager has started with it has no effect on
that manager. A thread cannot be cancelled: a blocking reconcile still running when its
controller stops (graceful-shutdown timeout, lost leadership) runs on to its end, unobserved,
possibly while the next leadership term reconciles the same object.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from setpoint import client as sp_client
from setpoint.client import api as client_api
from setpoint.runtime import context as rtcontext
from setpoint.runtime import engine, fairness, handlers, polling, ratelimit
from setpoint.runtime import predicates as preds
from setpoint.runtime import reconcile as rtreconcile

ResourceLike = client_api.ResourceLike
ContextReconcileFunc = Callable[[rtreconcile.Request, rtcontext.Context],
                                Awaitable[rtreconcile.Result | None]]
SyncContextReconcileFunc = Callable[[rtreconcile.Request, rtcontext.Context],
                                    rtreconcile.Result | None]
ReconcileLike = rtreconcile.Reconciler | ContextReconcileFunc | SyncContextReconcileFunc

@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions:
    """How a controller runs."""

    #: concurrent reconciles (of different objects), 1..256
    workers: int = engine.DEFAULT_WORKERS
    #: builds the retry rate limiter from the manager's clock (None: client-go's default,
    #: max(5 ms·2^n ≤ 1000 s per object, 10/s burst 100 overall))
    rate_limiter: engine.RateLimiterFactory | None = None
    #: watch one namespace only (None: all); cluster-scoped resources ignore it
    namespace: str | None = None
    #: the order of ready requests: weighted priority classes (None: plain FIFO); see
    #: :mod:`setpoint.runtime.fairness`
    priority: fairness.PriorityConfig | None = dataclasses.field(
        default_factory=fairness.PriorityConfig)
    #: reconcile every object again every ``interval`` s ± jitter (None: only on events);
    #: see :mod:`setpoint.runtime.polling`
    poll: polling.PollConfig | None = None

    def __post_init__(self) -> None:
        engine.check_workers(self.workers)
        if self.namespace == "":
            raise ValueError("namespace must be a name or None (all namespaces)")


WatchRole = Literal["for", "owns", "watches"]


@dataclass(frozen=True, slots=True)
class WatchSpec:
    """One watched resource, as declared (not yet resolved)."""

    role: WatchRole
    resource: ResourceLike
    handler: handlers.Handler | None  # None for "owns": the owner handler, built on resolve
    predicates: tuple[preds.Predicate, ...] = ()
    metadata_only: bool = False


@dataclass(frozen=True, slots=True)
class ResolvedWatch:
    """A watch whose resource is known: what the manager subscribes to a cache."""

    role: WatchRole
    alias: ResourceLike
    ref: sp_client.ResourceRef
    namespace: str | None
    metadata_only: bool
    handler: handlers.Handler
    predicate: preds.Predicate


@dataclass(frozen=True, slots=True)
class ResolvedController:
    """A controller with its resources resolved through discovery."""

    controller: Controller
    name: str
    ref: sp_client.ResourceRef
    watches: tuple[ResolvedWatch, ...]

    @property
    def primary(self) -> ResolvedWatch:
        return self.watches[0]

    def aliases(self) -> dict[Hashable, sp_client.ResourceRef]:
        return {w.alias: w.ref for w in self.watches if isinstance(w.alias, Hashable)}


def resource_of(resource: ResourceLike | type) -> ResourceLike:
    """A typed resource model (:mod:`setpoint.runtime.typed`) as its ``(apiVersion, kind)``;
    anything else as is."""
    if isinstance(resource, type):
        named = getattr(resource, "api_version_kind", None)
        if callable(named):
            api_version, kind = named()
            return (str(api_version), str(kind))
        raise TypeError(f"{resource!r} is not a typed resource model")
    return resource


class _ContextReconciler:
    """A ``(request, ctx)`` function bound to its context: a Reconciler."""

    def __init__(self, func: ContextReconcileFunc, ctx: rtcontext.Context) -> None:
        self.func = func
        self.ctx = ctx

    async def reconcile(self, request: rtreconcile.Request) -> rtreconcile.Result:
        return rtreconcile.as_result(await self.func(request, self.ctx))


class _ThreadReconciler:
    """A blocking reconcile run in a thread pool: a Reconciler."""

    def __init__(self, call: Callable[[rtreconcile.Request], Any],
                 executor: concurrent.futures.Executor, name: str) -> None:
        self.call = call
        self.executor = executor
        self.name = name

    async def reconcile(self, request: rtreconcile.Request) -> rtreconcile.Result:
        loop = asyncio.get_running_loop()
        # the thread sees this task's context variables (the reconcile's triggers)
        context = contextvars.copy_context()
        value = await loop.run_in_executor(self.executor, context.run, self.call, request)
        if inspect.isawaitable(value):
            value = await value
        return rtreconcile.as_result(value)

    def __repr__(self) -> str:
        return f"_ThreadReconciler({self.name})"


def is_blocking(reconcile: ReconcileLike) -> bool:
    """Whether ``reconcile`` is synchronous (plain ``def``): it then runs in a thread."""
    if isinstance(reconcile, rtreconcile.Reconciler):
        return not rtreconcile.is_async_callable(reconcile.reconcile)
    return not rtreconcile.is_async_callable(reconcile)


class Controller:
    """A controller's declaration; see the module docstring."""

    def __init__(self, for_: ResourceLike | type, reconcile: ReconcileLike, *,
                 name: str | None = None,
                 predicates: Sequence[preds.Predicate] = (), metadata_only: bool = False
                 ) -> None:
        if not (isinstance(reconcile, rtreconcile.Reconciler) or callable(reconcile)):
            raise TypeError("reconcile must be a Reconciler or a (request, ctx) function")
        self.reconcile = reconcile
        #: a plain ``def`` reconcile, run in a thread pool (see the module docstring)
        self.blocking = is_blocking(reconcile)
        self._name = name
        #: the typed resource model ``for_`` named, if it named one
        self.model: type | None = for_ if isinstance(for_, type) else None
        self._watches: list[WatchSpec] = [
            WatchSpec("for", resource_of(for_), handlers.EnqueueSelf(), tuple(predicates),
                      metadata_only)]
        self._filters: tuple[preds.Predicate, ...] = ()
        self._options = ControllerOptions()

    # --- declaring --------------------------------------------------------------------

    def owns(self, resource: ResourceLike | type, *, predicates: Sequence[preds.Predicate] = (),
             metadata_only: bool = False) -> Controller:
        """Reconcile the owner when an object of ``resource`` it controls changes."""
        self._watches.append(WatchSpec("owns", resource_of(resource), None, tuple(predicates),
                                       metadata_only))
        return self

    def watches(self, resource: ResourceLike | type, handler: handlers.Handler | handlers.Mapper, *,
                predicates: Sequence[preds.Predicate] = (),
                metadata_only: bool = False) -> Controller:
        """Reconcile what ``handler`` maps a changed object of ``resource`` to."""
        self._watches.append(WatchSpec("watches", resource_of(resource),
                                       handlers.as_handler(handler),
                                       tuple(predicates), metadata_only))
        return self

    def with_predicates(self, *predicates: preds.Predicate) -> Controller:
        """Filter the events of every watch of this controller."""
        self._filters = (*self._filters, *predicates)
        return self

    def named(self, name: str) -> Controller:
        """The controller's name in logs, metrics and Events (default: the lowercase kind)."""
        if not name:
            raise ValueError("a controller name must not be empty")
        self._name = name
        return self

    def with_options(self, *, workers: int | None = None,
                     rate_limiter: engine.RateLimiterFactory
                     | ratelimit.RateLimiter[rtreconcile.Request] | None = None,
                     namespace: str | None = None,
                     priority: fairness.PriorityConfig | Literal["fifo"] | None = None,
                     poll: polling.PollConfig | float | Literal["off"] | None = None
                     ) -> Controller:
        """Change how the controller runs; arguments left out keep their value.

        ``priority``: a :class:`~setpoint.runtime.fairness.PriorityConfig`, or ``"fifo"``
        for the plain first-in first-out order.
        ``poll``: a :class:`~setpoint.runtime.polling.PollConfig`, a number of seconds (with
        the default 10 % jitter), or ``"off"``.
        ``rate_limiter`` is a factory taking the manager's clock (a fresh limiter each time
        the controller starts), or a limiter to reuse as is.
        """
        changes: dict[str, object] = {}
        if workers is not None:
            changes["workers"] = workers
        if rate_limiter is not None:
            if hasattr(rate_limiter, "when") and hasattr(rate_limiter, "forget"):
                limiter = cast(ratelimit.RateLimiter[rtreconcile.Request], rate_limiter)
                changes["rate_limiter"] = lambda clock: limiter
            else:
                changes["rate_limiter"] = rate_limiter
        if namespace is not None:
            changes["namespace"] = namespace
        if priority == "fifo":
            changes["priority"] = None
        elif priority is not None:
            if not isinstance(priority, fairness.PriorityConfig):
                raise TypeError("priority must be a PriorityConfig or 'fifo'")
            changes["priority"] = priority
        if poll == "off":
            changes["poll"] = None
        elif isinstance(poll, (int, float)) and not isinstance(poll, bool):
            changes["poll"] = polling.PollConfig(interval=float(poll))
        elif isinstance(poll, polling.PollConfig):
            changes["poll"] = poll
        elif poll is not None:
            raise TypeError("poll must be a PollConfig, a number of seconds or 'off'")
        self._options = dataclasses.replace(self._options, **changes)  # type: ignore[arg-type]
        return self

    # --- reading ----------------------------------------------------------------------

    @property
    def options(self) -> ControllerOptions:
        return self._options

    @property
    def name(self) -> str | None:
        """The explicit name, if one was given."""
        return self._name

    @property
    def for_(self) -> ResourceLike:
        return self._watches[0].resource

    @property
    def watch_specs(self) -> tuple[WatchSpec, ...]:
        return tuple(self._watches)

    def __repr__(self) -> str:
        named = f", name={self._name!r}" if self._name else ""
        return f"Controller(for_={self.for_!r}{named})"

    # --- resolving --------------------------------------------------------------------

    async def resolve(self, client: sp_client.Client) -> ResolvedController:
        """Resolve every resource through ``client``'s discovery.

        Raises :class:`setpoint.client.NoMatchError` for a resource the server does not serve.
        """
        primary = await client.resolve(self.for_)
        owner = handlers.EnqueueOwner(group=primary.group, kind=primary.kind,
                                      namespaced=primary.namespaced)
        resolved: list[ResolvedWatch] = []
        for spec in self._watches:
            ref = primary if spec.role == "for" else await client.resolve(spec.resource)
            handler = spec.handler if spec.handler is not None else owner
            predicate = preds.all_of(*self._filters, *spec.predicates)
            namespace = self._options.namespace if ref.namespaced else None
            resolved.append(ResolvedWatch(spec.role, spec.resource, ref, namespace,
                                          spec.metadata_only, handler, predicate))
        return ResolvedController(self, self._name or primary.kind.lower(), primary,
                                  tuple(resolved))

    def reconciler(self, ctx: rtcontext.Context,
                   executor: concurrent.futures.Executor | None = None
                   ) -> rtreconcile.Reconciler:
        """The reconciler the engine calls, with ``ctx`` bound for a function reconcile.

        A blocking reconcile runs in ``executor`` (which the caller owns and shuts down);
        ``ValueError`` when it is missing.
        """
        if self.blocking:
            if executor is None:
                raise ValueError(f"{self!r} has a blocking (plain 'def') reconcile: it needs "
                                 "an executor to run in")
            target = self.reconcile
            if isinstance(target, rtreconcile.Reconciler):
                return _ThreadReconciler(target.reconcile, executor, repr(self))
            func = cast(Callable[[rtreconcile.Request, rtcontext.Context], Any], target)
            return _ThreadReconciler(lambda request: func(request, ctx), executor, repr(self))
        if isinstance(self.reconcile, rtreconcile.Reconciler):
            return self.reconcile
        return _ContextReconciler(cast(ContextReconcileFunc, self.reconcile), ctx)
