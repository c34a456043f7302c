"""Fixtures of the storage contract suite: every test runs once per backend kind.

``etcd-tls`` (etcd serving clients over TLS, with client certificates) is not among the
kinds every test runs on: ``test_etcd_tls_contract`` runs a representative part of the
contract on it, since a TLS etcd differs from a plain one only in its channel."""

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
    """For the etcd kinds, a fresh etcd per test (the contract starts from revision 0)."""
    if kind not in ("etcd", "etcd-tls"):
        yield None
        return
    if etcd_server.BINARY is None:
        pytest.skip(etcd_server.MISSING)
    if importlib.util.find_spec("aetcd") is None:
        pytest.skip("the aetcd client is not installed")
    pki = etcd_server.EtcdPKI.create(tmp_path / "pki") if kind == "etcd-tls" else None
    with etcd_server.running(tmp_path / "etcd", *etcd_server.PROGRESS_EVERY_100MS,
                             pki=pki) as server:
        yield server


@pytest.fixture
async def open_backend(kind: str, tmp_path: Path,
                       etcd: etcd_server.EtcdServer | None) -> AsyncIterator[Opener]:
    opener = Opener(kind, tmp_path / "storage.db", etcd.endpoint if etcd else None,
                    tls_files=etcd.pki.client_files() if etcd and etcd.pki else None)
    try:
        yield opener
    finally:
        await opener.close_all()


@pytest.fixture
async def backend(open_backend: Opener) -> Backend:
    return await open_backend()

