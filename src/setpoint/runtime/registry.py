"""An explicit collection of controllers, with decorator sugar.

A :class:`Registry` is a plain object that a module creates and fills; a manager runs what it
holds. There is no default, process-wide registry: two registries never see each other's
controllers, and tests need no reset fixture. ::

    registry = Registry()

    @registry.controller(for_=("example.com/v1", "Book"), owns=[("v1", "ConfigMap")])
    async def reconcile(request: Request, ctx: Context) -> Result:
        ...

The decorator returns the function unchanged (call it directly in tests) and registers a
:class:`~setpoint.runtime.builder.Controller` for it; :meth:`Registry.add` registers a
controller built by hand. :func:`controllers_in` collects the controllers a module defines
(every ``Registry`` and ``Controller`` among its globals), which is how a file of
controllers is loaded and run.

Invariants: registration order is kept; the same controller object is registered once; a
registry never starts anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Literal, TypeVar

from setpoint.runtime import builder, engine, fairness, handlers, polling
from setpoint.runtime import predicates as preds

F = TypeVar("F", bound=builder.ContextReconcileFunc | builder.SyncContextReconcileFunc)


class Registry:
    """Controllers to run together; see the module docstring."""

    def __init__(self, controllers: Iterable[builder.Controller] = ()) -> None:
        self._controllers: list[builder.Controller] = []
        self.add(*controllers)

    def add(self, *controllers: builder.Controller) -> None:
        """Register controllers (one already registered is ignored)."""
        for c in controllers:
            if not isinstance(c, builder.Controller):
                raise TypeError(f"not a Controller: {c!r}")
            if not any(c is known for known in self._controllers):
                self._controllers.append(c)

    def controller(self, *, for_: builder.ResourceLike | type,
                   owns: Sequence[builder.ResourceLike | type] = (),
                   watches: Sequence[tuple[builder.ResourceLike | type,
                                           handlers.Handler | handlers.Mapper]] = (),
                   predicates: Sequence[preds.Predicate] = (), name: str | None = None,
                   workers: int = engine.DEFAULT_WORKERS,
                   rate_limiter: engine.RateLimiterFactory | None = None,
                   namespace: str | None = None,
                   priority: fairness.PriorityConfig | Literal["fifo"] | None = None,
                   poll: polling.PollConfig | float | None = None
                   ) -> Callable[[F], F]:
        """Register the decorated ``async def f(request, ctx)`` as a controller (a plain
        ``def`` runs in a worker thread: see :mod:`setpoint.runtime.builder`).

        ``predicates`` filter every watch of the controller (as ``with_predicates``).
        """
        def register(func: F) -> F:
            c = builder.Controller(for_=for_, reconcile=func, name=name)
            for resource in owns:
                c.owns(resource)
            for resource, handler in watches:
                c.watches(resource, handler)
            c.with_predicates(*predicates)
            c.with_options(workers=workers, rate_limiter=rate_limiter, namespace=namespace,
                           priority=priority, poll=poll)
            self.add(c)
            return func
        return register

    @property
    def controllers(self) -> tuple[builder.Controller, ...]:
        return tuple(self._controllers)

    def __iter__(self) -> Iterator[builder.Controller]:
        return iter(tuple(self._controllers))

    def __len__(self) -> int:
        return len(self._controllers)

    def __repr__(self) -> str:
        return f"Registry({self._controllers!r})"


def controllers_in(namespace: Mapping[str, object]) -> list[builder.Controller]:
    """Every controller a module's globals define, directly or in a :class:`Registry`.

    Pass ``vars(module)``; order follows the globals' (definition) order, without duplicates.
    """
    found = Registry()
    for value in namespace.values():
        if isinstance(value, Registry):
            found.add(*value)
        elif isinstance(value, builder.Controller):
            found.add(value)
    return list(found)
