"""Runnables: work a manager runs beside its controllers, while it leads.

A :class:`~setpoint.runtime.builder.Controller` is declared up front (what it is for, what
it watches) and the manager builds its cache subscriptions, queue and workers. Some work does
not have that shape: a component that finds out what to watch as it runs (the garbage
collector watches every resource the server serves, including the kinds of CRDs created
later), or a periodic job. Such work is a :class:`Runnable` (controller-runtime's
``manager.Add``): anything with a ``name`` and ``async def run(ctx)``. ::

    class Janitor:
        name = "janitor"

        async def run(self, ctx: RunnableContext) -> None:
            while not ctx.stopping.is_set():
                ...                                   # one sweep through ctx.client
                await ctx.sleep(60)

    await Manager(client, [], runnables=[Janitor()]).run()

The manager starts every runnable when it starts leading (at once without leader election),
after the controllers' caches have synced, as a task of the same task group as the
controllers' workers.

Invariants:

- **Stopping.** When the manager stops, :attr:`RunnableContext.stopping` is set and the
  runnable has the manager's graceful shutdown timeout to return; then it is cancelled.
  When leadership is lost it is cancelled at once (as the controllers' workers are).
- A runnable that **raises** ends the manager's run with that exception, as a failing
  controller would: runnables handle their own retries. One that returns early is finished;
  the manager carries on.
- The context's informers are the manager's :class:`~setpoint.runtime.informer.SharedInformers`:
  an informer a runnable asks for is started at once in the manager's task group and shared
  with every controller and runnable watching the same resource in the same form; the
  manager stops it when it stops.

Non-guarantees: nothing waits for the caches a runnable creates to sync (it waits itself,
with :meth:`~setpoint.runtime.informer.Informer.wait_synced`); nothing restarts a runnable
that returned or failed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from setpoint import client as sp_client
from setpoint.runtime import clock as rtclock
from setpoint.runtime import events, informer
from setpoint.runtime import metrics as rtmetrics


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnableContext:
    """What a runnable gets from its manager."""

    #: the runnable's name (also its event recorder's component)
    name: str
    client: sp_client.Client
    #: the manager's shared informers (see the module docstring)
    informers: informer.SharedInformers
    clock: rtclock.AsyncClock
    metrics: rtmetrics.MetricsRegistry
    recorder: events.EventRecorder
    logger: logging.Logger
    #: set when the manager stops: finish up and return
    stopping: asyncio.Event

    async def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` of clock time, or less if stopping begins; True if stopping."""
        return await self.wait(seconds)

    async def wait(self, seconds: float | None = None, *,
                   event: asyncio.Event | None = None) -> bool:
        """Wait until ``seconds`` of clock time have passed (None: no limit), ``event`` is
        set, or stopping begins, whichever comes first; True when stopping has begun."""
        if self.stopping.is_set() or (event is not None and event.is_set()):
            return self.stopping.is_set()
        waits: set[asyncio.Future[object]] = {asyncio.ensure_future(self.stopping.wait())}
        if event is not None:
            waits.add(asyncio.ensure_future(event.wait()))
        if seconds is not None:
            waits.add(asyncio.ensure_future(rtclock.sleep(self.clock, seconds)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                if not task.done():
                    task.cancel()
            await asyncio.wait(waits)
        return self.stopping.is_set()


@runtime_checkable
class Runnable(Protocol):
    """Work a manager runs while it leads; see the module docstring."""

    @property
    def name(self) -> str:
        """A name, unique among the manager's controllers and runnables."""

    async def run(self, ctx: RunnableContext) -> None:
        """Do the work until ``ctx.stopping`` is set (or for as long as it takes)."""
