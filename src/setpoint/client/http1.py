"""A lean HTTP/1.1 client for the API's plain request-response calls.

:class:`Pool` sends one request at a time per connection over keep-alive connections (TLS
from the caller's ``ssl.SSLContext``) and returns the whole response. It exists for speed: a
controller's reconcile is mostly one small request (a status patch), and a general client
spends several times the CPU of the request itself on per-request machinery (tracing hooks,
cookie jars, header multidicts, URL objects, timers). Streaming responses (watches) and
proxied requests stay with aiohttp (:mod:`setpoint.client.transport` decides).

Invariants:

- A connection carries one request at a time and returns to the pool only after a complete
  response that did not ask to close it; any failure, timeout or cancellation closes it.
- What the server sends is bounded: the status line and headers to ``max_header_bytes``, a
  body to ``max_body_bytes`` (``Content-Length``, chunked, or up to the close); more is a
  :class:`ProtocolError`. Header names are lower-cased; a repeated header keeps its last
  value.
- At most ``max_connections`` connections exist; a request that finds them all busy waits
  for one (first come, first served) within its own timeout.
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
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, cast

#: the methods a failed reused connection may send again
IDEMPOTENT: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_HEADER_BYTES: Final = 64 * 1024
MAX_BODY_BYTES: Final = 1024 * 1024 * 1024
#: the longest chunk-size line of a chunked body (with extensions)
MAX_CHUNK_LINE: Final = 1024


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

    def feed(self, data: bytes) -> bool:
        if data:
            self.received = True
        self._buffer += data
        while True:
            mode = self._mode
            if mode == "head":
                end = self._buffer.find(b"\r\n\r\n")
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
                take = min(self._remaining, len(self._buffer))
                self._body += self._buffer[:take]
                del self._buffer[:take]
                self._remaining -= take
                if self._remaining:
                    return False
                self._mode = "done"
            elif mode == "chunk-size":
                end = self._buffer.find(b"\r\n")
                if end < 0:
                    if len(self._buffer) > MAX_CHUNK_LINE:
                        raise ProtocolError("a chunk-size line is too long")
                    return False
                line = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
                del self._buffer[:end + 2]
                try:
                    size = int(line, 16)
                except ValueError:
                    raise ProtocolError(f"a malformed chunk size: {line[:40]!r}") from None
                if size < 0 or len(self._body) + size > self._max_body:
                    raise ProtocolError(f"the response body exceeds {self._max_body} bytes")
                self._remaining = size
                self._mode = "chunk-data" if size else "chunk-trailer"
            elif mode == "chunk-data":
                if len(self._buffer) < self._remaining + 2:
                    return False
                if self._buffer[self._remaining:self._remaining + 2] != b"\r\n":
                    raise ProtocolError("a chunk does not end with CRLF")
                self._body += self._buffer[:self._remaining]
                del self._buffer[:self._remaining + 2]
                self._mode = "chunk-size"
            elif mode == "chunk-trailer":
                if self._buffer.startswith(b"\r\n"):
                    del self._buffer[:2]
                    self._mode = "done"
                    continue
                end = self._buffer.find(b"\r\n\r\n")
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
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit() \
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
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = "chunk-size"
            return
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
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


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser: _Parser | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self.idle_since = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
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

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        parser, waiter = self._parser, self._waiter
        if waiter is None or waiter.done():
            return
        if parser is not None and parser.eof():
            parser.keep_alive = False
            waiter.set_result(None)
            return
        received = parser is not None and parser.received
        detail = f": {exc}" if exc is not None else ""
        waiter.set_exception(ConnectionLost(
            f"the connection closed before the response was complete{detail}",
            nothing_received=not received))

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, data: bytes, parser: _Parser) -> _Parser:
        assert self.transport is not None
        waiter = asyncio.get_running_loop().create_future()
        self._parser, self._waiter = parser, waiter
        try:
            self.transport.write(data)
            await waiter
            return parser
        finally:
            self._parser = self._waiter = None


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
        self._closed = False

    async def request(self, method: str, target: str, headers: Mapping[str, str],
                      body: bytes | None = None) -> Response:
        """Send one request and read its whole response (bound it with a timeout)."""
        data = encode_request(method, target, self.authority, headers, body)
        for attempt in (0, 1):
            connection, reused = await self._acquire()
            parser = _Parser(self._max_header, self._max_body, method == "HEAD")
            try:
                await connection.exchange(data, parser)
            except ConnectionLost as e:
                self._discard(connection)
                if attempt == 0 and reused and e.nothing_received and method in IDEMPOTENT:
                    continue
                raise
            except BaseException:
                self._discard(connection)
                raise
            if parser.keep_alive and not connection.closed:
                self._release(connection)
            else:
                self._discard(connection)
            return Response(parser.status, parser.reason, parser.headers, parser.body)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _acquire(self) -> tuple[_Connection, bool]:
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
                    return await self._connect(), False
                except BaseException:
                    self._count -= 1
                    self._wake()
                    raise
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._connect_timeout):
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
        if connection in self._idle:
            self._idle.remove(connection)
        connection.close()
        self._count -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def close(self) -> None:
        """Close every idle connection now, and busy ones as their requests end."""
        self._closed = True
        while self._idle:
            self._discard(self._idle.popleft())
        while self._waiters:
            self._wake()
