"""A real :class:`~setpoint.registry.store.Store` of ConfigMaps over an in-memory backend and
its watch cache, for unit tests of the store's parts (no HTTP server)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

from setpoint.apimachinery.clock import FakeClock
from setpoint.registry import core, deletion
from setpoint.registry.store import Store
from setpoint.registry.watchcache import WatchCache
from setpoint.storage import MemoryBackend


def configmap(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, **meta}, "data": {"k": "v"}}


@contextlib.asynccontextmanager
async def configmap_store_with_cache(*, gc: bool = False) -> AsyncIterator[
        tuple[Store, MemoryBackend, WatchCache, asyncio.Task[None]]]:
    """A ConfigMap store (with the garbage collector's finalizers when ``gc``), its backend,
    its watch cache and the task that runs the cache (stopped on exit if still running)."""
    backend = MemoryBackend()
    await backend.start()
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    try:
        info, strategy_cls = next((i, c) for i, c in core.builtin_resources()
                                  if i.resource == "configmaps")
        store = Store(strategy_cls(info), backend, cache, clock=FakeClock(),
                      rng=random.Random(7),
                      deletion_finalizers=deletion.gc_finalizers if gc else None)
        await cache.wait_ready()
        yield store, backend, cache, task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await backend.close()


@contextlib.asynccontextmanager
async def configmap_store(*, gc: bool = False) -> AsyncIterator[tuple[Store, MemoryBackend]]:
    """A ConfigMap store (with the garbage collector's finalizers when ``gc``) and its
    backend; the cache's task is stopped on exit."""
    async with configmap_store_with_cache(gc=gc) as (store, backend, _, _):
        yield store, backend
