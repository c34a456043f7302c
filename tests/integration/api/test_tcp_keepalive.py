"""Every connection the server accepts, plain or TLS, has TCP keep-alive and the bound on
unacknowledged data set to its limits: read back from the server's own socket."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from setpoint.server.limits import Limits
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting
from tests.integration.api import rawhttp

pytestmark = pytest.mark.skipif(
    not all(hasattr(socket, name) for name in
            ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT", "TCP_USER_TIMEOUT")),
    reason="the keep-alive options are Linux's")


def server_socket(server: Server) -> Any:
    guard = server._guard
    assert guard is not None
    (transport,) = list(guard._conns)
    sock = transport.get_extra_info("socket")
    assert sock is not None
    return sock


def options(sock: Any) -> dict[str, int]:
    tcp = socket.IPPROTO_TCP
    return {"keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle": sock.getsockopt(tcp, socket.TCP_KEEPIDLE),
            "interval": sock.getsockopt(tcp, socket.TCP_KEEPINTVL),
            "count": sock.getsockopt(tcp, socket.TCP_KEEPCNT),
            "user_timeout_ms": sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT)}


async def accepted_options(server: Server, ssl_context: ssl.SSLContext | None) -> dict[str, int]:
    conn = await rawhttp.Connection.open(server.url, ssl=ssl_context)
    try:
        guard = server._guard
        assert guard is not None
        await waiting.eventually(lambda: guard.open_connections == 1,
                                 what="the server to accept the connection")
        return options(server_socket(server))
    finally:
        await conn.close()


def config(tmp_path: Path, limits: Limits, *, secure: bool = False) -> ServerConfig:
    return ServerConfig(port=0, storage=StorageConfig(kind="memory"), compaction_interval=None,
                        kubeconfig_path=tmp_path / "kubeconfig", limits=limits,
                        security=SecurityConfig(pki_dir=tmp_path / "pki") if secure else None)


async def test_a_plain_connection_has_the_configured_keepalive(tmp_path: Path) -> None:
    limits = Limits(keepalive_idle=7, keepalive_interval=3, keepalive_count=4,
                    tcp_user_timeout=2.5)
    async with Server(config(tmp_path, limits)) as server:
        assert await accepted_options(server, None) == {
            "keepalive": 1, "idle": 7, "interval": 3, "count": 4, "user_timeout_ms": 2500}


async def test_a_tls_connection_has_the_configured_keepalive(tmp_path: Path) -> None:
    limits = Limits(keepalive_idle=11, keepalive_interval=2, keepalive_count=5,
                    tcp_user_timeout=None)
    async with Server(config(tmp_path, limits, secure=True)) as server:
        assert server.url.startswith("https://")
        context = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
        # the TLS handshake alone: the guard sees the connection once it is done
        got = await accepted_options(server, context)
    # a user timeout of None is the keep-alive's own bound: 11 + 2 x 5 seconds
    assert got == {"keepalive": 1, "idle": 11, "interval": 2, "count": 5,
                   "user_timeout_ms": 21_000}


async def test_the_defaults_are_kube_apiservers(tmp_path: Path) -> None:
    async with Server(config(tmp_path, Limits())) as server:
        assert await accepted_options(server, None) == {
            "keepalive": 1, "idle": 180, "interval": 15, "count": 9,
            "user_timeout_ms": 0}


async def test_a_user_timeout_of_none_is_the_keepalives_bound(tmp_path: Path) -> None:
    async with Server(config(tmp_path, Limits(tcp_user_timeout=None))) as server:
        assert (await accepted_options(server, None))["user_timeout_ms"] == 315_000


@pytest.mark.parametrize("bad", [
    {"keepalive_idle": 0}, {"keepalive_idle": 32768}, {"keepalive_interval": 0},
    {"keepalive_count": 0}, {"keepalive_count": 128}, {"tcp_user_timeout": -1},
    {"tcp_user_timeout": 86401}])
def test_out_of_bounds_keepalive_limits_are_refused(bad: dict[str, Any]) -> None:
    (name,) = bad
    with pytest.raises(ValueError, match=f"^{name} must be between"):
        Limits(**bad)


def test_on_uvloop_plain_and_tls_connections_have_them_too(tmp_path: Path) -> None:
    """``setpoint serve`` runs on uvloop, whose transports and sockets are its own."""
    uvloop = pytest.importorskip("uvloop")
    limits = Limits(keepalive_idle=13, keepalive_interval=4, keepalive_count=3,
                    tcp_user_timeout=9)

    async def both() -> list[dict[str, int]]:
        got = []
        async with Server(config(tmp_path / "plain", limits)) as server:
            got.append(await accepted_options(server, None))
        async with Server(config(tmp_path / "tls", limits, secure=True)) as server:
            context = ssl.create_default_context(cafile=str(tmp_path / "tls/pki/ca.crt"))
            got.append(await accepted_options(server, context))
        return got

    expected = {"keepalive": 1, "idle": 13, "interval": 4, "count": 3, "user_timeout_ms": 9000}
    assert uvloop.run(both()) == [expected, expected]
