"""Controllers run by a manager against the real in-process server."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import aiohttp
import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client
from setpoint.runtime import (
    Context,
    Controller,
    Finalizer,
    Manager,
    Registry,
    Request,
    Result,
    TerminalError,
    set_controller_reference,
)
from setpoint.server.server import Server

from .conftest import BOOK, book, eventually, install_books, make_client, running

CM = ("v1", "ConfigMap")


def index_of(obj: Any) -> dict[str, Any]:
    meta = obj["metadata"]
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": f"{meta['name']}-index", "namespace": meta["namespace"]},
          "data": {"title": obj["spec"]["title"]}}
    set_controller_reference(obj, cm)
    return cm


class Library:
    """A Book controller: an index ConfigMap per book, and ``status.indexed`` set."""

    def __init__(self) -> None:
        self.reconciles = 0
        self.cleaned: list[str] = []

    async def reconcile(self, request: Request, ctx: Context) -> Result:
        self.reconciles += 1
        obj = ctx.get(request)
        if obj is None:
            return Result.done()
        if obj["spec"]["title"] == "forbidden":
            raise TerminalError("that title can never be indexed")
        if ctx.cache_for(CM).get(f"{request.key}-index") is None:
            try:
                await ctx.client.create(index_of(obj))
            except errors.AlreadyExists:
                pass
        if (obj.get("status") or {}).get("indexed") != obj["spec"]["title"]:
            await ctx.client.patch_status(BOOK, request.name,
                                          {"status": {"indexed": obj["spec"]["title"]}},
                                          namespace=request.namespace)
            await ctx.recorder.normal(obj, "Indexed", f"indexed {obj['spec']['title']}")
        return Result.done()


async def test_a_thousand_books_are_reconciled(server: Server, client: Client) -> None:
    await install_books(client)
    library = Registry()

    @library.controller(for_=BOOK, workers=8)
    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is not None and "status" not in obj:
            await ctx.client.patch_status(BOOK, request.name, {"status": {"seen": True}},
                                          namespace=request.namespace)
        return Result.done()

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, library)
        async with running(manager):
            cache = manager.context("book").cache
            started = time.monotonic()
            limit = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with limit:
                    await client.create(book(f"b{i:04d}"))

            async with asyncio.TaskGroup() as group:
                for i in range(1000):
                    group.create_task(create(i))
            created = time.monotonic() - started

            def all_done() -> bool:
                return len(cache) == 1000 and all("status" in o for o in cache.list())

            await eventually(all_done, timeout=120, what="1,000 books reconciled")
            total = time.monotonic() - started
    print(f"\n1,000 books: created in {created:.2f}s, all reconciled after {total:.2f}s")


async def test_a_thousand_existing_books_are_reconciled_on_start(server: Server,
                                                                 client: Client) -> None:
    await install_books(client)
    limit = asyncio.Semaphore(16)

    async def create(i: int) -> None:
        async with limit:
            await client.create(book(f"b{i:04d}"))

    async with asyncio.TaskGroup() as group:
        for i in range(1000):
            group.create_task(create(i))

    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is not None and "status" not in obj:
            await ctx.client.patch_status(BOOK, request.name, {"status": {"seen": True}},
                                          namespace=request.namespace)
        return Result.done()

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, [Controller(for_=BOOK, reconcile=reconcile)
                                       .with_options(workers=8)])
        started = time.monotonic()
        async with running(manager):
            synced = time.monotonic() - started
            cache = manager.context("book").cache
            await eventually(lambda: all("status" in o for o in cache.list()), timeout=20)
            total = time.monotonic() - started
    print(f"\n1,000 existing books: caches synced in {synced:.2f}s, all reconciled after "
          f"{total:.2f}s")


@pytest.mark.parametrize("metadata_only", [False, True], ids=["full", "metadata-only"])
async def test_owned_config_maps_are_recreated(server: Server, client: Client,
                                               metadata_only: bool) -> None:
    await install_books(client)
    library = Library()
    controller = Controller(for_=BOOK, reconcile=library.reconcile).owns(
        CM, metadata_only=metadata_only)
    async with make_client(server) as mgr_client, running(Manager(mgr_client, [controller])):
        await client.create(book("dune"))

        async def indexed() -> bool:
            obj = await client.get(BOOK, "dune")
            return (obj.get("status") or {}).get("indexed") == "Dune"

        await eventually(indexed)
        cm = await client.get(CM, "dune-index")
        assert cm["metadata"]["ownerReferences"][0]["kind"] == "Book"
        await client.delete(CM, "dune-index")
        deleted = time.monotonic()

        async def recreated() -> bool:
            try:
                await client.get(CM, "dune-index")
            except errors.NotFound:
                return False
            return True

        await eventually(recreated, timeout=1.0, interval=0.01)
        print(f"\nowned ConfigMap re-created {time.monotonic() - deleted:.3f}s after delete")
        events = await client.list(("v1", "Event"), namespace="default")
        # the controller's own Events, and (action Reconcile) the manager's report of each
        # reconcile, which names the controller as reportingComponent and has no source
        reasons = [(e["reason"], e["involvedObject"]["name"], e["source"]["component"])
                   for e in events["items"] if e.get("action") != "Reconcile"]
        assert ("Indexed", "dune", "book") in reasons
        reconciles = [(e["reason"], e["involvedObject"]["name"], e["reportingComponent"])
                      for e in events["items"] if e.get("action") == "Reconcile"]
        assert ("Reconciled", "dune", "book") in reconciles


async def test_finalizer_cleanup_runs_on_delete(server: Server, client: Client) -> None:
    await install_books(client)
    cleaned: list[str] = []

    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is None:
            return Result.done()

        # both steps are idempotent: the cache may lag behind our own writes, so either
        # may run again for a state that is already handled
        async def apply(obj: Any) -> None:
            if ctx.cache_for(CM).get(f"{request.key}-index") is None:
                try:
                    await ctx.client.create(index_of(obj))
                except errors.AlreadyExists:
                    pass

        async def cleanup(obj: Any) -> None:
            cleaned.append(obj["metadata"]["name"])
            try:
                await ctx.client.delete(CM, f"{request.name}-index",
                                        namespace=request.namespace)
            except errors.NotFound:
                pass

        return await Finalizer(ctx.client, "example.com/index").run(obj, apply=apply,
                                                                     cleanup=cleanup)

    controller = Controller(for_=BOOK, reconcile=reconcile).owns(CM)
    async with make_client(server) as mgr_client, running(Manager(mgr_client, [controller])):
        await client.create(book("emma"))

        async def has_finalizer_and_index() -> bool:
            obj = await client.get(BOOK, "emma")
            try:
                await client.get(CM, "emma-index")
            except errors.NotFound:
                return False
            return bool(obj["metadata"].get("finalizers") == ["example.com/index"])

        await eventually(has_finalizer_and_index)
        await client.delete(BOOK, "emma")

        async def gone() -> bool:
            try:
                await client.get(BOOK, "emma")
            except errors.NotFound:
                return True
            return False

        await eventually(gone)
        assert set(cleaned) == {"emma"}
        with pytest.raises(errors.NotFound):
            await client.get(CM, "emma-index")


async def test_probes_and_metrics(server: Server, client: Client) -> None:
    await install_books(client)
    library = Library()
    controller = (Controller(for_=BOOK, reconcile=library.reconcile).owns(CM)
                  .named("library").with_options(workers=3))
    manager = Manager(make_client(server), [controller], health_port=0, metrics_port=0)
    try:
        async with running(manager):
            await client.create(book("a"))
            await client.create(book("bad", title="forbidden"))
            await eventually(lambda: library.reconciles >= 3)
            assert manager.health_url is not None
            assert manager.metrics_url is not None
            async with aiohttp.ClientSession() as http:
                for path in ("/healthz", "/readyz"):
                    async with http.get(manager.health_url + path) as r:
                        assert (r.status, await r.text()) == (200, "ok")

                async def scrape() -> str:
                    assert manager.metrics_url is not None
                    async with http.get(manager.metrics_url + "/metrics") as r:
                        assert r.status == 200
                        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                        return await r.text()

                async def counted() -> bool:
                    text = await scrape()
                    return ('controller_runtime_terminal_reconcile_errors_total'
                            '{controller="library"} 1') in text
                await eventually(counted)
                text = await scrape()
            lines = text.splitlines()
            assert 'controller_runtime_max_concurrent_reconciles{controller="library"} 3' in lines
            assert 'controller_runtime_active_workers{controller="library"} 0' in lines
            success = [ln for ln in lines if ln.startswith(
                'controller_runtime_reconcile_total{controller="library",result="success"}')]
            assert int(success[0].split()[-1]) >= 1
            for name in ("controller_runtime_reconcile_time_seconds_bucket",
                         "workqueue_depth", "workqueue_adds_total",
                         "workqueue_queue_duration_seconds_count",
                         "workqueue_work_duration_seconds_sum", "workqueue_retries_total",
                         "workqueue_unfinished_work_seconds",
                         "workqueue_longest_running_processor_seconds"):
                assert any(ln.startswith(name + "{") for ln in lines), name
            adds = [ln for ln in lines if ln.startswith('workqueue_adds_total{name="library"')]
            assert int(adds[0].split()[-1]) >= 2
        assert manager.metrics_url is None  # the server is gone after run
    finally:
        await manager.client.close()


async def test_cancelling_run_shuts_down_gracefully(server: Server, client: Client) -> None:
    await install_books(client)
    started = asyncio.Event()
    finished: list[str] = []

    async def slow(request: Request, ctx: Context) -> Result:
        started.set()
        await asyncio.sleep(0.3)
        finished.append(request.name)
        return Result.done()

    await client.create(book("slow"))
    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, [Controller(for_=BOOK, reconcile=slow)],
                          health_port=0)
        async with asyncio.TaskGroup() as group:
            task = group.create_task(manager.run())
            await asyncio.wait_for(started.wait(), 5)
            task.cancel()
        assert task.cancelled()
        assert finished == ["slow"]  # the reconcile in flight was allowed to finish
        assert manager.health_url is None
        assert not manager.ready


async def test_a_stop_signal_stops_the_manager(server: Server, client: Client) -> None:
    async def noop(request: Request, ctx: Context) -> None:
        return None

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, [Controller(for_=CM, reconcile=noop)])
        async with asyncio.TaskGroup() as group:
            task = group.create_task(manager.run(stop_signals=(signal.SIGUSR1,)))
            await eventually(lambda: manager.ready)
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.wait_for(asyncio.wait({task}), 5)
        assert task.done()
        assert not task.cancelled()
        assert task.result() is None


async def test_unknown_resources_fail_after_the_sync_timeout(server: Server) -> None:
    async def never(request: Request, ctx: Context) -> None:
        raise AssertionError("not reached")

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, [Controller(for_="unicorns", reconcile=never)],
                          cache_sync_timeout=0.5)
        with pytest.raises(LookupError, match="unicorns"):
            await manager.run()


async def test_duplicate_controller_names_are_refused(server: Server, client: Client) -> None:
    async def noop(request: Request, ctx: Context) -> None:
        return None

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, [Controller(for_=CM, reconcile=noop),
                                       Controller(for_="configmaps", reconcile=noop)])
        with pytest.raises(ValueError, match="unique"):
            await manager.run()
