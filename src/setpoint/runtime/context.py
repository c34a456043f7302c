"""What a reconcile function gets besides its request: the client, caches, recorder, logger.

The manager builds one :class:`Context` per controller when it starts. A reconcile function
``async def reconcile(request, ctx)`` reads the object it is asked about from ``ctx.cache``
(or :meth:`Context.get`), the objects it owns or watches from :meth:`Context.cache_for`, writes
through ``ctx.client``, and reports with ``ctx.recorder`` and ``ctx.logger``.

Invariants: the caches are the manager's shared informer caches, synced before the first
reconcile; they are never copies, so **objects read from them must not be changed** (deep-copy
first). A context is immutable after construction.

**Read-your-writes**: a cache follows a watch, so right after a write a read from it may
still show the previous state (or no object at all after a create: creating again then
fails with ``AlreadyExists``, or, with ``generateName``, makes a duplicate). Either write with
optimistic concurrency (send the ``resourceVersion`` you read) and treat ``AlreadyExists`` /
``Conflict`` as "look again", or wait for the cache to show the write:
``await ctx.wait_for_cache(written)`` returns once the cache of the written object's kind has
applied the write's resourceVersion (a positive signal from the watch, not a sleep), and
raises ``TimeoutError`` with a message saying what it waited for after ``timeout`` seconds.

**Blocking code**: a reconcile declared with plain ``def`` runs in a worker thread of its
controller (see :mod:`setpoint.runtime.builder`); from there :meth:`Context.run` runs a
coroutine (a client call) on the manager's event loop and returns its result.

Non-guarantees: a cache may be behind the server (see above); waiting for a write of a kind
or namespace the controller does not watch never succeeds (it times out).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Hashable, Mapping
from typing import Any, Protocol, TypeVar

from setpoint import client as sp_client
from setpoint.runtime import budgets as rtbudgets
from setpoint.runtime import clock as rtclock
from setpoint.runtime import deadlines, events, reconcile
from setpoint.runtime import informercache as rtcache
from setpoint.runtime import triggers as rttriggers

T = TypeVar("T")
M = TypeVar("M", bound="TypedModel")


class TypedModel(Protocol):
    """A typed resource model (:class:`setpoint.runtime.typed.Resource`), as the context
    needs it: its ``(apiVersion, kind)`` and a parser of API objects."""

    @classmethod
    def api_version_kind(cls) -> tuple[str, str]: ...

    @classmethod
    def from_object(cls: type[M], obj: Mapping[str, Any]) -> M: ...

#: how long :meth:`Context.wait_for_cache` waits by default, in seconds
DEFAULT_CACHE_WAIT = 10.0

Obj = Mapping[str, Any]


class Context:
    """The client, caches, event recorder and logger of one controller."""

    def __init__(self, *, name: str, client: sp_client.Client, resource: sp_client.ResourceRef,
                 cache: rtcache.Cache, recorder: events.EventRecorder,
                 logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
                 caches: Mapping[sp_client.ResourceRef, rtcache.Cache] | None = None,
                 aliases: Mapping[Hashable, sp_client.ResourceRef] | None = None,
                 clock: rtclock.AsyncClock | None = None,
                 budgets: rtbudgets.Budgets | None = None) -> None:
        self.name = name
        self.client = client
        #: the resource the controller is for
        self.resource = resource
        #: the cache of that resource
        self.cache = cache
        self.recorder = recorder
        self.logger = logger
        self._caches = dict(caches or {})
        self._caches.setdefault(resource, cache)
        self._aliases = dict(aliases or {})
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._budgets = budgets if budgets is not None else rtbudgets.Budgets(clock=self._clock)
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @property
    def caches(self) -> Mapping[sp_client.ResourceRef, rtcache.Cache]:
        """Every cache the controller watches, by resource."""
        return dict(self._caches)

    @property
    def triggers(self) -> tuple[rttriggers.Trigger, ...]:
        """Why the reconcile running now (in this task or worker thread) runs: the triggers
        merged into its request (see :mod:`setpoint.runtime.triggers`)."""
        return rttriggers.current_triggers()

    def budget(self, target: str) -> rtbudgets.Call:
        """One call to the external ``target`` through its budget (declared with
        ``Manager(budgets={target: BudgetConfig(...)})``, shared by every controller of the
        manager): ``async with ctx.budget("queues") as call: ...``. See
        :mod:`setpoint.runtime.budgets`; ``KeyError`` for an undeclared target."""
        return self._budgets[target].call()

    def get(self, request: reconcile.Request) -> Obj | None:
        """The object ``request`` names, from the cache; None when it does not exist."""
        return self.cache.get(request.key)

    def get_as(self, model: type[M], request: reconcile.Request) -> M | None:
        """The object ``request`` names, from the cache of ``model``'s kind, as a typed
        :class:`~setpoint.runtime.typed.Resource` (None when it does not exist).

        An object that does not fit the model (the server accepted what the model refuses,
        e.g. a Python validator the CRD cannot express) raises
        :class:`~setpoint.runtime.reconcile.TerminalError`: retrying cannot fix it.
        """
        obj = self.cache_for(model.api_version_kind()).get(request.key)
        if obj is None:
            return None
        try:
            return model.from_object(obj)
        except ValueError as e:  # pydantic's ValidationError is a ValueError
            raise reconcile.TerminalError(
                f"{request} does not fit {getattr(model, '__qualname__', model)}: {e}") from e

    def cache_for(self, resource: sp_client.ResourceRef | tuple[str, str] | str
                  ) -> rtcache.Cache:
        """The cache of a watched resource: as it was named to the builder, as a
        ``(apiVersion, kind)`` pair, a ``ResourceRef``, or a plural / ``plural.group`` name.
        """
        if isinstance(resource, sp_client.ResourceRef) and resource in self._caches:
            return self._caches[resource]
        ref = self._aliases.get(resource)
        if ref is not None and ref in self._caches:
            return self._caches[ref]
        for ref, cache in self._caches.items():
            if isinstance(resource, tuple):
                if (ref.api_version, ref.kind) == tuple(resource):
                    return cache
            elif isinstance(resource, str) and (
                    ref.matches(resource) or resource in (f"{ref.resource}.{ref.group}",
                                                          f"{ref.resource}.{ref.version}."
                                                          f"{ref.group}")):
                return cache
        raise KeyError(f"controller {self.name} does not watch {resource!r}")

    def _cache_of_object(self, obj: Obj) -> rtcache.Cache:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if isinstance(api_version, str) and isinstance(kind, str):
            try:
                return self.cache_for((api_version, kind))
            except KeyError:
                raise KeyError(f"controller {self.name} does not watch {api_version} {kind}: "
                               "its cache can never show this write") from None
        return self.cache

    async def wait_for_cache(self, written: Obj | str, *,
                             resource: sp_client.ResourceRef | tuple[str, str] | str
                             | None = None,
                             timeout: float | None = DEFAULT_CACHE_WAIT) -> None:
        """Wait until the cache shows a write: ``written`` is the object a write returned
        (its kind picks the cache; pass ``resource`` for an object without ``kind``), or
        a resourceVersion (of the ``for_`` kind, unless ``resource`` says otherwise).

        Returns once that cache has applied the write's resourceVersion, so
        ``ctx.get(...)`` / ``cache.get(...)`` show the write or something newer.
        ``TimeoutError`` after ``timeout`` seconds; ``KeyError`` for a kind the controller
        does not watch; ``ValueError`` for a write without an integer resourceVersion.
        """
        if isinstance(written, str):
            rv: object = written
            cache = self.cache if resource is None else self.cache_for(resource)
        else:
            rv = (written.get("metadata") or {}).get("resourceVersion")
            cache = (self.cache_for(resource) if resource is not None
                     else self._cache_of_object(written))
        rv_text = str(rv)
        rtcache.parse_resource_version(rv_text)
        if cache.has_seen(rv_text):
            return
        try:
            await deadlines.wait_for(cache.wait_for_resource_version(rv_text), self._clock,
                                     timeout)
        except TimeoutError:
            raise TimeoutError(
                f"controller {self.name}: the cache did not reach resourceVersion {rv_text} "
                f"within {timeout:g}s (it is at {cache.resource_version}); is the write of a "
                "kind and namespace this controller watches?") from None

    def run(self, awaitable: Awaitable[T] | Coroutine[Any, Any, T],
            timeout: float | None = None) -> T:
        """From a synchronous reconcile's worker thread: run ``awaitable`` (a client call,
        ``wait_for_cache``, ...) on the manager's event loop and return its result.

        ``RuntimeError`` when called on the event loop's own thread (``await`` it there).
        """
        loop = self._loop
        if loop is None:
            raise RuntimeError("this context was made outside an event loop")
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is loop:
            raise RuntimeError("Context.run() is for synchronous reconciles in worker "
                               "threads; in an async reconcile, await the call instead")

        async def wrapped() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapped(), loop).result(timeout)

