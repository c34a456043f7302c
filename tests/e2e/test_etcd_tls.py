"""End to end: ``setpoint serve --storage etcd`` on an etcd that serves clients over TLS and
requires client certificates (``--client-cert-auth``), as Kubernetes runs it.

1. With ``--etcd-cafile``, ``--etcd-certfile`` and ``--etcd-keyfile`` the server starts, and
   a write through its API is read back through it and found in etcd.
2. With a certificate from another CA it does not start: it exits 1 saying that etcd
   refused its certificate over TLS.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from setpoint.storage import StorageConfig, create_backend
from tests.conftest import start_serve
from tests.integration.storage import etcd_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def pki(tmp_path: Path) -> etcd_server.EtcdPKI:
    return etcd_server.EtcdPKI.create(tmp_path / "etcd-pki")


@pytest.fixture
def etcd(tmp_path: Path, pki: etcd_server.EtcdPKI) -> Iterator[etcd_server.EtcdServer]:
    with etcd_server.running(tmp_path / "etcd", pki=pki) as server:
        yield server


def tls_flags(pki: etcd_server.EtcdPKI, who: str = "client") -> list[str]:
    ca_file, cert_file, key_file = pki.client_files(who)
    return ["--etcd-cafile", str(ca_file), "--etcd-certfile", str(cert_file),
            "--etcd-keyfile", str(key_file)]


async def stored(etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI, key: str) -> bytes:
    ca_file, cert_file, key_file = pki.client_files()
    async with create_backend(StorageConfig(kind="etcd", endpoints=(etcd.endpoint,),
                                            ca_file=ca_file, cert_file=cert_file,
                                            key_file=key_file)) as backend:
        kv = await backend.get(key)
    assert kv is not None, f"{key} is not in etcd"
    return kv.value


def test_serve_writes_and_reads_through_a_tls_etcd(
        tmp_path: Path, etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    assert etcd.endpoint.startswith("https://")
    serve = start_serve(tmp_path / "server", storage="etcd", etcd_endpoints=[etcd.endpoint],
                        extra_args=tls_flags(pki))
    try:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "over-tls"},
                "data": {"etcd": "https"}}
        with serve.urlopen(CONFIGMAPS, data=json.dumps(body).encode(), method="POST",
                           headers={"Content-Type": "application/json"}) as reply:
            assert reply.status == 201
            created = json.loads(reply.read())
        with serve.urlopen(f"{CONFIGMAPS}/over-tls") as reply:
            read = json.loads(reply.read())
        assert read["data"] == {"etcd": "https"}
        assert read["metadata"]["uid"] == created["metadata"]["uid"]
    finally:
        assert serve.stop() == 0, serve.log.read_text()
    value = asyncio.run(stored(etcd, pki, "/registry/core/configmaps/default/over-tls"))
    assert b"over-tls" in value


def test_serve_with_a_certificate_etcd_refuses_exits_saying_tls(
        tmp_path: Path, etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "setpoint", "serve", "--port", "0", "--data-dir",
         str(tmp_path / "server"), "--storage", "etcd", "--etcd-endpoints", etcd.endpoint,
         *tls_flags(pki, "stranger")],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1, done.stderr
    assert ("setpoint serve: error: storage is unavailable: etcd status: TLS: etcd refused "
            "this client's certificate") in done.stderr
