"""etcd over TLS with client certificates (``--client-cert-auth``): who gets in, who is refused
and what they are told, several members behind one TLS channel, and an API server whose etcd
stops trusting it (503 naming TLS, then back to work once etcd trusts it again)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import Backend, StorageConfig, Unavailable, create_backend
from tests.integration.api.helpers import request
from tests.integration.storage import etcd_server

pytestmark = [
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
]

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
def pki(tmp_path: Path) -> etcd_server.EtcdPKI:
    return etcd_server.EtcdPKI.create(tmp_path / "pki")


@pytest.fixture
def etcd(tmp_path: Path, pki: etcd_server.EtcdPKI) -> Iterator[etcd_server.EtcdServer]:
    with etcd_server.running(tmp_path / "etcd", pki=pki) as server:
        yield server


def storage(endpoints: tuple[str, ...], pki: etcd_server.EtcdPKI, *, who: str = "client",
            ca: str = "ca") -> StorageConfig:
    _, cert_file, key_file = pki.client_files(who)
    return StorageConfig(kind="etcd", endpoints=endpoints, ca_file=pki.path(f"{ca}.crt"),
                         cert_file=cert_file, key_file=key_file)


async def refusal(config: StorageConfig) -> str:
    """The message of the :class:`Unavailable` that starting a backend on ``config`` raises."""
    backend = create_backend(config)
    with pytest.raises(Unavailable) as refused:
        await backend.start()
    await backend.close()
    return str(refused.value)


async def test_a_client_with_the_clusters_certificate_gets_in(
        etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    backend = create_backend(storage((etcd.endpoint,), pki))
    async with backend:
        created = await backend.create("/registry/a", b"one")
        assert await backend.get("/registry/a") == created


async def test_a_client_without_a_certificate_is_refused_and_told_it_is_tls(
        etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    message = await refusal(StorageConfig(kind="etcd", endpoints=(etcd.endpoint,),
                                          ca_file=pki.ca_file))
    assert "TLS" in message
    assert "etcd refused this client's certificate" in message


async def test_a_certificate_from_another_ca_is_refused_and_told_it_is_tls(
        etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    message = await refusal(storage((etcd.endpoint,), pki, who="stranger"))
    assert "TLS" in message
    assert "etcd refused this client's certificate" in message


async def test_a_client_that_does_not_trust_etcds_ca_refuses_etcd(
        etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI) -> None:
    message = await refusal(storage((etcd.endpoint,), pki, ca="stranger-ca"))
    assert "TLS" in message
    assert "etcd's certificate is not trusted" in message


async def test_a_plain_client_gets_nothing_from_a_tls_etcd(
        etcd: etcd_server.EtcdServer) -> None:
    plain = etcd.endpoint.replace("https://", "http://")
    message = await refusal(StorageConfig(kind="etcd", endpoints=(plain,)))
    assert message.startswith("etcd status: UNAVAILABLE")


async def test_every_member_of_a_tls_cluster_on_one_host_is_used(
        tmp_path: Path, pki: etcd_server.EtcdPKI) -> None:
    # three https endpoints on 127.0.0.1: gRPC checks each member against one name (the
    # first endpoint's host); with the default name (the whole address list) none passes
    with etcd_server.cluster(tmp_path / "cluster", 3, pki=pki) as cluster:
        backends = [create_backend(storage((member.endpoint,), pki))
                    for member in cluster.members]
        together = create_backend(storage(tuple(cluster.endpoints), pki))
        async with together, backends[0], backends[1], backends[2]:
            for i in range(6):  # round robin: each write goes to the next member
                await together.create(f"/registry/k{i}", str(i).encode())
            for backend in backends:  # each member answers, over its own TLS channel
                listed = await backend.list("/registry/")
                assert [kv.key for kv in listed.kvs] == [f"/registry/k{i}" for i in range(6)]
            cluster.members[0].stop()
            await together.create("/registry/after", b"x")  # the others carry on
            assert (await backends[1].get("/registry/after")) is not None


@pytest.fixture
async def api(etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI
              ) -> AsyncIterator[tuple[Server, aiohttp.ClientSession]]:
    config = ServerConfig(port=0, storage=storage((etcd.endpoint,), pki))
    async with Server(config) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        yield server, http


async def test_the_api_answers_503_naming_tls_while_etcd_refuses_its_certificate(
        etcd: etcd_server.EtcdServer, pki: etcd_server.EtcdPKI,
        api: tuple[Server, aiohttp.ClientSession]) -> None:
    server, http = api
    status, created, _ = await request(http, "POST", CONFIGMAPS,
                                       {"metadata": {"name": "before"}})
    assert status == 201, created

    # etcd restarted trusting another CA for its clients: setpoint's certificate is refused
    etcd.stop()
    etcd.pki = dataclasses.replace(pki, trusted="stranger-ca")
    etcd.start()

    deadline = time.monotonic() + 15
    while True:  # until gRPC has reconnected: before that, etcd is merely unreachable
        status, reply, headers = await request(http, "POST", CONFIGMAPS,
                                               {"metadata": {"name": "during"}})
        assert status == 503, reply
        assert reply["kind"] == "Status"
        assert headers["Retry-After"] == "1"
        if "TLS" in reply["message"]:
            break
        assert time.monotonic() < deadline, reply
        await asyncio.sleep(0.1)
    assert reply["reason"] == "ServiceUnavailable"
    assert reply["message"].startswith("storage is unavailable: etcd txn: TLS: etcd refused "
                                       "this client's certificate"), reply
    assert isinstance(server.backend, Backend)

    # trusted again: the same server goes back to work without a restart
    etcd.stop()
    etcd.pki = pki
    etcd.start()
    deadline = time.monotonic() + 15
    while (status := (await request(http, "POST", CONFIGMAPS,
                                    {"metadata": {"name": "after"}}))[0]) != 201:
        assert status == 503
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    status, page, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200
    assert [i["metadata"]["name"] for i in page["items"]] == ["after", "before"]
