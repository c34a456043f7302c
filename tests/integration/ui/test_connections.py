"""A keep-alive connection that served a /ui file is idle, not half-sent: the connection
connection is closed as idle, never after the header timeout (which would close a
browser's connection under its next request)."""

from __future__ import annotations

import asyncio

import aiohttp

from setpoint.server.limits import Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api import rawhttp
from tests.integration.api.test_connection_limits import closed_metric


async def test_a_connection_that_fetched_ui_files_idles_out_not_headers_out() -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"), compaction_interval=None,
                          limits=Limits(header_timeout=0.5, idle_timeout=2.0))
    async with Server(config) as server:
        conn = await rawhttp.Connection.open(server.url)
        try:
            for path in ("/ui/", "/ui/app.js", "/ui/nope.js"):
                await conn.send_head("GET", path, {})
                response = await asyncio.wait_for(conn.read_response(), 10)
                assert response.status in (200, 404)
            assert await asyncio.wait_for(conn.closed_by_server(), 30)
        finally:
            await conn.close()
        async with aiohttp.ClientSession(base_url=server.url) as http:
            # closed as idle (by the guard or by aiohttp's keep-alive timeout, whichever
            # comes first), never as a connection that did not finish its header
            assert await closed_metric(http, "header_timeout") == 0
