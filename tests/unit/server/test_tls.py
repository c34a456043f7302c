"""The serving TLS context: verified by the cluster CA, client certificates read, rotation."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization

from setpoint.pki.authority import Authority
from setpoint.pki.certs import KeyPair
from setpoint.server import security
from setpoint.server.tls import ServingTLS


class Clock:
    """Starts 300 days in the past, so that moving it to today makes certificates due while
    the ones issued then are valid for the TLS stack (which uses the real time)."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC) - dt.timedelta(days=300)

    def __call__(self) -> dt.datetime:
        return self.now


def client_context(authority: Authority, client: KeyPair | None, tmp_path: Path
                   ) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=authority.ca.cert_pem.decode())
    if client is not None:
        cert, key = tmp_path / "c.crt", tmp_path / "c.key"
        cert.write_bytes(client.cert_pem)
        key.write_bytes(client.key_pem)
        ctx.load_cert_chain(cert, key)
    return ctx


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Authority, ServingTLS, Clock]]:
    clock = Clock()
    authority = Authority(tmp_path / "pki", now=clock)
    tls = ServingTLS(authority, ["localhost", "127.0.0.1"])

    async def whoami(request: web.Request) -> web.Response:
        der = security.peer_certificate(request)
        return web.Response(text="anonymous" if der is None else f"cert:{len(der)}")

    app = web.Application()
    app.router.add_get("/", whoami)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    port = runner.addresses[0][1]
    yield f"https://localhost:{port}/", authority, tls, clock
    await runner.cleanup()


async def get(url: str, ctx: ssl.SSLContext) -> str:
    async with aiohttp.ClientSession() as session, session.get(url, ssl=ctx) as r:
        return await r.text()


async def test_clients_verify_the_server_and_may_present_a_certificate(
        served: tuple[str, Authority, ServingTLS, Clock], tmp_path: Path) -> None:
    url, authority, _, _ = served
    assert await get(url, client_context(authority, None, tmp_path)) == "anonymous"
    admin = authority.client("admin", "system:admin", ["system:masters"])
    assert (await get(url, client_context(authority, admin, tmp_path))).startswith("cert:")


async def test_a_certificate_from_another_ca_is_refused_at_the_handshake(
        served: tuple[str, Authority, ServingTLS, Clock], tmp_path: Path) -> None:
    url, authority, _, _ = served
    stranger = Authority(tmp_path / "other").client("x", "system:admin", ["system:masters"])
    with pytest.raises(aiohttp.ClientError):
        await get(url, client_context(authority, stranger, tmp_path))
    other_ca = ssl.create_default_context(cadata=Authority(tmp_path / "o2").ca.cert_pem.decode())
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await get(url, other_ca)


async def test_a_renewed_certificate_is_served_without_a_restart(
        served: tuple[str, Authority, ServingTLS, Clock], tmp_path: Path) -> None:
    url, authority, tls, clock = served
    first = tls.certificate
    assert tls.refresh() is False
    clock.now = dt.datetime.now(dt.UTC)
    assert tls.refresh() is True
    assert tls.certificate.not_after > first.not_after
    port = int(url.rsplit(":", 1)[1].strip("/"))
    _, writer = await asyncio.open_connection("127.0.0.1", port,
                                              ssl=client_context(authority, None, tmp_path),
                                              server_hostname="localhost")
    served_der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    assert served_der == tls.certificate.certificate.public_bytes(serialization.Encoding.DER)
