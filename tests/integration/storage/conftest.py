"""Fixtures of the storage contract suite: every test runs once per backend kind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from setpoint.storage import Backend
from tests.integration.storage.storage_testkit import Opener

BACKENDS = ["memory", "sqlite"]


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def open_backend(kind: str, tmp_path: Path) -> AsyncIterator[Opener]:
    opener = Opener(kind, tmp_path / "storage.db")
    try:
        yield opener
    finally:
        await opener.close_all()


@pytest.fixture
async def backend(open_backend: Opener) -> Backend:
    return await open_backend()

