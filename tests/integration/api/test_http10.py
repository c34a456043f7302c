"""HTTP/1.0 clients (no chunked bodies): a list or a watch is sent as plain bytes that end
when the server closes the connection, as Kubernetes answers them, never a 500."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson

from setpoint.server.server import Server
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget


async def http10_get(server: Server, path: str,
                     between: asyncio.Future[None] | None = None) -> tuple[bytes, bytes]:
    """The head and the body of an HTTP/1.0 GET, the body read to the connection's end."""
    port = int(server.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        async with asyncio.timeout(20):
            head = await reader.readuntil(b"\r\n\r\n")
            if between is not None:
                between.set_result(None)
            body = await reader.read()
    finally:
        writer.close()
    return head, body


async def test_lists_and_watches_over_http_1_0(http: aiohttp.ClientSession,
                                               server: Server) -> None:
    await install_widgets(http)
    await request(http, "POST", WIDGETS, widget("w0"))
    head, body = await http10_get(server, WIDGETS)
    assert head.startswith(b"HTTP/1.0 200"), head
    assert b"transfer-encoding" not in head.lower()
    listed = orjson.loads(body)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["w0"]

    opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    watching = asyncio.create_task(http10_get(
        server, f"{WIDGETS}?watch=true&timeoutSeconds=1"
                f"&resourceVersion={listed['metadata']['resourceVersion']}", opened))
    await opened
    written = [(await request(http, "POST", WIDGETS, widget(f"w{n}")))[1]["metadata"][
        "resourceVersion"] for n in range(1, 4)]
    head, body = await watching
    assert head.startswith(b"HTTP/1.0 200"), head
    assert b"transfer-encoding" not in head.lower()
    events = [orjson.loads(line) for line in body.splitlines()]
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == \
        [("ADDED", rv) for rv in written]
