"""Fixtures of the registry's unit tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.registry.watchcache import WatchCache
from setpoint.storage import MemoryBackend


@pytest.fixture
async def cache() -> AsyncIterator[tuple[MemoryBackend, WatchCache]]:
    """A running watch cache over a started memory backend; both stopped afterwards."""
    backend = MemoryBackend()
    await backend.start()
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    await cache.wait_ready()
    yield backend, cache
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await backend.close()
