"""Open connections: a cap on how many, and time limits on clients that send no request.

Each accepted connection is wrapped (:class:`ConnectionGuard.protocol_factory`) before the
HTTP server sees it, and is in one of three states:

* ``HEADERS``: from its opening, or its first byte after an idle period, until a complete
  request header has arrived. It is closed after ``header_timeout`` seconds (kube-apiserver's
  ``ReadHeaderTimeout``, 32 s): a client that sends half a request and stalls is dropped.
* ``ACTIVE``: a request is being served (:meth:`ConnectionGuard.request_started` /
  :meth:`~ConnectionGuard.request_finished`, called by the app). No time limit here: a watch
  lasts as long as it lasts, and the body has its own (see :mod:`setpoint.server.limits`).
* ``IDLE``: kept alive between requests; closed after ``idle_timeout`` seconds (90 s).

At most ``max_connections`` are open. One more closes the connection that has been waiting
longest without a request being served (idle, or still sending its header), which costs a
well-behaved client at most a reconnect; when every connection is serving a request, the new
one is answered 503 with ``Retry-After: 1`` and closed at once. So a flood of half-sent
requests cannot use up the process's file descriptors, and established clients keep being
served. :func:`connection_budget` lowers the cap to what the descriptor limit allows.

Each accepted connection gets TCP keep-alive and a bound on unacknowledged data
(:mod:`setpoint.server.keepalive`), so that a client that vanished without a word is found by
the kernel whatever state its connection is in, a watch included; such a connection is counted
as ``dead_peer``. aiohttp tells a handler nothing when its connection is lost, so a handler
that waits for something else (a watch waiting for its next event) asks to be told
(:func:`when_lost`), and ends then rather than at its next write.

Invariants: every open connection is in exactly one state; the ones not ``ACTIVE`` are queued
per state in the order they started waiting, which is the order of their deadlines; eviction
takes the one waiting longest. Nothing here reads the bytes it passes on. Per request the
guard does two queue operations and no timer work: one sweep per interval closes what
expired. Non-guarantees: a connection is closed up to one sweep interval (a quarter of the
shorter timeout, at most 1 s) after its deadline; the cap counts this server's accepted
connections only (the listening socket's backlog is the kernel's); eviction can close an idle
connection at the moment its client reuses it (clients retry idempotent requests).
"""

from __future__ import annotations

import asyncio
import collections
import enum
import logging
import ssl
from collections.abc import Callable
from typing import Any, Final, cast

import orjson
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server import keepalive
from setpoint.server.limits import Limits

log = logging.getLogger(__name__)

#: descriptors left for storage, logs and the server's own clients when sizing the cap
FD_RESERVE: Final = 128

#: why connections were closed by the guard (the ``reason`` label of its metric), or by the
#: kernel for it (``dead_peer``: keep-alive probes or sent data went unacknowledged)
REASONS: Final = ("header_timeout", "idle_timeout", "evicted", "refused", "dead_peer")

#: told why a connection was lost: None when it was closed, else the error that ended it
LostCallback = Callable[[Exception | None], None]


class State(enum.Enum):
    HEADERS = "headers"
    ACTIVE = "active"
    IDLE = "idle"


class _Conn:
    __slots__ = ("deadline", "since", "state", "transport")

    def __init__(self, transport: asyncio.Transport, now: float, deadline: float) -> None:
        self.transport = transport
        self.state = State.HEADERS
        #: when it started waiting (for eviction), and when the wait ends (for the sweep)
        self.since = now
        self.deadline = deadline


def _refusal() -> bytes:
    status = errors.ServiceUnavailable("too many open connections, please try again later",
                                       retry_after=1).status()
    body = orjson.dumps(status)
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body))


class ConnectionGuard:
    """The connections of one server; see the module docstring.

    Waiting connections are kept in two queues, one per state, each in the order its members
    started waiting; as each state has one timeout, that is also the order of their
    deadlines, so one periodic sweep closes the expired ones from the front (no timer per
    connection, nothing to re-arm per request). A connection is closed within a sweep
    interval (a quarter of the shorter timeout, at most a second) after its deadline.
    """

    def __init__(self, limits: Limits, *, max_connections: int | None = None,
                 on_close: Callable[[str], None] = lambda reason: None) -> None:
        self.max_connections = max_connections or limits.max_connections
        #: told the reason (one of :data:`REASONS`) of each connection the guard closes
        self._on_close = on_close
        self._header_timeout = limits.header_timeout
        self._idle_timeout = limits.idle_timeout
        self._interval = min(1.0, limits.header_timeout / 4, limits.idle_timeout / 4)
        self._conns: dict[asyncio.BaseTransport, _Conn] = {}
        self._headers: collections.OrderedDict[asyncio.BaseTransport, _Conn] = (
            collections.OrderedDict())
        self._idle: collections.OrderedDict[asyncio.BaseTransport, _Conn] = (
            collections.OrderedDict())
        self._sweeper: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = False
        self._refusal = _refusal()
        self._socket_options = keepalive.socket_options(limits)

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    def state_of(self, transport: asyncio.BaseTransport) -> State | None:
        conn = self._conns.get(transport)
        return conn.state if conn is not None else None

    def protocol_factory(self, inner: Callable[[], asyncio.Protocol]
                         ) -> Callable[[], asyncio.Protocol]:
        """Wrap the HTTP server's protocol factory."""
        return lambda: _GuardedProtocol(self, inner())

    # --- from the protocol wrapper ------------------------------------------------------

    def _opened(self, transport: asyncio.Transport) -> bool:
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if self._sweeper is None and not self._stopped:
            self._sweeper = loop.call_later(self._interval, self._sweep)
        if len(self._conns) >= self.max_connections:
            victim = self._longest_waiting()
            if victim is None:
                self._on_close("refused")
                transport.write(self._refusal)
                transport.close()
                return False
            self._close(victim, "evicted")
        keepalive.apply(transport, self._socket_options)
        now = loop.time()
        conn = _Conn(transport, now, now + self._header_timeout)
        self._conns[transport] = conn
        self._headers[transport] = conn
        return True

    def _longest_waiting(self) -> _Conn | None:
        heads = [next(iter(q.values())) for q in (self._headers, self._idle) if q]
        return min(heads, key=lambda c: c.since) if heads else None

    def _data(self, transport: asyncio.BaseTransport) -> None:
        conn = self._conns.get(transport)
        if conn is not None and conn.state is State.IDLE:
            del self._idle[transport]
            conn.state = State.HEADERS
            now = self._now()
            conn.since, conn.deadline = now, now + self._header_timeout
            self._headers[transport] = conn

    def _lost(self, transport: asyncio.BaseTransport, exc: Exception | None) -> None:
        conn = self._conns.pop(transport, None)
        if conn is not None:
            self._unqueue(conn)
            if isinstance(exc, TimeoutError):  # ETIMEDOUT: the kernel gave up on the peer
                self._on_close("dead_peer")

    def _unqueue(self, conn: _Conn) -> None:
        if conn.state is State.HEADERS:
            self._headers.pop(conn.transport, None)
        elif conn.state is State.IDLE:
            self._idle.pop(conn.transport, None)

    # --- from the app, around each request ----------------------------------------------

    def request_started(self, transport: asyncio.BaseTransport | None) -> None:
        conn = self._conns.get(transport) if transport is not None else None
        if conn is not None and conn.state is not State.ACTIVE:
            self._unqueue(conn)
            conn.state = State.ACTIVE

    def request_finished(self, transport: asyncio.BaseTransport | None) -> None:
        conn = self._conns.get(transport) if transport is not None else None
        if conn is None or conn.state is not State.ACTIVE:
            return
        conn.state = State.IDLE
        now = self._now()
        conn.since, conn.deadline = now, now + self._idle_timeout
        self._idle[conn.transport] = conn

    # --- expiry -------------------------------------------------------------------------

    def _now(self) -> float:
        assert self._loop is not None  # set by the first connection
        return self._loop.time()

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for queue, reason in ((self._headers, "header_timeout"), (self._idle, "idle_timeout")):
            while queue:
                conn = next(iter(queue.values()))
                if conn.deadline > now:
                    break
                self._close(conn, reason)
        self._sweeper = None if self._stopped else loop.call_later(self._interval, self._sweep)

    def _close(self, conn: _Conn, reason: str) -> None:
        self._on_close(reason)
        self._conns.pop(conn.transport, None)
        self._unqueue(conn)
        conn.transport.close()

    def close_all(self) -> None:
        """Stop sweeping (the server is stopping; its connections close with it)."""
        self._stopped = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None


def when_lost(transport: asyncio.BaseTransport | None,
              callback: LostCallback) -> Callable[[], None]:
    """Have ``callback`` called once when the connection under ``transport`` is lost (closed
    by either side, reset, or given up on by the kernel), or at once if it already was; the
    function returned cancels that. A transport that is not a guarded connection's (an app
    served some other way) never calls it."""
    protocol = transport.get_protocol() if transport is not None else None
    if not isinstance(protocol, _GuardedProtocol):
        return _nothing
    return protocol.add_lost_callback(callback)


def _nothing() -> None:
    pass


class _GuardedProtocol(asyncio.Protocol):
    """Passes everything to the HTTP server's protocol, and tells the guard what happens."""

    __slots__ = ("_accepted", "_guard", "_inner", "_lost", "_on_lost", "_transport")

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self._accepted = False
        self._transport: asyncio.BaseTransport | None = None
        self._on_lost: list[LostCallback] = []
        #: set once the connection is lost: why (see :data:`LostCallback`)
        self._lost: tuple[Exception | None] | None = None

    def add_lost_callback(self, callback: LostCallback) -> Callable[[], None]:
        if self._lost is not None:
            callback(self._lost[0])
            return _nothing
        self._on_lost.append(callback)

        def cancel() -> None:
            if callback in self._on_lost:
                self._on_lost.remove(callback)
        return cancel

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        if self._guard._opened(transport):
            self._accepted = True
            self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self._accepted:
            return
        assert self._transport is not None
        self._guard._data(self._transport)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._accepted else None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost is not None:  # asyncio calls it once; a second call changes nothing
            return
        self._lost = (exc,)
        if self._transport is not None:
            self._guard._lost(self._transport, exc)
        if self._accepted:
            self._inner.connection_lost(exc)
        callbacks, self._on_lost = self._on_lost, []
        for callback in callbacks:
            try:
                callback(exc)
            except Exception:  # one listener's failure must not keep the others uninformed
                log.exception("a callback on a lost connection failed")

    def pause_writing(self) -> None:
        if self._accepted:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._accepted:
            self._inner.resume_writing()


class GuardedSite(web.BaseSite):
    """A TCP site whose connections pass through a :class:`ConnectionGuard`."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard,
                 *, backlog: int = 1024, ssl_context: ssl.SSLContext | None = None,
                 handshake_timeout: float = 10.0) -> None:
        super().__init__(runner, backlog=backlog)
        self._host = host
        self._port = port
        self._guard = guard
        self._bound_port: int | None = None
        self._ssl = ssl_context
        self._handshake_timeout = handshake_timeout

    @property
    def port(self) -> int:
        """The port listened on (the real one after :meth:`start` when asked for 0)."""
        return self._bound_port if self._bound_port is not None else self._port

    @property
    def name(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    async def start(self) -> None:
        await super().start()
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        # a TLS handshake that stalls is bounded too: the guard's header timeout starts only
        # once the handshake is done and the protocol sees the connection
        tls: dict[str, Any] = {} if self._ssl is None else {
            "ssl": self._ssl, "ssl_handshake_timeout": self._handshake_timeout}
        self._server = await loop.create_server(
            self._guard.protocol_factory(server), self._host, self._port,
            backlog=self._backlog, reuse_address=True, **tls)
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


def connection_budget(requested: int, reserve: int = FD_RESERVE) -> int:
    """``requested``, lowered to what the process's descriptor limit leaves after
    ``reserve`` (at least 16), so that the cap is reached before descriptors run out."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return requested
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    budget = max(16, int(soft) - reserve)
    if budget < requested:
        log.warning("open connections capped at %d (file descriptor limit %d)", budget, soft)
        return budget
    return requested
