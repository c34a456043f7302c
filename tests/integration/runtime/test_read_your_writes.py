"""Read-your-writes and blocking reconciles, against the real in-process server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from setpoint.client import Client
from setpoint.runtime import Context, Manager, Registry, Request, Result
from setpoint.server.server import Server

from .conftest import BOOK, book, eventually, install_books, make_client, running

CM = ("v1", "ConfigMap")


def config_map(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": data}


async def test_wait_for_cache_shows_the_controllers_own_write(server: Server,
                                                              client: Client) -> None:
    """The double create the cache lag causes, and how ``wait_for_cache`` closes it: after
    the wait, the cache holds the ConfigMap this reconcile created, so a second reconcile
    of the same book (requested at once) does not create it again."""
    await install_books(client)
    registry = Registry()
    creates: list[str] = []
    seen_after_wait: list[bool] = []

    @registry.controller(for_=BOOK, owns=[CM], workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        if ctx.get(request) is None:
            return Result.done()
        configmaps = ctx.cache_for(CM)
        if configmaps.get(f"default/{request.name}-index") is None:
            written = await ctx.client.create(config_map(f"{request.name}-index"))
            creates.append(request.name)
            await ctx.wait_for_cache(written)
            seen_after_wait.append(
                configmaps.get(f"default/{request.name}-index") is not None)
            return Result(requeue=True)  # come straight back: the cache must show it now
        return Result.done()

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, registry)
        async with running(manager):
            await client.create(book("dune"))
            await eventually(lambda: len(seen_after_wait) == 1)
            ctx = manager.context("book")
            # the requeue ran and found the ConfigMap instead of creating it again
            await eventually(
                lambda: manager.metrics.get("controller_runtime_reconcile_total")
                .value("book", "success") >= 1)  # type: ignore[union-attr]
    assert creates == ["dune"]
    assert seen_after_wait == [True]
    assert ctx.cache.resource_version is not None


async def test_wait_for_cache_on_an_unwatched_kind_fails_clearly(server: Server,
                                                                 client: Client) -> None:
    await install_books(client)
    registry = Registry()
    failures: list[BaseException] = []

    @registry.controller(for_=BOOK, workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        written = await ctx.client.create(config_map(f"{request.name}-x"))
        try:
            await ctx.wait_for_cache(written)
        except KeyError as e:
            failures.append(e)
        try:
            await ctx.wait_for_cache("999999999", timeout=0.05)
        except TimeoutError as e:
            failures.append(e)
        return Result.done()

    async with make_client(server) as mgr_client, running(Manager(mgr_client, registry)):
        await client.create(book("dune"))
        await eventually(lambda: len(failures) == 2)
    assert "does not watch v1 ConfigMap" in str(failures[0])
    assert "did not reach resourceVersion 999999999" in str(failures[1])


async def test_a_plain_def_reconcile_runs_in_a_worker_thread(server: Server,
                                                            client: Client) -> None:
    await install_books(client)
    registry = Registry()
    loop_thread = threading.get_ident()
    threads: list[int] = []

    @registry.controller(for_=BOOK, workers=2)
    def reconcile(request: Request, ctx: Context) -> Result:
        threads.append(threading.get_ident())
        obj = ctx.get(request)
        if obj is None or (obj.get("status") or {}).get("indexed"):
            return Result.done()
        ctx.run(ctx.client.patch_status(BOOK, request.name, {"status": {"indexed": True}},
                                        namespace=request.namespace))
        return Result.done()

    assert registry.controllers[0].blocking
    async with make_client(server) as mgr_client, running(Manager(mgr_client, registry)):
        await client.create(book("dune"))

        async def indexed() -> bool:
            obj = await client.get(BOOK, "dune", namespace="default")
            return bool((obj.get("status") or {}).get("indexed"))

        await eventually(indexed)
    assert threads
    assert loop_thread not in threads


async def test_context_run_refuses_the_event_loop_thread(server: Server,
                                                        client: Client) -> None:
    await install_books(client)
    registry = Registry()
    errors_seen: list[BaseException] = []

    @registry.controller(for_=BOOK, workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        coro = asyncio.sleep(0)
        try:
            ctx.run(coro)
        except RuntimeError as e:
            errors_seen.append(e)
        finally:
            coro.close()
        return Result.done()

    async with make_client(server) as mgr_client, running(Manager(mgr_client, registry)):
        await client.create(book("dune"))
        await eventually(lambda: bool(errors_seen))
    assert "await the call instead" in str(errors_seen[0])


@pytest.mark.parametrize("kind", ["function", "method"])
async def test_blocking_is_detected_at_registration(kind: str) -> None:
    from setpoint.runtime import Controller

    class Sync:
        def reconcile(self, request: Request) -> Result:
            return Result.done()

    def sync(request: Request, ctx: Context) -> None:
        return None

    async def asynchronous(request: Request, ctx: Context) -> None:
        return None

    blocking = Controller(for_=BOOK, reconcile=sync if kind == "function" else Sync())
    assert blocking.blocking
    assert not Controller(for_=BOOK, reconcile=asynchronous).blocking
    with pytest.raises(ValueError, match="needs an executor"):
        blocking.reconciler(None)  # type: ignore[arg-type]

