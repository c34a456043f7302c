"""Periodic compaction: each tick compacts to the revision read one tick before."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.registry.compactor import compact_periodically
from setpoint.storage import MemoryBackend, Unavailable


class Ticks:
    """A ``sleep`` that waits for the test to release each tick."""

    def __init__(self) -> None:
        self.slept = asyncio.Queue[float]()
        self._go = asyncio.Queue[None]()

    async def sleep(self, seconds: float) -> None:
        self.slept.put_nowait(seconds)
        await self._go.get()

    async def tick(self) -> None:
        """Let the loop run one more round, and wait until it sleeps again."""
        self._go.put_nowait(None)
        await asyncio.wait_for(self.slept.get(), 5)


async def test_compacts_to_the_revision_of_the_previous_tick() -> None:
    async with MemoryBackend() as backend:
        ticks = Ticks()
        task = asyncio.create_task(compact_periodically(backend, 60, sleep=ticks.sleep))
        try:
            assert await asyncio.wait_for(ticks.slept.get(), 5) == 60  # read 0
            for i in range(3):
                await backend.create(f"/k{i}", b"x")
            await ticks.tick()  # read 3, nothing to compact yet (0)
            assert await backend.compacted_revision() == 0
            for i in range(3, 5):
                await backend.create(f"/k{i}", b"x")
            await ticks.tick()  # read 5, compact to 3
            assert await backend.compacted_revision() == 3
            await ticks.tick()  # read 5, compact to 5
            assert await backend.compacted_revision() == 5
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


class Flaky(MemoryBackend):
    """Unreachable while ``down``."""

    down = False

    async def current_revision(self) -> int:
        if self.down:
            raise Unavailable("down")
        return await super().current_revision()


async def test_an_unreachable_store_skips_ticks_and_keeps_the_older_revision() -> None:
    async with Flaky() as backend:
        ticks = Ticks()
        task = asyncio.create_task(compact_periodically(backend, 1, sleep=ticks.sleep))
        try:
            await asyncio.wait_for(ticks.slept.get(), 5)
            await backend.create("/a", b"x")
            await ticks.tick()  # read 1
            backend.down = True
            await backend.create("/b", b"x")
            await ticks.tick()  # skipped
            backend.down = False
            await ticks.tick()  # read 2, compact to 1
            assert await backend.compacted_revision() == 1
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task


async def test_interval_must_be_positive() -> None:
    async with MemoryBackend() as backend:
        with pytest.raises(ValueError, match="positive"):
            await compact_periodically(backend, 0)
