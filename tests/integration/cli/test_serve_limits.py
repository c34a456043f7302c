"""``setpoint serve`` under a small file-descriptor limit keeps serving while more half-sent
requests are opened than it has descriptors: the oldest are closed to make room."""

from __future__ import annotations

import asyncio
import json
import resource
import shutil
from typing import Any

import pytest

from tests.conftest import ServeProcess
from tests.integration.api import rawhttp

HALF_REQUEST = b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAcce"


def allow_open_files(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= n:
        return
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.skip(f"this test opens {n} connections; the file limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


def get(serve: ServeProcess, path: str) -> tuple[int, bytes]:
    with serve.urlopen(path) as response:
        return response.status, response.read()


@pytest.mark.slow
async def test_more_half_sent_requests_than_file_descriptors(serve_factory: Any) -> None:
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit is not installed")
    allow_open_files(4096)
    serve: ServeProcess = serve_factory(launcher=["prlimit", "--nofile=1024:1024"])
    stalled: list[rawhttp.Connection] = []
    try:
        for _ in range(1100):
            conn = await rawhttp.Connection.open(serve.url, serve.ssl_context())
            await conn.send(HALF_REQUEST)
            stalled.append(conn)
        # the earliest were closed to make room for the later ones
        assert await asyncio.wait_for(
            asyncio.gather(*(c.closed_by_server() for c in stalled[:150])), 60)
        status, body = await asyncio.to_thread(get, serve, "/api/v1/namespaces")
        assert status == 200
        assert "default" in [ns["metadata"]["name"] for ns in json.loads(body)["items"]]
    finally:
        for conn in stalled:
            await conn.close()
    status, text = await asyncio.to_thread(get, serve, "/readyz?verbose")
    assert status == 200
    assert text.endswith(b"readyz check passed\n")
