"""Fixtures of the storage contract suite: every test runs once per backend kind."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from setpoint.storage import Backend
from tests.integration.storage import etcd_server
from tests.integration.storage.storage_testkit import Opener

BACKENDS = ["memory", "sqlite", "etcd", "encrypted-sqlite"]


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
def etcd(kind: str, tmp_path: Path) -> Iterator[etcd_server.EtcdServer | None]:
    """For the etcd kind, a fresh etcd per test (the contract starts from revision 0)."""
    if kind != "etcd":
        yield None
        return
    if etcd_server.BINARY is None:
        pytest.skip(etcd_server.MISSING)
    if importlib.util.find_spec("aetcd") is None:
        pytest.skip("the aetcd client is not installed")
    with etcd_server.running(tmp_path / "etcd", *etcd_server.PROGRESS_EVERY_100MS) as server:
        yield server


@pytest.fixture
async def open_backend(kind: str, tmp_path: Path,
                       etcd: etcd_server.EtcdServer | None) -> AsyncIterator[Opener]:
    opener = Opener(kind, tmp_path / "storage.db", etcd.endpoint if etcd else None)
    try:
        yield opener
    finally:
        await opener.close_all()


@pytest.fixture
async def backend(open_backend: Opener) -> Backend:
    return await open_backend()

