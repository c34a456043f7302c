"""The lean client's streamed responses against hostile servers and careless callers:
malformed framing, cut connections, a closed pool under a reader, cancelled waiters for a
place among ``max_connections``; every path leaves no connection open or counted."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.client import ClientConfig, http1, watch
from setpoint.client import api as client_api
from setpoint.client.deadlinetimer import Deadline
from setpoint.client.transport import BodyStream
from setpoint.testing import eventually
from tests.unit.client.test_http1 import Script, read_request, scripted

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

EVENT = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"7"}}}\n'
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def watch_configmaps(client: client_api.Client, *, max_line: int = watch.MAX_LINE
                     ) -> watch.Watch:
    """A watch over the client's transport (no discovery: the scripted servers answer the
    watch only)."""
    async def opener() -> tuple[BodyStream, str, str]:
        stream = await client._transport.stream("GET", "/api/v1/configmaps",
                                                params={"watch": "1"})
        return stream, "v1", "ConfigMap"
    return watch.Watch(opener, inactivity_timeout=30, max_line=max_line)


def assert_nothing_held(pool: http1.Pool) -> None:
    assert pool._count == 0
    assert not pool._streaming
    assert not pool._idle


# --- the parser ---------------------------------------------------------------------------


@pytest.mark.parametrize("size", [b"+5", b"-0", b"0x5", b"1_0", b"", b" ", b"5 5", b"\xb2"])
def test_a_chunk_size_is_hex_digits_only(size: bytes) -> None:
    """``int(_, 16)`` would take a sign, ``0x`` and underscores; the grammar is 1*HEXDIG."""
    parser = http1._Parser(4096, 1 << 20, head_request=False)
    with pytest.raises(http1.ProtocolError, match="chunk size"):
        parser.feed(CHUNKED_HEAD + size + b"\r\nhello\r\n0\r\n\r\n")


@pytest.mark.parametrize("data", [
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",  # "2" superscript: isdigit, not int
    b"HTTP/1.1 \xb2\xb2\xb2 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n",
])
def test_numbers_in_the_head_are_ascii_digits_only(data: bytes) -> None:
    parser = http1._Parser(4096, 1 << 20, head_request=False)
    with pytest.raises(http1.ProtocolError):
        parser.feed(data)


HEAD_TEXT = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


@given(status=HEAD_TEXT, length=HEAD_TEXT, size=HEAD_TEXT, body=st.binary(max_size=40),
       chunked=st.booleans(), splits=st.lists(st.integers(0, 200), max_size=6))
@example(status=b"200", length=b"\xb2", size=b"1", body=b"", chunked=False, splits=[])
@example(status=b"\xb9\xb2\xb3", length=b"1", size=b"1", body=b"", chunked=False, splits=[])
def test_hostile_numbers_anywhere_raise_only_protocol_error(
        status: bytes, length: bytes, size: bytes, body: bytes, chunked: bool,
        splits: list[int]) -> None:
    """Any bytes where the status code, Content-Length or a chunk size go, split anywhere:
    the parser answers or raises ProtocolError, nothing else (an exception of another type
    would escape the protocol's ``data_received``)."""
    framing = b"Transfer-Encoding: chunked" if chunked else b"Content-Length: " + length
    data = b"HTTP/1.1 " + status + b" X\r\n" + framing + b"\r\n\r\n" + size + b"\r\n" + body
    parser = http1._Parser(4096, 1 << 20, head_request=False)
    cuts = sorted({min(s, len(data)) for s in splits})
    try:
        for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
            if b > a and parser.feed(data[a:b]):
                break
        parser.eof()
    except http1.ProtocolError:
        pass


def test_a_head_arriving_byte_by_byte_parses_and_is_bounded() -> None:
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(
        b"X-%d: %s\r\n" % (i, b"v" * 50) for i in range(1000)) + b"Content-Length: 2\r\n\r\n"
    parser = http1._Parser(len(head), 1 << 20, head_request=False)
    for i in range(len(head)):
        assert not parser.feed(head[i:i + 1])
    assert parser.feed(b"ok")
    assert (parser.headers["x-999"], parser.body) == ("v" * 50, b"ok")
    small = http1._Parser(1024, 1 << 20, head_request=False)
    for i in range(1024):
        assert not small.feed(head[i:i + 1])
    with pytest.raises(http1.ProtocolError, match="headers exceed"):
        small.feed(head[1024:1025])
    # a blank line split across feeds is found
    split = http1._Parser(4096, 1 << 20, head_request=False)
    for piece in (b"HTTP/1.1 204 No Content\r", b"\n\r", b"\n"):
        done = split.feed(piece)
    assert done
    assert split.status == 204


# --- streams against scripted servers -----------------------------------------------------


async def one_event_then_hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                              n: int) -> None:
    await read_request(reader)
    writer.write(CHUNKED_HEAD + chunk(EVENT))
    await writer.drain()
    await reader.read(1)


async def test_reading_a_stream_the_pool_closed_raises_and_does_not_spin() -> None:
    """The pool closed between two reads: the next read raises at once. (It used to loop
    without yielding, the connection closed but not yet reported lost, freezing the loop.)"""
    async with scripted(one_event_then_hold) as (pool, _):
        stream = await pool.stream("GET", "/w", {})
        assert await stream.read_some() == EVENT
        pool.close()
        with pytest.raises(http1.ConnectionLost, match="client is closed"):
            await stream.read_some()  # no await in between: the loss is not yet reported
        assert await stream.read_some() == b""
        assert_nothing_held(pool)


async def test_closing_the_client_between_watch_reads_ends_the_watch() -> None:
    async with scripted(one_event_then_hold) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client, watch_configmaps(client) as events:
            assert (await anext(events)).type == "ADDED"
            await client.close()
            with pytest.raises(errors.ServiceUnavailable, match="client is closed"):
                await anext(events)


async def test_a_stream_waiting_for_its_head_is_broken_by_closing_the_pool() -> None:
    request_seen = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await read_request(reader)
        request_seen.set()
        await reader.read(1)

    async with scripted(silent) as (pool, _):
        opening = asyncio.create_task(pool.stream("GET", "/w", {}))
        await request_seen.wait()
        pool.close()
        with pytest.raises(http1.ConnectionLost, match="client is closed"):
            await opening  # it used to stream on, from a closed pool
        assert_nothing_held(pool)


class _Transport:
    """A transport whose closing is never reported (a TLS shutdown awaiting its peer)."""

    def __init__(self) -> None:
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def stream_on_fake_transport(pool: http1.Pool) -> tuple[http1.Stream, http1._Connection,
                                                        _Transport]:
    connection = http1._Connection()
    transport = _Transport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    parser = http1._Parser(4096, 1 << 40, head_request=False)
    connection._parser, connection._streaming = parser, True
    connection.data_received(CHUNKED_HEAD)
    pool._count += 1
    pool._streaming.add(connection)
    return http1.Stream(pool, connection, parser, "/w"), connection, transport


async def test_a_waiting_reader_learns_of_close_before_the_transport_reports_it() -> None:
    pool = http1.Pool("127.0.0.1", 1, ssl_context=None, authority="x")
    stream, connection, transport = stream_on_fake_transport(pool)
    reading = asyncio.create_task(stream.read_some())
    await asyncio.sleep(0)  # the reader waits for the body
    stream.close()
    assert await reading == b""
    assert transport.closed
    assert not connection.lost  # the loss is still unreported
    assert_nothing_held(pool)

    other, connection, transport = stream_on_fake_transport(pool)
    reading = asyncio.create_task(other.read_some())
    await asyncio.sleep(0)
    pool.close()
    with pytest.raises(http1.ConnectionLost, match="client is closed"):
        await reading
    assert transport.closed
    assert not connection.lost
    assert_nothing_held(pool)


async def test_data_arriving_while_closing_is_ignored_and_flow_control_resumes() -> None:
    pool = http1.Pool("127.0.0.1", 1, ssl_context=None, authority="x")
    stream, connection, transport = stream_on_fake_transport(pool)
    big = b"x" * (http1.STREAM_HIGH_WATER + 1)
    connection.data_received(chunk(big)[:-2])
    assert not transport.reading  # past the high-water mark: the socket is not read
    assert await stream.read_some() == big
    assert transport.reading  # taken: reading resumes
    stream.close()
    connection.data_received(chunk(big))  # a TLS shutdown still delivers: dropped
    assert stream._parser.buffered == 0
    assert transport.reading
    assert_nothing_held(pool)


async def test_a_cancelled_waiter_passes_a_freed_place_on() -> None:
    """Both places held by streams; two requests wait. A stream closes and wakes the first,
    which is cancelled before it runs: the second gets the place (it used to wait on)."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        head = await read_request(reader)
        if head.startswith(b"GET /w"):
            writer.write(CHUNKED_HEAD)
            await writer.drain()
            await reader.read(1)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read(1)

    async with scripted(answer) as (pool, _):  # max_connections=2
        streams = [await pool.stream("GET", "/w", {}) for _ in range(2)]
        first = asyncio.create_task(pool.request("GET", "/first", {}))
        second = asyncio.create_task(pool.request("GET", "/second", {}))
        await eventually(lambda: len(pool._waiters) == 2)
        streams[0].close()  # wakes the first ...
        first.cancel()  # ... cancelled before it ran
        with pytest.raises(asyncio.CancelledError):
            await first
        async with asyncio.timeout(30):  # a failure bound, not a measurement
            assert (await second).body == b"ok"
        streams[1].close()
        pool.close()
        assert_nothing_held(pool)


async def test_streams_at_the_limit_leave_requests_waiting_for_a_place() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        while True:
            head = await read_request(reader)
            if head.startswith(b"GET /w"):
                writer.write(CHUNKED_HEAD + chunk(EVENT))
                await writer.drain()
                await reader.read(1)
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async with scripted(answer) as (pool, connections):
        streams = [await pool.stream("GET", "/w", {}) for _ in range(2)]
        requests = [asyncio.create_task(pool.request("GET", f"/{i}", {})) for i in range(3)]
        await eventually(lambda: len(pool._waiters) == 3)
        assert not any(r.done() for r in requests)
        assert await streams[1].read_some() == EVENT
        streams[1].close()
        assert [(await r).body for r in requests] == [b"ok"] * 3
        assert len(connections) == 3  # the requests shared the one freed place
        assert pool._count == 2  # a stream and an idle connection
        streams[0].close()
        pool.close()
        assert_nothing_held(pool)


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def answering(answer: bytes, *, then: str = "hold") -> Script:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await read_request(reader)
        writer.write(answer)
        await writer.drain()
        if then == "reset":
            _reset(writer)
        elif then == "hold":
            await reader.read(1)
    return script


@pytest.mark.parametrize(("answer", "then", "match"), [
    (CHUNKED_HEAD + chunk(EVENT) + b"zz\r\n", "hold", "chunk size"),
    (CHUNKED_HEAD + chunk(EVENT) + b"-1\r\n", "hold", "chunk size"),
    (CHUNKED_HEAD + chunk(EVENT) + b"5" * 5000, "hold", "chunk-size line"),
    (CHUNKED_HEAD + chunk(EVENT) + b"5\r\nabcdeXY", "hold", "CRLF"),
    (CHUNKED_HEAD + chunk(EVENT) + b"100\r\nabc", "close", "closed before"),
    (CHUNKED_HEAD + chunk(EVENT) + b"100\r\nabc", "reset", "connection lost"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + EVENT, "close", "closed before"),
])
async def test_a_broken_stream_fails_the_watch_after_what_arrived_whole(
        answer: bytes, then: str, match: str) -> None:
    async with scripted(answering(answer, then=then)) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            async with watch_configmaps(client) as events:
                assert (await anext(events)).resource_version == "7"
                with pytest.raises(errors.ServiceUnavailable, match=match):
                    await anext(events)
            assert client._transport._pool is not None
            assert_nothing_held(client._transport._pool)


@pytest.mark.parametrize(("answer", "match"), [
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 100_000, "headers exceed"),
    (b"HTTP/1.1 200 OK\r\nTransfer-", "closed before"),
    (b"garbage\r\n\r\n", "status line"),
])
async def test_a_broken_head_fails_opening_the_watch(answer: bytes, match: str) -> None:
    async with scripted(answering(answer, then="close")) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            with pytest.raises(errors.ServiceUnavailable, match=match):
                async with watch_configmaps(client):
                    pass
            assert client._transport._pool is not None
            assert_nothing_held(client._transport._pool)


async def test_a_head_that_never_comes_times_out_the_watch() -> None:
    async with scripted(answering(b"HTTP/1.1 200 OK\r\n")) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}", request_timeout=0.3)
        async with client_api.Client(config) as client:
            with pytest.raises(errors.Timeout):
                async with watch_configmaps(client):
                    pass
            assert client._transport._pool is not None
            assert_nothing_held(client._transport._pool)


@pytest.mark.parametrize("answer", [
    # interim answers before the head, and the head split over many writes below
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nX: 1\r\n\r\n"
    + CHUNKED_HEAD + chunk(EVENT) + b"0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(EVENT) + EVENT,
    b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + EVENT,  # read to the close
    CHUNKED_HEAD + chunk(EVENT) + b"0\r\nX-Trailer: t\r\n\r\ntrailing garbage",
])
async def test_every_framing_of_a_watch_delivers_its_events(answer: bytes) -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      n: int) -> None:
        await read_request(reader)
        for i in range(0, len(answer), 7):
            writer.write(answer[i:i + 7])
            await writer.drain()
        if b"Connection: close" not in answer:
            await reader.read(1)

    async with scripted(trickle) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            async with watch_configmaps(client) as events:
                got = [ev async for ev in events]
            assert [(ev.type, ev.resource_version) for ev in got] == [("ADDED", "7")]
            assert client._transport._pool is not None
            assert_nothing_held(client._transport._pool)


async def test_a_reader_cancelled_while_waiting_leaves_the_stream_closable() -> None:
    async with scripted(one_event_then_hold) as (pool, _):
        stream = await pool.stream("GET", "/w", {})
        assert await stream.read_some() == EVENT
        reading = asyncio.create_task(stream.read_some())
        await asyncio.sleep(0)
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        stream.close()
        stream.close()
        assert await stream.read_some() == b""
        assert_nothing_held(pool)


async def test_an_event_line_past_the_bound_fails_the_watch() -> None:
    endless = CHUNKED_HEAD + chunk(b'{"type":"ADDED","object":{"data":"' + b"x" * 4000)

    async with scripted(answering(endless)) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}")
        async with client_api.Client(config) as client:
            events = watch_configmaps(client, max_line=1024)
            with pytest.raises(errors.InternalError, match="exceeds 1024 bytes"):
                async with events:
                    await anext(events)
            assert client._transport._pool is not None
            assert_nothing_held(client._transport._pool)


async def forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  first: bytes, then: bytes) -> None:
    await read_request(reader)
    writer.write(first)
    while True:
        writer.write(then)
        await writer.drain()
        await asyncio.sleep(0.001)


@pytest.mark.parametrize(("first", "then", "error", "match"), [
    # interim answers without end: the head never comes
    (b"", b"HTTP/1.1 100 Continue\r\n\r\n", errors.Timeout, "no response"),
    # an error status whose body never ends: read up to its bound
    (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n", chunk(b"e" * 65536),
     errors.ServiceUnavailable, "exceeds"),
    # ... or trickles: the open's timeout bounds it
    (b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n", chunk(b"e"),
     errors.Timeout, "no response"),
])
async def test_an_endless_answer_to_a_watch_is_bounded(
        first: bytes, then: bytes, error: type[Exception], match: str) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        await forever(reader, writer, first, then)

    async with scripted(script) as (pool, _):
        config = ClientConfig(server=f"http://{pool.authority}", request_timeout=0.5)
        async with client_api.Client(config) as client:
            with pytest.raises(error, match=match):
                await client._transport.stream("GET", "/api/v1/configmaps",
                                               params={"watch": "1"})
            assert_nothing_held(pool_of(client))


def pool_of(client: client_api.Client) -> http1.Pool:
    pool = client._transport._pool
    assert pool is not None
    return pool


async def test_a_second_reader_is_refused_and_the_first_still_reads() -> None:
    async with scripted(one_event_then_hold) as (pool, _):
        stream = await pool.stream("GET", "/w", {})
        assert await stream.read_some() == EVENT
        first = asyncio.create_task(stream.read_some())
        await asyncio.sleep(0)  # waiting
        with pytest.raises(RuntimeError, match="already reading"):
            await stream.read_some()
        stream.close()
        assert await first == b""  # it was not robbed of its wake-up
        assert_nothing_held(pool)


async def test_an_abandoned_watch_gives_its_connection_back() -> None:
    """A watch iterated without ``async with`` and dropped: its connection closes when the
    stream is collected, freeing its place (with max_connections=1, a request then runs)."""
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     n: int) -> None:
        while True:
            head = await read_request(reader)
            if b"watch=" in head:
                writer.write(CHUNKED_HEAD + chunk(EVENT))
                await writer.drain()
                await reader.read(1)
                return
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()

    async with scripted(answer) as (server_pool, _):
        config = ClientConfig(server=f"http://{server_pool.authority}", max_connections=1)
        async with client_api.Client(config) as client:
            async for ev in watch_configmaps(client):
                assert ev.resource_version == "7"
                break  # abandoned, unclosed
            gc.collect()
            assert pool_of(client)._count == 0
            assert await client._transport.request("GET", "/version") == {}


async def test_closing_the_pool_under_requests_and_a_connecting_stream() -> None:
    """An in-flight request completes and its connection is closed, not kept; one waiting
    for a place is refused; a stream whose connection was being opened is refused once it
    is open. Nothing stays counted."""
    answer_now = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   n: int) -> None:
        await read_request(reader)
        await answer_now.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.read(1)

    async with scripted(slow) as (pool, _):  # max_connections=2
        in_flight = asyncio.create_task(pool.request("GET", "/a", {}))
        await eventually(lambda: pool._count == 1)
        connect = pool._connect
        connected = asyncio.Event()

        async def held_connect(deadline: Deadline | None = None) -> http1._Connection:
            connection = await connect(deadline)
            await connected.wait()
            return connection

        pool._connect = held_connect  # type: ignore[method-assign]
        opening = asyncio.create_task(pool.stream("GET", "/w", {}))
        waiting = asyncio.create_task(pool.request("GET", "/b", {}))
        await eventually(lambda: len(pool._waiters) == 1)
        pool.close()
        connected.set()
        answer_now.set()
        assert (await in_flight).body == b"ok"
        for refused in (opening, waiting):
            with pytest.raises(http1.ConnectionLost, match="client is closed"):
                await refused
        assert_nothing_held(pool)


@pytest.mark.parametrize(("coding", "body"), [
    (b"chunked", b"hello"),
    (b"gzip, Chunked", b"hello"),  # chunked last: chunked (the coding is not undone here)
    (b"xchunked", b"5\r\nhello\r\n0\r\n\r\n"),  # not chunked: read to the close
    (b"chunked, identity", b"5\r\nhello\r\n0\r\n\r\n"),
])
def test_only_a_final_chunked_coding_frames_in_chunks(coding: bytes, body: bytes) -> None:
    parser = http1._Parser(4096, 1 << 20, head_request=False)
    done = parser.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: " + coding
                       + b"\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    if not done:
        assert parser.eof()
        assert not parser.keep_alive
    assert parser.body == body


async def test_a_stream_on_a_dropped_idle_connection_is_sent_again() -> None:
    async def one_answer_then_close(reader: asyncio.StreamReader,
                                    writer: asyncio.StreamWriter, n: int) -> None:
        head = await read_request(reader)
        if b"/w" in head:
            writer.write(CHUNKED_HEAD + chunk(EVENT) + b"0\r\n\r\n")
            await writer.drain()
            await reader.read(1)
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")  # kept alive
        await writer.drain()
        await reader.read(1)  # the next request arrives ... and is dropped unanswered

    async with scripted(one_answer_then_close) as (pool, connections):
        assert (await pool.request("GET", "/r", {})).body == b"ok"
        stream = await pool.stream("GET", "/w", {})  # the kept one fails: a new one
        assert await stream.read_all(1024) == EVENT
        assert len(connections) == 2
        assert_nothing_held(pool)


@given(head=st.sampled_from([CHUNKED_HEAD, b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
                             b"HTTP/1.1 200 OK\r\n\r\n", b""]),
       data=st.binary(max_size=300), splits=st.lists(st.integers(0, 400), max_size=6),
       complete=st.booleans())
def test_any_bytes_on_a_stream_end_in_its_body_then_an_end_or_a_connection_error(
        head: bytes, data: bytes, splits: list[int], complete: bool) -> None:
    """Whatever a server sends on a stream, split anywhere, then closes: nothing escapes the
    protocol's callbacks, and the reader gets bytes, then ``b""`` or a ConnectionLost or
    ProtocolError, and the stream's place is freed."""
    if complete and head == CHUNKED_HEAD:
        data += b"\r\n0\r\n\r\n"
    payload = head + data

    async def scenario() -> None:
        pool = http1.Pool("127.0.0.1", 1, ssl_context=None, authority="x")
        connection = http1._Connection()
        connection.connection_made(_Transport())  # type: ignore[arg-type]
        parser = http1._Parser(4096, 1 << 40, head_request=False)
        connection._parser, connection._streaming = parser, True
        pool._count += 1
        pool._streaming.add(connection)
        stream = http1.Stream(pool, connection, parser, "/w")
        cuts = sorted({min(s, len(payload)) for s in splits})
        for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True):
            if b > a:
                connection.data_received(payload[a:b])  # raises nothing
        connection.connection_lost(None)
        try:
            while await stream.read_some():
                pass
        except (http1.ConnectionLost, http1.ProtocolError):
            pass
        assert await stream.read_some() == b""
        assert_nothing_held(pool)

    asyncio.run(scenario())
