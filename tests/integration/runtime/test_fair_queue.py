"""The manager's fair queue against the real in-process server: a change made while the
initial list is being worked through is reconciled next, not after the whole list."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.client import Client
from setpoint.runtime import Context, Manager, Registry, Request, Result
from setpoint.server.server import Server

from .conftest import BOOK, book, install_books, make_client, running


@pytest.mark.parametrize("order", ["fair", "fifo"])
async def test_a_change_overtakes_the_initial_list(server: Server, client: Client,
                                                   order: str) -> None:
    await install_books(client)
    for i in range(30):
        await client.create(book(f"b{i:02d}"))
    gate = asyncio.Event()
    holding = asyncio.Event()
    reconciled: list[tuple[str, frozenset[str]]] = []
    all_done = asyncio.Event()
    registry = Registry()

    @registry.controller(for_=BOOK, workers=1, priority=None if order == "fair" else "fifo")
    async def reconcile(request: Request, ctx: Context) -> Result:
        reconciled.append((request.name, frozenset(t.cause for t in ctx.triggers)))
        holding.set()
        await gate.wait()  # the first reconcile holds the only worker
        if len(reconciled) == 30:
            all_done.set()
        return Result.done()

    async with make_client(server) as mgr_client:
        manager = Manager(mgr_client, registry)
        async with running(manager):
            ctx = manager.context("book")
            async with asyncio.timeout(10):
                await holding.wait()  # the worker is in the first reconcile
            changed = await client.patch(BOOK, "b20", {"spec": {"title": "Changed"}},
                                         namespace="default")
            await ctx.wait_for_cache(changed)  # its update trigger is in the queue now
            gate.set()
            async with asyncio.timeout(10):
                await all_done.wait()
    names = [name for name, _ in reconciled]
    assert sorted(names) == [f"b{i:02d}" for i in range(30)]
    assert reconciled[0][1] == {"initial"}
    position = names.index("b20")
    assert reconciled[position][1] == {"initial", "update"}
    if order == "fair":
        assert position == 1  # next, ahead of 28 initial-list items
    else:
        assert position == 20  # where the initial list put it
