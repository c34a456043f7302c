"""A client that goes away in the middle of its request is not a server error: nothing is
logged at ERROR (aiohttp logged it with a traceback), the request is counted with code 499
("client closed request"), and the server serves on."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from setpoint.server.connections import State
from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.integration.api import rawhttp
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


async def closed_requests(http: aiohttp.ClientSession) -> int:
    async with http.get("/metrics") as response:
        text = await response.text()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines()
               if line.startswith("apiserver_request_total{") and 'verb="POST"' in line
               and 'resource="configmaps"' in line and 'code="499"' in line)


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_a_write_whose_client_goes_away_mid_body_is_not_an_error(
        http: aiohttp.ClientSession, server: Server, caplog: pytest.LogCaptureFixture,
        how: str) -> None:
    caplog.set_level(logging.DEBUG)
    guard = server._guard
    assert guard is not None
    conn = await rawhttp.Connection.open(server.url)
    await conn.send(b"POST " + CONFIGMAPS.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                    b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"na')
    # the server holds the request, waiting for the rest of its body
    await waiting.eventually(lambda: [guard.state_of(t) for t in list(guard._conns)] == [
        State.ACTIVE], what="the server to wait for the body")
    if how == "reset":
        conn.writer.transport.abort()
    else:
        await conn.close()
    await waiting.eventually(lambda: closed_requests(http),
                             what="the request to be counted as closed by its client")
    status, _, _ = await request(http, "POST", CONFIGMAPS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}})
    assert status == 201
    assert [(r.name, r.getMessage()) for r in caplog.records
            if r.levelno >= logging.WARNING] == []
    assert any(r.levelno == logging.DEBUG and "went away" in r.getMessage()
               for r in caplog.records)
