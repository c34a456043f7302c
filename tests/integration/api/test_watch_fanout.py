"""Watch events written from the watch cache's fan-out to caught-up connections: every
watcher still gets every event once, in order, over TLS as over plain HTTP (the events a
watch takes in one turn of the event loop in one write); a watcher whose
client stops reading falls back to its task, falls behind and resumes; watchers that
disconnect in the middle of a burst leave the others served."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting
from tests.conftest import kubeconfig_ssl_context
from tests.integration.api.helpers import WIDGETS, install_widgets, request, secured_config, widget


async def open_watch(server: Server, query: str, *, context: ssl.SSLContext | None = None,
                     accept: str = "application/json", rcvbuf: int | None = None
                     ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw watch connection, its response headers read. With ``rcvbuf`` the client
    buffers little (a small socket buffer, and a reader that stops reading ahead at 32 KiB),
    so that a client that does not read soon backs the server's transport up."""
    host, port = "127.0.0.1", int(server.url.rsplit(":", 1)[1])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, port))
    reader, writer = await asyncio.open_connection(
        sock=sock, ssl=context, server_hostname="localhost" if context else None,
        limit=1 << 20 if rcvbuf is None else 1 << 14)
    writer.write(f"GET {WIDGETS}?watch=true&{query} HTTP/1.1\r\nHost: localhost\r\n"
                 f"Accept: {accept}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding: chunked" in head.lower()
    return reader, writer


async def next_event(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next event of a chunked watch body; None at its end."""
    size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
    if size == 0:
        assert await reader.readexactly(2) == b"\r\n"
        return None
    data = await reader.readexactly(size + 2)
    assert data.endswith(b"\n\r\n")
    event: dict[str, Any] = orjson.loads(data[:-2])
    return event


async def revisions_to_end(reader: asyncio.StreamReader) -> list[str]:
    """The resourceVersions of the events left in a watch body, read to its end."""
    got: list[str] = []
    async with asyncio.timeout(20):
        while (event := await next_event(reader)) is not None:
            got.append(event["object"]["metadata"]["resourceVersion"])
    return got


async def events_until(reader: asyncio.StreamReader, last: str) -> list[tuple[str, str]]:
    """``(type, resourceVersion)`` of the events up to the one of ``last``."""
    seen: list[tuple[str, str]] = []
    async with asyncio.timeout(20):
        while True:
            event = await next_event(reader)
            assert event is not None, f"the watch ended after {seen}"
            rv = event["object"]["metadata"]["resourceVersion"]
            seen.append((event["type"], rv))
            if rv == last:
                return seen


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    try:
        await writer.wait_closed()
    except (ConnectionError, ssl.SSLError):
        pass


@pytest.fixture
async def secure_server(tmp_path: Path) -> AsyncIterator[tuple[Server, ssl.SSLContext]]:
    config = secured_config(tmp_path)
    async with Server(config) as s:
        assert config.kubeconfig_path is not None
        context = kubeconfig_ssl_context(config.kubeconfig_path)
        assert context is not None
        yield s, context


async def test_watchers_over_tls_get_every_event_once_in_order(
        secure_server: tuple[Server, ssl.SSLContext]) -> None:
    server, context = secure_server
    connector = aiohttp.TCPConnector(ssl=context)
    async with aiohttp.ClientSession(base_url=server.url, connector=connector) as http:
        await install_widgets(http)
        await request(http, "POST", WIDGETS, widget("w0"))
        _, listed, _ = await request(http, "GET", WIDGETS)
        since = listed["metadata"]["resourceVersion"]
        kinds = [("", "application/json"),
                 ("fieldSelector=metadata.name%3Dw0", "application/json"),
                 ("", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")]
        watches = [(kind, await open_watch(server, f"resourceVersion={since}&{kind[0]}",
                                           context=context, accept=kind[1]))
                   for kind in kinds * 8]
        try:
            before = server._watch.sent_from_fanout
            writes_before = server._watch.fanout_writes
            # a burst: writes acknowledged while the fan-out of the earlier ones runs
            answers = await asyncio.gather(*(
                request(http, "PATCH", f"{WIDGETS}/w0", {"spec": {"size": i + 2}},
                        content_type="application/merge-patch+json") if i % 3 == 0 else
                request(http, "POST", WIDGETS, widget(f"b{i}")) for i in range(30)))
            assert all(status in (200, 201) for status, _, _ in answers)
            final = await request(http, "PATCH", f"{WIDGETS}/w0", {"spec": {"size": 99}},
                                  content_type="application/merge-patch+json")
            written = sorted((int(body["metadata"]["resourceVersion"]),
                              body["metadata"]["name"]) for _, body, _ in [*answers, final])
            last = str(written[-1][0])
            everything = [("MODIFIED" if name == "w0" else "ADDED", str(rv))
                          for rv, name in written]
            only_w0 = [("MODIFIED", str(rv)) for rv, name in written if name == "w0"]
            for (query, _accept), (reader, _writer) in watches:
                seen = await events_until(reader, last)
                assert seen == (only_w0 if query else everything), query
            # the events went out from the fan-out (not only through the watches' tasks),
            # those a watch took in one turn of the loop in one write (on the test's
            # standard asyncio loop the burst reaches the cache in a few turns; on uvloop
            # with memory storage it would come one event per turn, and nothing gathers)
            sent = server._watch.sent_from_fanout - before
            assert sent > 0
            assert 0 < server._watch.fanout_writes - writes_before < sent
        finally:
            for _, (_, writer) in watches:
                await close(writer)


async def test_a_watcher_that_stops_reading_falls_behind_and_resumes(tmp_path: Path
                                                                     ) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          kubeconfig_path=tmp_path / "kubeconfig", watcher_buffer=4)
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        await install_widgets(http)
        _, listed, _ = await request(http, "GET", WIDGETS)
        since = listed["metadata"]["resourceVersion"]
        reader, writer = await open_watch(server, f"resourceVersion={since}", rcvbuf=4096)
        try:
            pad = "x" * 60_000
            revisions = []
            for i in range(60):  # about 3.6 MB the client does not read meanwhile
                status, body, _ = await request(http, "POST", WIDGETS, widget(
                    f"w{i}", metadata={"name": f"w{i}", "annotations": {"pad": pad}}))
                assert status == 201, body
                revisions.append(body["metadata"]["resourceVersion"])
            # now read: a prefix of the events, in order, then the end of the stream
            got = await revisions_to_end(reader)
            assert got == revisions[:len(got)]
            assert len(got) < len(revisions)  # it fell behind and its watch ended
        finally:
            await close(writer)
        # the client watches again from the last event it saw and gets the rest, once each
        reader, writer = await open_watch(server, f"resourceVersion={got[-1]}")
        try:
            rest = await events_until(reader, revisions[-1])
            assert [rv for _, rv in rest] == revisions[len(got):]
        finally:
            await close(writer)


async def test_watchers_that_disconnect_mid_burst_leave_the_others_served(
        http: aiohttp.ClientSession, server: Server) -> None:
    await install_widgets(http)
    _, listed, _ = await request(http, "GET", WIDGETS)
    since = listed["metadata"]["resourceVersion"]
    assert server.cache is not None
    watchers_before = server.cache.watcher_count()
    staying = [await open_watch(server, f"resourceVersion={since}") for _ in range(10)]
    leaving = [await open_watch(server, f"resourceVersion={since}") for _ in range(10)]
    try:
        async def burst(start: int) -> list[str]:
            answers = await asyncio.gather(*(request(http, "POST", WIDGETS, widget(f"w{i}"))
                                             for i in range(start, start + 20)))
            return [body["metadata"]["resourceVersion"] for _, body, _ in answers]

        first = asyncio.create_task(burst(0))
        # once the burst is being delivered, the leaving ones reset without reading
        async with asyncio.timeout(10):
            opening = await next_event(staying[0][0])
        assert opening is not None
        for _, writer in leaving:
            writer.transport.abort()
        revisions = sorted([*await first, *await burst(20)], key=int)
        for n, (reader, _) in enumerate(staying):
            seen = await events_until(reader, revisions[-1])
            if n == 0:
                seen.insert(0, (opening["type"], opening["object"]["metadata"][
                    "resourceVersion"]))
            assert seen == [("ADDED", rv) for rv in revisions]
        # the server let go of the closed ones
        await waiting.eventually(
            lambda: server.cache is not None
            and server.cache.watcher_count() == watchers_before + len(staying),
            what="the disconnected watchers to be closed")
    finally:
        for _, writer in staying:
            await close(writer)
