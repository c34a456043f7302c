"""A client that stops reading a large list and then goes away, while the server waits for it
to read: the list ends quietly (no internal error logged) and the server serves on."""

from __future__ import annotations

import asyncio
import logging
import socket

import aiohttp
import pytest

from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget


async def test_a_list_whose_client_vanishes_mid_write_ends_quietly(
        http: aiohttp.ClientSession, server: Server, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    await install_widgets(http)
    pad = "x" * 60_000
    for burst in range(10):  # 12 MB: more than the kernel buffers hold
        answers = await asyncio.gather(*(request(http, "POST", WIDGETS, widget(
            f"w{burst}-{n}", metadata={"name": f"w{burst}-{n}", "annotations": {"pad": pad}}))
            for n in range(20)))
        assert all(status == 201 for status, _, _ in answers)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    port = int(server.url.rsplit(":", 1)[1])
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 14)
    try:
        writer.write(f"GET {WIDGETS} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        guard = server._guard
        assert guard is not None
        # the server's side of the connection is backed up: the list waits for it to drain
        # (uvloop's transports are not asyncio.WriteTransport subclasses: duck-typed)
        await waiting.eventually(lambda: any(
            getattr(t, "get_write_buffer_size", lambda: 0)() >= 0x10000
            for t in list(guard._conns)), what="the list to wait for the client")
    finally:
        writer.transport.abort()

    async def list_ended() -> bool:
        async with http.get("/metrics") as response:
            text = await response.text()
        return 'apiserver_current_inflight_requests{request_kind="readOnly"} 0\n' in text

    await waiting.eventually(list_ended, what="the list's handler to end")
    status, body, _ = await request(http, "GET", f"{WIDGETS}/w0-0")
    assert status == 200, body
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
