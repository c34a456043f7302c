"""Runnables: work a manager runs beside its controllers, with its shared informers, against a
real in-process server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from setpoint import runtime
from setpoint.client import Client, ResourceRef
from setpoint.server.server import Server
from tests.integration.runtime.conftest import eventually, running

CM = ("v1", "ConfigMap")


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}}


class Watcher:
    """Watches ConfigMaps through the manager's informers; returns when stopping."""

    name = "watcher"

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.ctx: runtime.RunnableContext | None = None
        self.returned = False

    async def run(self, ctx: runtime.RunnableContext) -> None:
        self.ctx = ctx
        ref = await ctx.client.resolve(CM)
        informer = ctx.informers.informer(ref, metadata_only=True)
        informer.cache.subscribe(runtime.Handlers(
            add=lambda obj: self.seen.append(obj["metadata"]["name"])))
        await informer.wait_synced(5)
        while not await ctx.wait(10):
            pass
        self.returned = True


async def test_a_runnable_shares_the_managers_informers_and_stops_with_it(
        server: Server, client: Client) -> None:
    await client.create(cm("before"))
    watcher = Watcher()
    manager = runtime.Manager(client, [], runnables=[watcher], graceful_shutdown_timeout=2)
    async with running(manager) as task:
        await eventually(lambda: "before" in watcher.seen)
        await client.create(cm("after"))
        await eventually(lambda: "after" in watcher.seen)
        assert watcher.ctx is not None
        assert watcher.ctx.name == "watcher"
        assert watcher.ctx.informers is manager.informers
        assert len(manager.informers) == 1
        assert watcher.ctx.recorder.component == "watcher"
    assert task.done()
    assert task.exception() is None
    assert watcher.returned


class Stubborn:
    """Ignores stopping: the manager cancels it after the graceful timeout."""

    name = "stubborn"

    def __init__(self) -> None:
        self.cancelled = False

    async def run(self, ctx: runtime.RunnableContext) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled = True
            raise


async def test_a_runnable_that_does_not_stop_is_cancelled(client: Client) -> None:
    stubborn = Stubborn()
    manager = runtime.Manager(client, [], runnables=[stubborn], graceful_shutdown_timeout=0.2)
    async with running(manager):
        await asyncio.sleep(0.05)
    assert stubborn.cancelled


class Failing:
    name = "failing"

    async def run(self, ctx: runtime.RunnableContext) -> None:
        raise RuntimeError("broken runnable")


async def test_a_failing_runnable_ends_the_managers_run(client: Client) -> None:
    manager = runtime.Manager(client, [], runnables=[Failing()])
    with pytest.raises(RuntimeError, match="broken runnable"):
        async with asyncio.timeout(10):
            await manager.run()


class Quick:
    name = "quick"

    def __init__(self) -> None:
        self.ran = asyncio.Event()

    async def run(self, ctx: runtime.RunnableContext) -> None:
        self.ran.set()


async def test_a_runnable_may_return_early(client: Client) -> None:
    quick = Quick()
    manager = runtime.Manager(client, [], runnables=[quick])
    async with running(manager) as task:
        await asyncio.wait_for(quick.ran.wait(), 5)
        await asyncio.sleep(0.05)
        assert not task.done()  # the manager carries on


async def test_a_manager_needs_something_to_run_and_unique_names(client: Client) -> None:
    with pytest.raises(ValueError, match="at least one controller or runnable"):
        runtime.Manager(client, [])
    with pytest.raises(TypeError, match="not a Runnable"):
        runtime.Manager(client, [], runnables=[object()])  # type: ignore[list-item]

    async def reconcile(request: runtime.Request, ctx: runtime.Context) -> None:
        return None

    clash = Quick()
    clash.name = "configmap"
    manager = runtime.Manager(client, [runtime.Controller(for_=CM, reconcile=reconcile)],
                              runnables=[clash], cache_sync_timeout=5)
    with pytest.raises(ValueError, match="must be unique"):
        await manager.run()


async def test_context_wait_returns_on_event_timeout_or_stopping(client: Client) -> None:
    stopping = asyncio.Event()
    ctx = runtime.RunnableContext(
        name="w", client=client, informers=runtime.SharedInformers(client),
        clock=runtime.SystemAsyncClock(), metrics=runtime.MetricsRegistry(),
        recorder=runtime.EventRecorder(client, "w"), logger=logging.getLogger(),
        stopping=stopping)
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.02, event.set)
    assert await ctx.wait(5, event=event) is False
    assert event.is_set()
    assert await ctx.sleep(0.01) is False
    asyncio.get_running_loop().call_later(0.02, stopping.set)
    assert await ctx.wait() is True
    assert await ctx.sleep(100) is True  # already stopping: at once


async def test_shared_informers_discard_stops_one_informer(client: Client) -> None:
    informers = runtime.SharedInformers(client)
    ref: ResourceRef = await client.resolve(CM)
    secrets: ResourceRef = await client.resolve(("v1", "Secret"))
    async with asyncio.TaskGroup() as group:
        informers.start(group)
        kept = informers.informer(secrets)
        dropped = informers.informer(ref)
        assert await informers.wait_synced(5)
        await informers.discard(ref)
        await informers.discard(ref)  # already gone: nothing happens
        assert len(informers) == 1
        assert informers.informer(secrets) is kept
        assert informers.informer(ref) is not dropped  # a new one
        await informers.stop()
