"""Fixtures for the runtime's unit tests: a fake clock, and a check that no task leaks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.runtime.clock import FakeAsyncClock


@pytest.fixture
def clock() -> FakeAsyncClock:
    return FakeAsyncClock()


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fails the test if it leaves a task running (everything started must be stopped)."""
    before = asyncio.all_tasks()
    yield
    for _ in range(5):
        await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before
              if t is not asyncio.current_task() and not t.done()]
    for task in leaked:
        task.cancel()
    assert not leaked, f"tasks left running: {leaked}"
