"""The lean HTTP/1.1 client: the response parser (any split of the bytes, every framing, the
bounds) and the pool against scripted servers (keep-alive, limits, a dropped idle
connection, timeouts, hostile answers)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.client import ClientConfig, http1
from setpoint.client import api as client_api

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


def ok(body: bytes, *headers: str) -> bytes:
    head = "\r\n".join(["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *headers])
    return head.encode() + b"\r\n\r\n" + body


def chunked(*parts: bytes) -> bytes:
    out = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
    for part in parts:
        out += f"{len(part):x};ext=1\r\n".encode() + part + b"\r\n"
    return out + b"0\r\nTrailer: t\r\n\r\n"


def parse(data: bytes, splits: list[int], *, max_header: int = 4096,
          max_body: int = 1 << 20) -> http1._Parser:
    parser = http1._Parser(max_header, max_body, head_request=False)
    cuts = sorted({min(s, len(data)) for s in splits})
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
    done = False
    for piece in pieces:
        assert not done, "bytes after a complete response"
        done = parser.feed(piece)
    assert done
    return parser


@given(body=st.binary(max_size=300), splits=st.lists(st.integers(0, 400), max_size=8))
def test_a_sized_response_parses_the_same_however_it_is_split(body: bytes,
                                                              splits: list[int]) -> None:
    parser = parse(ok(body, "Content-Type: application/json"), splits)
    assert (parser.status, parser.reason, parser.body) == (200, "OK", body)
    assert parser.headers["content-type"] == "application/json"
    assert parser.keep_alive


@given(parts=st.lists(st.binary(min_size=1, max_size=50), max_size=5),
       splits=st.lists(st.integers(0, 400), max_size=8))
def test_a_chunked_response_parses_the_same_however_it_is_split(parts: list[bytes],
                                                                splits: list[int]) -> None:
    parser = parse(chunked(*parts), splits)
    assert (parser.status, parser.body, parser.headers["x-a"]) == (201, b"".join(parts), "1")


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_protocol_error(data: bytes) -> None:
    parser = http1._Parser(128, 128, head_request=False)
    try:
        parser.feed(data)
        parser.eof()
    except http1.ProtocolError:
        pass


@pytest.mark.parametrize(("data", "message"), [
    (b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 5000 + b"\r\n\r\n", "headers exceed"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 5000, "headers exceed"),
    (b"SPDY/3 200 OK\r\n\r\n", "status line"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n\r\n", "exceeds"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffff\r\n", "exceeds"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 2000, "too long"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "CRLF"),
])
def test_hostile_answers_are_protocol_errors(data: bytes, message: str) -> None:
    parser = http1._Parser(4096, 1 << 20, head_request=False)
    with pytest.raises(http1.ProtocolError, match=message):
        parser.feed(data)


def test_interim_answers_are_skipped_and_close_framing_ends_at_eof() -> None:
    parser = http1._Parser(4096, 100, head_request=False)
    assert not parser.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\nabc")
    assert not parser.feed(b"def")
    assert parser.eof()
    assert (parser.status, parser.body, parser.keep_alive) == (200, b"abcdef", False)
    big = http1._Parser(4096, 4, head_request=False)
    big.feed(b"HTTP/1.1 200 OK\r\n\r\nabc")
    with pytest.raises(http1.ProtocolError, match="exceeds"):
        big.feed(b"de")


def test_a_request_with_a_line_break_is_refused() -> None:
    with pytest.raises(ValueError, match="line break"):
        http1.encode_request("GET", "/", "h", {"Authorization": "Bearer a\r\nX-Evil: 1"}, None)
    with pytest.raises(ValueError, match="line break"):
        http1.encode_request("GET", "/a\nb", "h", {}, None)
    data = http1.encode_request("PATCH", "/p?q=1", "h:1", {"A": "b"}, b"{}")
    assert data == b"PATCH /p?q=1 HTTP/1.1\r\nHost: h:1\r\nA: b\r\nContent-Length: 2\r\n\r\n{}"


# --- the pool against scripted servers ----------------------------------------------------

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


@asynccontextmanager
async def scripted(script: Script) -> AsyncIterator[tuple[http1.Pool, list[int]]]:
    """A server running ``script`` per connection (numbered), and a pool for it."""
    connections: list[int] = []
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        current = asyncio.current_task()
        assert current is not None
        handlers.add(current)  # type: ignore[arg-type]
        try:
            await script(reader, writer, connections[-1])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = http1.Pool("127.0.0.1", port, ssl_context=None, authority=f"127.0.0.1:{port}",
                      max_connections=2)
    try:
        yield pool, connections
    finally:
        pool.close()
        server.close()
        for task in list(handlers):
            task.cancel()
        await server.wait_closed()


async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
    while True:
        head = await read_request(reader)
        writer.write(ok(head.split(b" ")[1]))
        await writer.drain()


async def test_requests_reuse_connections_within_the_limit() -> None:
    async with scripted(keep_alive) as (pool, connections):
        answers = await asyncio.gather(*(pool.request("GET", f"/{i}", {}) for i in range(10)))
        assert [a.body for a in answers] == [f"/{i}".encode() for i in range(10)]
        assert len(connections) <= 2  # max_connections
        for _ in range(5):
            assert (await pool.request("POST", "/x", {}, b"{}")).body == b"/x"
        assert len(connections) <= 2


async def test_a_dropped_idle_connection_is_retried_only_when_idempotent() -> None:
    async def one_answer_then_close(reader: asyncio.StreamReader,
                                    writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(ok(b"first"))  # no "Connection: close": the client keeps it
        await writer.drain()
        await reader.read(1)  # the next request arrives ... and is dropped unanswered

    async with scripted(one_answer_then_close) as (pool, connections):
        await pool.request("GET", "/", {})
        assert (await pool.request("GET", "/", {})).body == b"first"  # sent again
        assert len(connections) == 2
        with pytest.raises(http1.ConnectionLost) as lost:
            await pool.request("PATCH", "/", {}, b"{}")  # may have been applied: not resent
        assert lost.value.nothing_received
        assert len(connections) == 2  # the PATCH went on the kept connection, once


async def test_connection_close_and_garbage_after_a_response_are_not_reused() -> None:
    async def close_after(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                          n: int) -> None:
        while True:
            await read_request(reader)
            extra = b"junk" if n == 1 else b""
            header = ("Connection: close",) if n == 0 else ()
            writer.write(ok(b"x", *header) + extra)
            await writer.drain()

    async with scripted(close_after) as (pool, connections):
        for _ in range(3):
            await pool.request("GET", "/", {})
        assert len(connections) == 3  # closed as asked; out of step after the junk


async def test_a_client_times_out_a_silent_server_and_maps_failures() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await read_request(reader)
        if n == 0:
            await asyncio.Event().wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab")  # then closes

    async with scripted(silent) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}", request_timeout=0.2)
        async with client_api.Client(config) as client:
            with pytest.raises(errors.Timeout):
                await client.version()
            with pytest.raises(errors.ServiceUnavailable, match="connection failed"):
                await client.version()  # a truncated body on a new connection


async def test_hostile_answers_become_service_unavailable() -> None:
    async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX: " + b"a" * 100_000)
        await writer.drain()
        await reader.read(1)

    async with scripted(hostile) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            with pytest.raises(errors.ServiceUnavailable, match="headers exceed"):
                await client.version()


# --- streamed responses -------------------------------------------------------------------


async def stream_body(pool: http1.Pool, target: str = "/w") -> tuple[http1.Stream, bytes]:
    stream = await pool.stream("GET", target, {})
    out = bytearray()
    while chunk := await stream.read_some():
        out += chunk
    return stream, bytes(out)


@given(parts=st.lists(st.binary(min_size=1, max_size=60), max_size=6),
       splits=st.lists(st.integers(0, 500), max_size=8))
def test_a_streamed_body_is_the_same_however_its_bytes_arrive(parts: list[bytes],
                                                              splits: list[int]) -> None:
    """What the reader takes, piece by piece, is the body, whatever the split."""
    data = chunked(*parts)
    parser = http1._Parser(4096, 1 << 40, head_request=False)
    cuts = sorted({min(s, len(data)) for s in splits})
    taken = bytearray()
    done = False
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        if b > a:
            done = parser.feed(data[a:b])
            if parser.head_seen:
                taken += parser.take_body()
    assert done
    assert parser.status == 201
    assert bytes(taken) == b"".join(parts)


async def test_a_stream_reads_events_as_they_come_and_ends_with_the_body() -> None:
    went_on = asyncio.Event()

    async def events(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"6\r\nfirst\n\r\n")
        await writer.drain()
        await went_on.wait()
        writer.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
        await writer.drain()
        await reader.read(1)

    async with scripted(events) as (pool, connections):
        stream = await pool.stream("GET", "/w", {})
        assert (stream.status, stream.headers["transfer-encoding"]) == (200, "chunked")
        assert await stream.read_some() == b"first\n"  # before the rest was even sent
        assert pool._count == 1  # the connection is the stream's until it ends or closes
        went_on.set()
        rest = bytearray()
        while chunk := await stream.read_some():
            rest += chunk
        assert bytes(rest) == b"second\n"
        assert await stream.read_some() == b""
        assert pool._count == 0  # its end closed it, and freed its place once
        stream.close()  # idempotent
        assert pool._count == 0
        assert len(connections) == 1


async def test_a_fast_server_is_held_back_by_a_slow_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Unread bytes stay near the high-water mark: the connection stops reading the socket
    (the server then blocks in drain) until the reader takes what is buffered."""
    monkeypatch.setattr(http1, "STREAM_HIGH_WATER", 64 * 1024)
    piece = b"x" * 8191 + b"\n"
    total = 4 * 1024 * 1024

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(total // len(piece)):
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with scripted(flood) as (pool, _):
        stream = await pool.stream("GET", "/w", {})
        received, most_waiting = 0, 0
        while True:
            await asyncio.sleep(0)  # the loop delivers what the socket has
            most_waiting = max(most_waiting, stream._parser.buffered)
            chunk = await stream.read_some()
            if not chunk:
                break
            received += len(chunk)
        assert received == total // len(piece) * len(piece)
        # the high-water mark plus at most one socket read past it
        assert most_waiting <= 64 * 1024 + 256 * 1024


async def test_a_chunk_announced_larger_than_memory_is_read_as_it_arrives() -> None:
    sent = asyncio.Event()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"10000000000\r\n" + b"y" * 100_000)
        await writer.drain()
        sent.set()
        await reader.read(1)

    async with scripted(endless) as (pool, _):
        stream = await pool.stream("GET", "/w", {})
        await sent.wait()
        got = 0
        while got < 100_000:
            got += len(await stream.read_some())
        assert got == 100_000
        assert len(stream._parser._buffer) == 0  # nothing held back for the chunk's end
        stream.close()


async def test_a_stream_refused_with_a_status_raises_it_and_keeps_no_connection() -> None:
    status = (b'{"kind":"Status","apiVersion":"v1","status":"Failure","message":"gone",'
              b'"reason":"Expired","code":410}')

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 410 Gone\r\nContent-Length: %d\r\n\r\n" % len(status) + status)
        await writer.drain()
        await reader.read(1)

    async with scripted(refuse) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            transport = client._transport
            with pytest.raises(errors.Expired, match="gone"):
                await transport.stream("GET", "/api/v1/configmaps", params={"watch": "1"})
            assert transport._pool is not None
            assert transport._pool._count == 0
            assert not transport._pool._streaming


async def test_a_stream_cut_mid_chunk_is_a_lost_connection() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  n: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc")
        await writer.drain()

    async with scripted(cut) as (pool, _):
        with pytest.raises(http1.ConnectionLost):
            await stream_body(pool)


async def test_a_request_waiting_for_a_connection_and_a_stream_head_time_out() -> None:
    release = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   n: int) -> None:
        head = await read_request(reader)
        if b"/silent" in head:
            await reader.read(1)  # never answers
            return
        if b"/w" not in head:
            writer.write(ok(head.split(b" ")[1]))
            await writer.drain()
            await keep_alive(reader, writer, n)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await keep_alive(reader, writer, n)

    async with scripted(slow) as (pool, _):
        first = await pool.stream("GET", "/w", {})
        second = await pool.stream("GET", "/w", {})  # both connections (max 2) are held
        with pytest.raises(TimeoutError):
            await pool.request("GET", "/", {}, timeout=0.1)  # no connection frees up
        assert pool._count == 2
        assert not pool._waiters  # the timed-out wait left no trace
        release.set()
        assert await first.read_some() == b"x"
        assert await first.read_some() == b""  # its end frees a place
        second.close()
        with pytest.raises(TimeoutError):
            await pool.stream("GET", "/silent", {}, timeout=0.1)  # no head in time
        assert pool._count == 0  # the silent connection was closed, not kept
        assert (await pool.request("GET", "/ok", {}, timeout=5)).body == b"/ok"
