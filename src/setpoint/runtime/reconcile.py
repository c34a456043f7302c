"""The reconcile contract: a key in, a verdict out.

A reconciler is told **which** object needs attention (:class:`Request`: a namespace and a
name), never **what happened** to it. It reads the object's current state (from the cache or
the API), makes the world match it, and returns a :class:`Result`. Reconciliation is
level-based: a deletion is *observed* (the object is gone from the cache), not announced, and
many changes to one object may collapse into one request.

How the workers treat the outcome (controller-runtime's rules):

- an exception: the request is retried after its rate limiter's delay (per-key exponential
  backoff, bounded by an overall token bucket), and counted as an error;
- :class:`TerminalError`: counted (also as an error) and logged, **not** retried; the
  backoff is reset;
- ``Result(requeue_after=s)``: the backoff is reset and the request comes back after ``s``
  seconds (a periodic re-check, e.g. of something outside the cluster);
- ``Result(requeue=True)``: retried through the rate limiter, without counting an error;
- ``Result.done()`` (or returning ``None`` from a function reconciler): the backoff is reset.

Invariants: ``Request`` is hashable and ordered, so it can be a work-queue key; two requests
for the same object are equal. A :class:`Result` is immutable and validated (a delay is
positive).

Non-guarantees: nothing here fetches the object (a reconciler that wants it reads the cache);
a request may arrive for an object that no longer exists, or arrive more than once.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """The object to reconcile; ``namespace`` is ``""`` for a cluster-scoped object."""

    namespace: str
    name: str

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("a request needs a name")

    @property
    def key(self) -> str:
        """The cache key: ``namespace/name``, or ``name`` when cluster-scoped."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def for_object(cls, obj: Mapping[str, Any]) -> Request:
        """The request naming ``obj`` (from its ``metadata``)."""
        metadata = obj.get("metadata") or {}
        name = metadata.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("an object without metadata.name cannot be reconciled")
        return cls(str(metadata.get("namespace") or ""), name)

    @classmethod
    def from_key(cls, key: str) -> Request:
        """The inverse of :attr:`key`."""
        namespace, _, name = key.rpartition("/")
        return cls(namespace, name)

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What the worker does after a successful reconcile; see the module docstring."""

    #: come back after this many seconds (with the backoff reset)
    requeue_after: float | None = None
    #: come back after the rate limiter's delay (no error is counted)
    requeue: bool = False

    def __post_init__(self) -> None:
        if self.requeue_after is not None and not self.requeue_after > 0:
            raise ValueError("requeue_after must be positive (or None)")
        if self.requeue and self.requeue_after is not None:
            raise ValueError("requeue and requeue_after exclude each other")

    @classmethod
    def done(cls) -> Result:
        """Nothing more to do until something changes."""
        return cls()

    @classmethod
    def after(cls, seconds: float) -> Result:
        """Reconcile again in ``seconds`` (a periodic check)."""
        return cls(requeue_after=seconds)


class TerminalError(Exception):
    """A failure that retrying cannot fix (invalid spec, a permanent refusal).

    Raise it from a reconciler to have the request recorded and counted, but not retried.
    The next change to the object brings it back as usual.
    """


@runtime_checkable
class Reconciler(Protocol):
    """Anything with ``async def reconcile(request) -> Result``."""

    async def reconcile(self, request: Request) -> Result:
        """Make the world match the object ``request`` names."""


ReconcileFunc = Callable[[Request], Awaitable[Result | None]]


class FuncReconciler:
    """A :class:`Reconciler` from a plain async function; ``None`` means ``Result.done()``.

    A synchronous function is called on the event loop (it must not block: a
    :class:`~setpoint.runtime.builder.Controller` runs a blocking reconcile in a thread).

    >>> import asyncio
    >>> async def hello(request: Request) -> None:
    ...     print("reconciling", request)
    >>> asyncio.run(FuncReconciler(hello).reconcile(Request("default", "web")))
    reconciling default/web
    Result(requeue_after=None, requeue=False)
    """

    def __init__(self, func: ReconcileFunc | Callable[[Request], Result | None]) -> None:
        self.func = func

    async def reconcile(self, request: Request) -> Result:
        value = self.func(request)
        if inspect.isawaitable(value):
            value = await value
        return as_result(value)

    def __repr__(self) -> str:
        return f"FuncReconciler({getattr(self.func, '__qualname__', self.func)!r})"


def is_async_callable(func: object) -> bool:
    """Whether ``func`` is declared to return an awaitable: an ``async def`` function or
    method, a ``functools.partial`` of one, or an object whose ``__call__`` is one."""
    if inspect.iscoroutinefunction(func):
        return True
    if inspect.isroutine(func) or not callable(func):
        return False
    return inspect.iscoroutinefunction(type(func).__call__)


def as_result(value: object) -> Result:
    """A reconciler's return value as a :class:`Result` (``None`` is ``Result.done()``)."""
    if value is None:
        return Result.done()
    if isinstance(value, Result):
        return value
    raise TypeError(f"a reconciler must return a Result or None, not {type(value).__name__}")


if TYPE_CHECKING:
    async def _noop(request: Request) -> None: ...

    _conforms: Reconciler = FuncReconciler(_noop)
