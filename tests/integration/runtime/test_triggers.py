"""Why a reconcile ran, end to end: a manager against the real in-process server, its
triggers, its ``reconcile_now``, its metrics and its ``/debug/reconciles`` endpoint."""

from __future__ import annotations

import urllib.parse
from typing import Any

import aiohttp

from setpoint.client import Client
from setpoint.runtime import (
    Context,
    HistoryConfig,
    Manager,
    Registry,
    Request,
    Result,
    Trigger,
    WatcherConfig,
    set_controller_reference,
)
from setpoint.server.server import Server

from .conftest import BOOK, book, eventually, install_books, make_client, running

CM = ("v1", "ConfigMap")


async def fetch(url: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.json()


async def test_triggers_reach_the_reconcile_and_the_debug_endpoint(server: Server,
                                                                   client: Client) -> None:
    await install_books(client)
    await client.create(book("dune"))  # exists before the manager starts: "initial"
    registry = Registry()
    seen: list[tuple[str, tuple[Trigger, ...]]] = []

    @registry.controller(for_=BOOK, owns=[CM], workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        seen.append((request.key, ctx.triggers))
        obj = ctx.get(request)
        if obj is not None and ctx.cache_for(CM).get(f"{request.key}-index") is None:
            child = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": f"{request.name}-index",
                                  "namespace": request.namespace}}
            set_controller_reference(obj, child)
            await ctx.client.create(child)
        return Result.done()

    def causes(key: str) -> list[set[str]]:
        return [{t.cause for t in why} for k, why in seen if k == key]

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, registry, metrics_port=0,
                          history=HistoryConfig(max_objects=10, per_object=5))
        async with running(manager):
            await eventually(lambda: any("add" in c for c in causes("default/dune")))
            first = next(why for k, why in seen if k == "default/dune")
            assert [(t.cause, t.watch, t.object) for t in first] == [
                ("initial", "for Book", "default/dune")]
            # the child the reconcile created comes back as an owner trigger
            owned = [t for _, why in seen for t in why if t.watch == "owns ConfigMap"]
            assert owned[0].object == "default/dune-index"

            assert manager.reconcile_now("book", Request("default", "dune"), "operator asked")
            await eventually(lambda: any("external" in c for c in causes("default/dune")))
            external = [t for _, why in seen for t in why if t.cause == "external"]
            assert external == [Trigger("external", detail="operator asked")]

            base = f"{manager.metrics_url}/debug/reconciles"
            status, summary = await fetch(base)
            assert status == 200
            assert summary["controllers"] == {"book": 1}
            assert summary["limits"] == {"objects": 10, "per_object": 5}
            status, latest = await fetch(f"{base}?controller=book")
            assert status == 200
            assert list(latest["objects"]) == ["default/dune"]
            status, one = await fetch(
                f"{base}?controller=book&key={urllib.parse.quote('default/dune')}")
            assert status == 200
            history = one["reconciles"]
            assert 1 < len(history) <= 5
            assert history[0]["triggers"] == [{"cause": "initial", "watch": "for Book",
                                               "object": "default/dune"}]
            assert history[-1]["triggers"] == [{"cause": "external",
                                                "detail": "operator asked"}]
            assert all(entry["result"] == "success" for entry in history)
            assert (await fetch(f"{base}?controller=nobody"))[0] == 404
            assert (await fetch(f"{base}?key=default/dune"))[0] == 400
            assert (await fetch(f"{base}?controller={'x' * 600}"))[0] == 400

            async with aiohttp.ClientSession() as session, \
                    session.get(f"{manager.metrics_url}/metrics") as response:
                text = await response.text()
            assert ('controller_runtime_reconcile_triggers_total{controller="book",'
                    'cause="external"} 1') in text
    assert not manager.reconcile_now("book", Request("default", "dune"))  # not running


async def test_a_resync_is_a_trigger_of_its_own(server: Server, client: Client) -> None:
    await install_books(client)
    registry = Registry()
    causes: list[str] = []

    @registry.controller(for_=BOOK, workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        causes.extend(t.cause for t in ctx.triggers)
        return Result.done()

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, registry,
                          watcher_config=WatcherConfig(resync_period=0.2))
        async with running(manager):
            await client.create(book("dune"))
            await eventually(lambda: "resync" in causes)
    assert causes[0] == "add"
