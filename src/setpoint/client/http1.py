"""A lean HTTP/1.1 client for the API's plain request-response calls.

:class:`Pool` sends one request at a time per connection over keep-alive connections (TLS
from the caller's ``ssl.SSLContext``) and returns the whole response. It exists for speed: a
controller's reconcile is mostly one small request (a status patch), and a general client
spends several times the CPU of the request itself on per-request machinery (tracing hooks,
cookie jars, header multidicts, URL objects, timers). :meth:`Pool.stream` opens a response
whose body is read as it arrives (a watch) on a connection of its own. Proxied requests stay
with aiohttp (:mod:`setpoint.client.transport` decides).

Invariants:

- A connection carries one request at a time and returns to the pool only after a complete
  response that did not ask to close it; any failure, timeout or cancellation closes it.
- What the server sends is bounded: the status line and headers to ``max_header_bytes``, a
  body to ``max_body_bytes`` (``Content-Length``, chunked, or up to the close); more is a
  :class:`ProtocolError`. Header names are lower-cased; a repeated header keeps its last
  value. A streamed body has no total bound (a watch lasts as long as it lasts); what waits
  unread is bounded instead: past :data:`STREAM_HIGH_WATER` bytes the connection stops
  reading from the socket until the reader catches up.
- A streamed response's connection is its own from the moment its request is sent until
  :meth:`Stream.close`, which closes it (it never returns to the pool), wakes a reader
  waiting on it (``b""``) and frees its place among ``max_connections`` exactly once;
  :meth:`Pool.close` closes it too, and its reader (or the opener still waiting for the
  head) gets :class:`ConnectionLost`. Neither waits for the transport to report the loss (a
  TLS shutdown can take its peer's time).
- A failure after the head (malformed framing, a cut connection) reaches the reader after
  the body bytes that arrived before it.
- At most ``max_connections`` connections exist; a request that finds them all busy waits
  for one (first come, first served) within its own timeout. A waiter woken for a freed
  place and cancelled before it ran passes the place on to the next.
- Numbers in the answer are ASCII digits (status, ``Content-Length``) or hex digits (a
  chunk size) and nothing else; anything malformed is a :class:`ProtocolError`, never
  another exception.
- An idle connection older than ``idle_timeout`` is closed rather than reused (servers drop
  idle connections after a while; aiohttp's server after 75 s). A request that fails on a
  reused connection before any byte of the answer arrived is sent once more on a new
  connection if its method is idempotent (the server may have closed the connection as the
  request left); a POST or PATCH is not (it may have been applied).

Non-guarantees: no proxies, no redirects, no compression (none is asked for), no
``Expect: 100-continue``, no pipelining, no HTTP/2. Request headers are the caller's to keep
free of line breaks (:func:`encode_request` refuses them).
"""

from __future__ import annotations

import asyncio
import ssl
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, cast

from setpoint.client.deadlinetimer import Deadline, Deadlines

#: the methods a failed reused connection may send again
IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_HEADER_BYTES: Final = 64 * 1024
MAX_BODY_BYTES: Final = 1024 * 1024 * 1024
#: the longest chunk-size line of a chunked body (with extensions)
MAX_CHUNK_LINE: Final = 1024
#: unread bytes of a streamed body beyond which the connection stops reading the socket
STREAM_HIGH_WATER: Final = 4 * 1024 * 1024


_HEX_DIGITS: Final = b"0123456789abcdefABCDEF"


def _digits(text: str) -> bool:
    """ASCII decimal digits only (``str.isdigit`` also accepts "²", which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


class ProtocolError(Exception):
    """The server's answer is not HTTP/1.1 as this client reads it (or exceeds a bound)."""


class ConnectionLost(ConnectionError):
    """The connection closed before the response was complete."""

    def __init__(self, message: str, *, nothing_received: bool) -> None:
        super().__init__(message)
        #: no byte of the response had arrived (the request may be sent again if idempotent)
        self.nothing_received = nothing_received


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    reason: str
    headers: Mapping[str, str]
    body: bytes


def encode_request(method: str, target: str, authority: str, headers: Mapping[str, str],
                   body: bytes | None) -> bytes:
    """The request's bytes: request line, ``Host``, the caller's headers, the length, the body.

    Raises ``ValueError`` for a line break in the target or any header (header injection).
    """
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}"]
    lines.extend(f"{name}: {value}" for name, value in headers.items())
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body) if body is not None else 0}")
    if any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a request line or header contains a line break")
    head = "\r\n".join(lines)
    data = head.encode("latin-1") + b"\r\n\r\n"
    return data + body if body else data


class _Parser:
    """An HTTP/1.1 response read incrementally; ``feed`` returns True when it is complete."""

    def __init__(self, max_header: int, max_body: int, head_request: bool) -> None:
        """``max_body`` bounds the body received in all; a streamed body's reader takes what
        arrived with :meth:`take_body`, and the parser then counts it no more."""
        self._buffer = bytearray()
        self._max_header = max_header
        self._max_body = max_body
        self._head = head_request
        self.status = 0
        self.reason = ""
        self.headers: dict[str, str] = {}
        self._mode = "head"  # head, length, chunk-size, chunk-data, chunk-trailer, close, done
        self._remaining = 0
        self._body = bytearray()
        self.keep_alive = True
        self.received = False
        #: bytes of ``_buffer`` already searched for the end of a head or trailer (a head
        #: arriving byte by byte is scanned once, not once per byte)
        self._scanned = 0

    def feed(self, data: bytes) -> bool:
        if data:
            self.received = True
        self._buffer += data
        while True:
            mode = self._mode
            if mode == "head":
                end = self._find_blank_line()
                if end < 0:
                    if len(self._buffer) > self._max_header:
                        raise ProtocolError(f"response headers exceed {self._max_header} bytes")
                    return False
                if end > self._max_header:
                    raise ProtocolError(f"response headers exceed {self._max_header} bytes")
                self._head_done(bytes(self._buffer[:end]))
                del self._buffer[:end + 4]
                if self.status < 200:  # 1xx: an interim answer, the real one follows
                    self.headers = {}
                    continue
            elif mode == "length":
                if not self._take_body():
                    return False
                self._mode = "done"
            elif mode == "chunk-size":
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > MAX_CHUNK_LINE:
                        raise ProtocolError("a chunk-size line is too long")
                    return False
                line = bytes(self._buffer[:end]).split(b";", 1)[0].strip(b" \t")
                del self._buffer[:end + 2]
                # 1*HEXDIG and nothing else (int() would also take "+", "-", "0x" and "_")
                if not line or line.strip(_HEX_DIGITS):
                    raise ProtocolError(f"a malformed chunk size: {line[:40]!r}")
                size = int(line, 16)
                if len(self._body) + size > self._max_body:
                    raise ProtocolError(f"the response body exceeds {self._max_body} bytes")
                self._remaining = size
                self._mode = "chunk-data" if size else "chunk-trailer"
            elif mode == "chunk-data":
                # what arrived of the chunk moves to the body at once: a chunk announced
                # larger than memory is bounded by the reader's pace, not buffered whole
                if not self._take_body():
                    return False
                if len(self._buffer) < 2:
                    return False
                if self._buffer[:2] != b"\r\n":
                    raise ProtocolError("a chunk does not end with CRLF")
                del self._buffer[:2]
                self._mode = "chunk-size"
            elif mode == "chunk-trailer":
                if self._buffer.startswith(b"\r\n"):
                    del self._buffer[:2]
                    self._mode = "done"
                    continue
                end = self._find_blank_line()
                if end < 0:
                    if len(self._buffer) > self._max_header:
                        raise ProtocolError("the chunked trailer is too long")
                    return False
                del self._buffer[:end + 4]
                self._mode = "done"
            elif mode == "close":
                self._body += self._buffer
                self._buffer.clear()
                if len(self._body) > self._max_body:
                    raise ProtocolError(f"the response body exceeds {self._max_body} bytes")
                return False
            if self._mode == "done":
                if self._buffer:  # bytes after the response: the connection is not reusable
                    self.keep_alive = False
                return True

    def _find_blank_line(self) -> int:
        """Where ``\r\n\r\n`` starts in the buffer (-1 if not yet), searching only what
        arrived since the last search (and the three bytes before it)."""
        end = self._buffer.find(b"\r\n\r\n", max(0, self._scanned - 3))
        self._scanned = 0 if end >= 0 else len(self._buffer)
        return end

    def _take_body(self) -> bool:
        """Move what has arrived of the ``_remaining`` body bytes to the body; True once
        they all have."""
        if self._remaining:
            take = min(self._remaining, len(self._buffer))
            self._body += self._buffer[:take]
            del self._buffer[:take]
            self._remaining -= take
        return not self._remaining

    def eof(self) -> bool:
        """The connection closed: True if that completes the response (a body read to the
        close)."""
        if self._mode == "close":
            self._mode = "done"
            return True
        return self._mode == "done"

    def _head_done(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _digits(parts[1]) \
                or len(parts[1]) != 3:
            raise ProtocolError(f"a malformed status line: {lines[0][:80]!r}")
        self.status = int(parts[1])
        self.reason = parts[2] if len(parts) > 2 else ""
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip():
                raise ProtocolError(f"a malformed header line: {line[:80]!r}")
            headers[name.lower()] = value.strip()
        self.headers = headers
        if self.status < 200:
            return
        connection = headers.get("connection", "").lower()
        if "close" in connection or (parts[0] == "HTTP/1.0" and "keep-alive" not in connection):
            self.keep_alive = False
        if self._head or self.status in (204, 304):
            self._mode = "done"
            return
        coding = headers.get("transfer-encoding")
        if coding is not None:
            # the last coding says how the body ends: chunked, or else at the close (RFC
            # 9112 6.3); either way Content-Length does not count ("xchunked" is not chunked)
            if coding.rpartition(",")[2].strip().lower() == "chunked":
                self._mode = "chunk-size"
            else:
                self._mode = "close"
                self.keep_alive = False
            return
        length = headers.get("content-length")
        if length is not None:
            if not _digits(length):
                raise ProtocolError(f"a malformed Content-Length: {length[:40]!r}")
            self._remaining = int(length)
            if self._remaining > self._max_body:
                raise ProtocolError(f"the response body exceeds {self._max_body} bytes")
            self._mode = "length" if self._remaining else "done"
            return
        self._mode = "close"
        self.keep_alive = False

    @property
    def body(self) -> bytes:
        return bytes(self._body)

    @property
    def head_seen(self) -> bool:
        """The final status line and headers have been read."""
        return self._mode != "head"

    @property
    def buffered(self) -> int:
        """Body bytes received and not yet taken."""
        return len(self._body)

    def take_body(self) -> bytes:
        """The body bytes received since the last call (a streamed body's next piece)."""
        taken = bytes(self._body)
        self._body.clear()
        return taken


class _Connection(asyncio.Protocol):
    """One connection. In an exchange its waiter resolves when the response is complete;
    once streaming, whenever the body has news (bytes, its end, a failure)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser: _Parser | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.idle_since = 0.0
        self._streaming = False
        #: a streamed response: its body is complete / the failure that ended it
        self.complete = False
        self.error: BaseException | None = None
        self.paused = False
        #: the transport reported the connection lost (``closed`` is set as closing starts)
        self.lost = False
        #: the pool has let go of it (counted once among ``max_connections``)
        self.discarded = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._streaming:
            self._stream_received(data)
            return
        parser, waiter = self._parser, self._waiter
        if parser is None or waiter is None or waiter.done():
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        try:
            if parser.feed(data):
                waiter.set_result(None)
        except ProtocolError as e:
            waiter.set_exception(e)
            self.close()

    def _stream_received(self, data: bytes) -> None:
        parser = self._parser
        if self.closed:
            return  # closing (a TLS shutdown still reads): nobody reads these
        if parser is None or self.complete or self.error is not None:
            self.close()  # bytes after the end: nobody reads them
            return
        try:
            self.complete = parser.feed(data)
        except ProtocolError as e:
            self.error = e
            self.close()
        else:
            if not self.complete and parser.buffered > STREAM_HIGH_WATER and \
                    self.transport is not None and not self.paused:
                self.paused = True
                self.transport.pause_reading()
        if parser.head_seen or self.error is not None:
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = self.lost = True
        if self._streaming:
            parser = self._parser
            if not self.complete and self.error is None:
                if parser is not None and parser.eof():
                    self.complete = True
                else:
                    self.error = _cut_short(parser, exc)
            self._wake()
            return
        parser, waiter = self._parser, self._waiter
        if waiter is None or waiter.done():
            return
        if parser is not None and parser.eof():
            parser.keep_alive = False
            waiter.set_result(None)
            return
        waiter.set_exception(_cut_short(parser, exc))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        if self._streaming:
            # a reader waiting for the body learns of it now, not when the transport
            # reports the loss (a TLS shutdown can take its peer's time)
            self._wake()

    def fail(self, error: BaseException) -> None:
        """End a streamed response with ``error`` (unless it already ended) and close."""
        if not self.complete and self.error is None:
            self.error = error
        self.close()

    async def exchange(self, data: bytes, parser: _Parser,
                       deadline: Deadline | None = None) -> _Parser:
        assert self.transport is not None
        waiter = asyncio.get_running_loop().create_future()
        self._parser, self._waiter = parser, waiter
        try:
            self.transport.write(data)
            await (waiter if deadline is None else deadline.wait(waiter))
            return parser
        finally:
            self._parser = self._waiter = None

    async def open_stream(self, data: bytes, parser: _Parser,
                          deadline: Deadline | None = None) -> None:
        """Send the request and wait for the response's head; the connection then streams
        (see :class:`Stream`)."""
        assert self.transport is not None
        self._parser, self._streaming = parser, True
        self.transport.write(data)
        while not parser.head_seen:
            await self.wait(deadline)
            # a failure after the head (in the same read) is the reader's to see, after
            # the body that arrived whole before it
            if self.error is not None and not parser.head_seen:
                raise self.error
            if self.complete and not parser.head_seen:  # pragma: no cover - eof() decides
                raise ConnectionLost("the connection closed before the response's head",
                                     nothing_received=not parser.received)

    async def wait(self, deadline: Deadline | None = None) -> None:
        """Until the streamed response has news (or at once if it has ended).

        A connection closed but not yet reported lost is waited for (``connection_lost``
        then decides how the body ended): returning at once would leave a reader looping
        without ever yielding to the loop that would report it."""
        if self.lost or self.complete or self.error is not None:
            return
        if self._waiter is not None:  # a second reader would take the first one's news
            raise RuntimeError("another task is already reading this stream")
        waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        try:
            await (waiter if deadline is None else deadline.wait(waiter))
        finally:
            self._waiter = None

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.closed:
            self.paused = False
            self.transport.resume_reading()


def _cut_short(parser: _Parser | None, exc: Exception | None) -> ConnectionLost:
    """The error of a response whose connection closed before it was complete."""
    detail = f": {exc}" if exc is not None else ""
    return ConnectionLost(f"the connection closed before the response was complete{detail}",
                          nothing_received=parser is None or not parser.received)


class Stream:
    """A response whose body is read as it arrives; see the module docstring.

    ``read_some`` returns the next bytes of the body (framing removed), ``b""`` once it has
    ended, and raises :class:`ConnectionLost` or :class:`ProtocolError` when it cannot end
    well. One reader at a time: a second task reading while one waits gets
    ``RuntimeError``. A stream dropped without :meth:`close` (a watch abandoned
    mid-iteration) is closed when it is garbage-collected.
    """

    def __init__(self, pool: Pool, connection: _Connection, parser: _Parser,
                 url: str) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self._parser = parser
        self.status = parser.status
        self.reason = parser.reason
        self.headers: Mapping[str, str] = parser.headers
        self.url = url

    async def read_some(self, timeout: float | None = None) -> bytes:
        """The body's next bytes; ``TimeoutError`` when none arrive within ``timeout``
        seconds (the stream stays open)."""
        deadline = self._pool._deadlines.at(timeout)
        while True:
            data = self._parser.take_body()
            connection = self._connection
            if data:
                if connection is not None:
                    connection.resume()
                return data
            if connection is None:
                return b""
            if connection.error is not None:
                error = connection.error
                self.close()
                raise error
            if connection.complete:
                self.close()
                return b""
            await connection.wait(deadline)

    async def read_all(self, max_bytes: int) -> bytes:
        """The rest of the body, at most ``max_bytes`` (:class:`ProtocolError` beyond)."""
        out = bytearray()
        while chunk := await self.read_some():
            out += chunk
            if len(out) > max_bytes:
                self.close()
                raise ProtocolError(f"the response body exceeds {max_bytes} bytes")
        return bytes(out)

    def close(self) -> None:
        """Close the connection (idempotent); a read then returns ``b""``."""
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool._discard(connection)

    def __del__(self) -> None:
        # its connection would otherwise stay open, holding a place among max_connections
        if self._connection is not None:
            try:
                self.close()
            except RuntimeError:  # the loop is already closed
                pass


class Pool:
    """Keep-alive connections to one server; see the module docstring."""

    def __init__(self, host: str, port: int, *, ssl_context: ssl.SSLContext | None,
                 server_hostname: str | None = None, authority: str,
                 max_connections: int = 100, connect_timeout: float = 10.0,
                 idle_timeout: float = 15.0, max_header_bytes: int = MAX_HEADER_BYTES,
                 max_body_bytes: int = MAX_BODY_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be positive")
        self.host = host
        self.port = port
        self.authority = authority
        self._ssl = ssl_context
        self._server_hostname = server_hostname
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._idle_timeout = idle_timeout
        self._max_header = max_header_bytes
        self._max_body = max_body_bytes
        self._clock = clock
        self._idle: deque[_Connection] = deque()
        self._count = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._streaming: set[_Connection] = set()
        self._deadlines = Deadlines()
        self._closed = False

    async def request(self, method: str, target: str, headers: Mapping[str, str],
                      body: bytes | None = None, *, timeout: float | None = None) -> Response:
        """Send one request and read its whole response; ``TimeoutError`` when it takes
        longer than ``timeout`` seconds in all (waiting for a connection included)."""
        data = encode_request(method, target, self.authority, headers, body)

        async def exchange(connection: _Connection, parser: _Parser,
                           deadline: Deadline | None) -> None:
            await connection.exchange(data, parser, deadline)

        connection, parser = await self._send(method, timeout, self._max_body, exchange)
        if parser.keep_alive and not connection.closed:
            self._release(connection)
        else:
            self._discard(connection)
        return Response(parser.status, parser.reason, parser.headers, parser.body)

    async def stream(self, method: str, target: str, headers: Mapping[str, str],
                     *, url: str = "", timeout: float | None = None) -> Stream:
        """Send one request and return its response once the head has arrived, the body
        to be read from the :class:`Stream`; ``TimeoutError`` when the head takes longer
        than ``timeout`` seconds (reading the body is the caller's to bound)."""
        data = encode_request(method, target, self.authority, headers, None)

        async def open_stream(connection: _Connection, parser: _Parser,
                              deadline: Deadline | None) -> None:
            # a stream's from the start: close() breaks one still waiting for its head
            self._streaming.add(connection)
            if self._closed:  # closed while the connection was being opened
                raise ConnectionLost("the client is closed", nothing_received=False)
            await connection.open_stream(data, parser, deadline)

        # a streamed body is bounded by what waits unread, not in all
        connection, parser = await self._send(method, timeout, sys.maxsize, open_stream)
        return Stream(self, connection, parser, url or target)

    async def _send(self, method: str, timeout: float | None, max_body: int,
                    run: Callable[[_Connection, _Parser, Deadline | None], Awaitable[None]]
                    ) -> tuple[_Connection, _Parser]:
        """``run`` the request on a connection (sent once more on a new one when a reused
        connection failed before any byte of the answer and ``method`` is idempotent); on
        any failure the connection is discarded."""
        deadline = self._deadlines.at(timeout)
        for attempt in (0, 1):
            connection, reused = await self._acquire(deadline)
            parser = _Parser(self._max_header, max_body, method == "HEAD")
            try:
                await run(connection, parser, deadline)
            except ConnectionLost as e:
                self._discard(connection)
                if attempt == 0 and reused and e.nothing_received and method in IDEMPOTENT:
                    continue
                raise
            except BaseException:
                self._discard(connection)
                raise
            return connection, parser
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acquire(self, deadline: Deadline | None = None) -> tuple[_Connection, bool]:
        while True:
            now = self._clock()
            if self._closed:
                raise ConnectionLost("the client is closed", nothing_received=True)
            while self._idle:
                connection = self._idle.pop()  # the most recently used: least likely dropped
                if connection.closed or now - connection.idle_since > self._idle_timeout:
                    self._discard(connection)
                    continue
                return connection, True
            if self._count < self._max_connections:
                self._count += 1
                try:
                    return await self._connect(deadline), False
                except BaseException:
                    self._count -= 1
                    self._wake()
                    raise
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await (waiter if deadline is None else deadline.wait(waiter))
            except BaseException:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._wake()  # woken, then cancelled: the place goes to the next
                raise

    async def _connect(self, deadline: Deadline | None = None) -> _Connection:
        loop = asyncio.get_running_loop()
        limit = self._connect_timeout if deadline is None else \
            min(self._connect_timeout, max(0.0, deadline.remaining()))
        async with asyncio.timeout(limit):
            _, connection = await loop.create_connection(
                _Connection, self.host, self.port, ssl=self._ssl,
                server_hostname=(self._server_hostname or self.host) if self._ssl else None)
        return connection

    def _release(self, connection: _Connection) -> None:
        if self._closed:
            self._discard(connection)
            return
        connection.idle_since = self._clock()
        self._idle.append(connection)
        self._wake()

    def _discard(self, connection: _Connection) -> None:
        """Close ``connection`` and free its place (once, however often it is called)."""
        self._streaming.discard(connection)
        if connection in self._idle:
            self._idle.remove(connection)
        connection.close()
        if connection.discarded:
            return
        connection.discarded = True
        self._count -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        """Close every idle connection and every stream's now, those still waiting for
        their head included (their readers see :class:`ConnectionLost`), and busy ones as
        their requests end."""
        self._closed = True
        while self._idle:
            self._discard(self._idle.popleft())
        for connection in list(self._streaming):
            connection.fail(ConnectionLost("the client is closed", nothing_received=False))
        while self._waiters:
            self._wake()
