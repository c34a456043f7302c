"""Every client test must leave no task behind: nothing the client starts may outlive a call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    await asyncio.sleep(0)  # let finished tasks be collected
    leaked = {t for t in asyncio.all_tasks() - before
              if t is not asyncio.current_task() and not t.done()}
    assert not leaked, f"tasks left running: {leaked}"
