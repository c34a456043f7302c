"""pods/log: a plain chunked stream, options, limits, and the client going away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from setpoint.server import streaming
from tests.integration.streaming import harness

LOG = f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/log"


async def get(app: harness.App, query: str = "") -> tuple[int, str, bytes, str]:
    async with aiohttp.ClientSession() as session, session.get(app.url + LOG + query) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.read(), \
            r.headers.get("Transfer-Encoding", "")


async def test_the_log_as_plain_text(app: harness.App) -> None:
    assert await get(app) == (200, "text/plain", b"one\ntwo\nthree\n", "chunked")


async def test_options_reach_the_target_and_limit_bytes_is_enforced(app: harness.App) -> None:
    status, _, body, _ = await get(app, "?tailLines=2&timestamps=true&limitBytes=40")
    assert status == 200
    assert body == b"2026-01-01T00:00:00.000000000Z two\n2026-"
    assert len(body) == 40
    assert app.target.log_requests[-1] == streaming.LogOptions(
        tail_lines=2, timestamps=True, limit_bytes=40)


async def test_errors_before_the_stream_are_statuses(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(app.url + LOG + "?previous=true") as response:
            assert response.status == 400
            assert (await response.json())["message"] == (
                'previous terminated container "main" in pod "web" not found')
        async with session.get(app.url + LOG + "?tailLines=-5") as response:
            body = await response.json()
            assert response.status == 422
            assert body["message"] == ('PodLogOptions "web" is invalid: tailLines: '
                                       "Invalid value: -5: must be greater than or equal to 0")
        async with session.post(app.url + LOG) as response:
            assert response.status == 405


async def test_follow_streams_lines_as_they_come(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session, \
            session.get(app.url + LOG + "?follow=true") as response:
        assert await response.content.readline() == b"one\n"
        await response.content.readline()
        await response.content.readline()
        await app.target.log_more.put(b"four\n")
        assert await response.content.readline() == b"four\n"
        await app.target.log_more.put(None)  # the container ended
        assert await response.content.read() == b""


async def test_a_follower_going_away_closes_the_log_while_it_is_quiet(
        app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        response = await session.get(app.url + LOG + "?follow=true")
        for _ in range(3):
            await response.content.readline()
        response.close()  # nothing more is ever logged: only the disconnection can end it
    await app.target.log_closed.wait()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(write_timeout=0.2)])
async def test_a_follower_that_does_not_read_is_cut_off(app: harness.App) -> None:
    app.target.log_lines = [b"x" * 65536] * 400  # 25 MiB that nobody reads
    _, writer = await asyncio.open_connection(app.url.split("//")[1].split(":")[0],
                                              int(app.url.rsplit(":", 1)[1]))
    writer.write(f"GET {LOG}?follow=true HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    await app.target.log_closed.wait()  # the server gave up on this client
    writer.close()
    await writer.wait_closed()


class BrokenLog(harness.ProcessTarget):
    async def logs(self, options: streaming.LogOptions) -> AsyncIterator[bytes]:
        async def lines() -> AsyncIterator[bytes]:
            yield b"one\n"
            raise OSError("the node went away")

        return lines()


async def test_a_log_failing_midway_ends_the_stream(tmp_path: Path) -> None:
    app = await harness.start_app(BrokenLog(tmp_path))
    try:
        async with aiohttp.ClientSession() as session, session.get(app.url + LOG) as r:
            assert r.status == 200
            assert await r.content.readline() == b"one\n"
            with pytest.raises(aiohttp.ClientPayloadError):
                await r.read()
    finally:
        await app.close()


async def test_an_http_1_0_client_gets_the_log_unchunked_to_the_connection_end(
        app: harness.App) -> None:
    host, port = app.url.removeprefix("http://").rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {LOG} HTTP/1.0\r\n\r\n".encode())
        async with asyncio.timeout(20):
            head = await reader.readuntil(b"\r\n\r\n")
            body = await reader.read()
    finally:
        writer.close()
    assert head.startswith(b"HTTP/1.0 200"), head
    assert b"transfer-encoding" not in head.lower()
    assert body == b"one\ntwo\nthree\n"
