"""Request limits: body size and read time, and the in-flight request limits.

:class:`Limits` is the configuration of every bound the HTTP edge enforces (the connection
bounds are applied by :mod:`setpoint.server.connections`). Its defaults are Kubernetes':

* **Bodies** are read completely, up to ``max_body_bytes`` (3 MiB, kube-apiserver's
  ``MaxRequestBodyBytes``), whether the client sent a Content-Length or chunks. A larger body
  is a 413 ``RequestEntityTooLarge`` as soon as the limit is crossed (or at once when the
  Content-Length says so); nothing beyond the limit is buffered. A body that has not arrived
  after ``body_timeout`` seconds (kube-apiserver's ``--request-timeout``, 60 s) is a 408.
* **In flight**: at most ``max_requests_inflight`` read-only requests (GET, LIST; default 400)
  and ``max_mutating_requests_inflight`` writes (default 200) are served at once, as
  kube-apiserver's ``--max-requests-inflight`` and ``--max-mutating-requests-inflight``. One
  more is answered at once with 429 ``TooManyRequests`` and ``Retry-After: 1``; it is never
  queued. Long-running requests (watches) are not counted, nor are the health and metrics
  endpoints, so that probes keep answering under load.

* **Dead peers**: every accepted connection has TCP keep-alive on (as kube-apiserver, whose
  listener sets it with a 3-minute period): after ``keepalive_idle`` seconds without traffic
  the kernel probes the client every ``keepalive_interval`` seconds and drops the connection
  after ``keepalive_count`` unanswered probes. Probes are sent only on a quiet connection; for
  data the client never acknowledges (a watch writing to a peer that vanished) the bound is
  ``tcp_user_timeout`` (Linux ``TCP_USER_TIMEOUT``), by default the kernel's own
  retransmission limit, as kube-apiserver leaves it: a user timeout also drops a client that
  is alive but has stopped reading for that long (``kubectl logs -f | less`` left on one
  page), which kube-apiserver never does. See :mod:`setpoint.server.keepalive`.

Non-guarantees: the limits count requests, not their cost (one LIST of 10,000 objects counts
as one); kube-apiserver's exemption of ``system:masters`` does not exist here (every client
is limited).
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Final

from aiohttp import StreamReader, web

from setpoint.apimachinery import errors
from setpoint.server.request_info import RequestInfo

#: kube-apiserver's request body limit
MAX_BODY_BYTES: Final = 3 * 1024 * 1024

#: paths never limited: probes and scrapes must answer while the server is busy
EXEMPT_PATHS: Final = frozenset({"/healthz", "/livez", "/readyz", "/metrics"})
EXEMPT_PREFIXES: Final = ("/healthz/", "/livez/", "/readyz/")

#: subresources that stream for a long time (kube-apiserver's long-running check)
LONG_RUNNING_SUBRESOURCES: Final = frozenset({"attach", "exec", "log", "portforward",
                                              "proxy"})

_WATCH_FALSE: Final = frozenset({"0", "f", "F", "false", "FALSE", "False"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Every bound of the HTTP edge; see the module docstring for what each one does."""

    max_body_bytes: int = MAX_BODY_BYTES
    #: seconds a request body may take to arrive in full
    body_timeout: float = 60.0
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    #: open connections; more are refused (after closing the longest-idle one, if any
    #: connection is idle); the server lowers it to what its file-descriptor limit allows
    max_connections: int = 2048
    #: seconds from a connection's first byte (or its opening) to a complete request header
    header_timeout: float = 32.0
    #: seconds a kept-alive connection may wait for its next request
    idle_timeout: float = 90.0
    #: seconds without traffic before TCP keep-alive probes start (kube-apiserver's 3 min)
    keepalive_idle: int = 180
    #: seconds between keep-alive probes (Go's default, which kube-apiserver keeps)
    keepalive_interval: int = 15
    #: unanswered probes after which the connection is dropped (Go's and Linux's default)
    keepalive_count: int = 9
    #: seconds sent data may stay unacknowledged, or unsent behind a client's closed receive
    #: window, before the connection is dropped; 0 (kube-apiserver's): the kernel's own
    #: retransmission limit (about 15 minutes on Linux, none for a closed window); None:
    #: ``keepalive_idle + keepalive_interval * keepalive_count``
    tcp_user_timeout: float | None = 0.0
    #: the Retry-After of a 429
    retry_after: int = 1

    def __post_init__(self) -> None:
        if not 1024 <= self.max_body_bytes <= 1024 * 1024 * 1024:
            raise ValueError("max_body_bytes must be between 1 KiB and 1 GiB")
        for name in ("max_requests_inflight", "max_mutating_requests_inflight",
                     "max_connections"):
            value = getattr(self, name)
            if not 1 <= value <= 1_000_000:
                raise ValueError(f"{name} must be between 1 and 1000000, not {value}")
        for name in ("body_timeout", "header_timeout", "idle_timeout"):
            value = getattr(self, name)
            if not 0 < value <= 24 * 3600:
                raise ValueError(f"{name} must be more than 0 and at most a day, not {value}")
        # Linux's own bounds (MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT)
        for name, top in (("keepalive_idle", 32767), ("keepalive_interval", 32767),
                          ("keepalive_count", 127)):
            value = getattr(self, name)
            if not 1 <= value <= top:
                raise ValueError(f"{name} must be between 1 and {top}, not {value}")
        timeout = self.tcp_user_timeout
        if timeout is not None and not 0 <= timeout <= 24 * 3600:
            raise ValueError(f"tcp_user_timeout must be between 0 and a day, not {timeout}")
        if not 1 <= self.retry_after <= 3600:
            raise ValueError("retry_after must be between 1 and 3600 seconds")

    @property
    def unacknowledged_timeout(self) -> float:
        """Seconds sent data may stay unacknowledged (0: the kernel's limit); see
        ``tcp_user_timeout``."""
        if self.tcp_user_timeout is not None:
            return self.tcp_user_timeout
        return self.keepalive_idle + self.keepalive_interval * self.keepalive_count


class BodyTimeout(errors.ApiError):
    """The client did not send its whole body in time (the connection is then closed)."""

    code = 408
    reason = "Timeout"


def too_large(limit: int) -> errors.RequestEntityTooLarge:
    return errors.RequestEntityTooLarge(f"Request entity too large: limit is {limit}")


#: a body read before its request took an in-flight slot (see :func:`await_body`)
EARLY_BODY = web.RequestKey("early_body", bytes)


async def await_body(request: web.Request, limits: Limits) -> None:
    """Wait for a body that has not fully arrived yet, before the request is counted in
    flight: a client that sends its body slowly then holds a connection (bounded by the
    connection cap and the body timeout), never one of the in-flight slots that everyone
    else's writes need. :func:`read_body` returns what was read here."""
    if request.body_exists and not request.content.is_eof():
        request[EARLY_BODY] = await read_body(request, limits)


async def read_body(request: web.Request, limits: Limits) -> bytes:
    """The whole request body, at most ``limits.max_body_bytes`` long (413 beyond, 408 when
    it takes longer than ``limits.body_timeout``)."""
    if EARLY_BODY in request:
        return request[EARLY_BODY]
    limit = limits.max_body_bytes
    declared = request.content_length
    if declared is not None and declared > limit:
        raise too_large(limit)
    content = request.content
    if content.is_eof():
        # the whole body has arrived with the header (most requests): nothing to wait for,
        # no timer to set; flow control bounds what is buffered, the check below the rest
        data = content.read_nowait()
        if len(data) > limit:
            raise too_large(limit)
        return data
    chunks: list[bytes] = []
    size = 0
    # a plain timer that fails the stream (cheaper per request than asyncio.timeout)
    timer = asyncio.get_running_loop().call_later(limits.body_timeout, _stall, content,
                                                  limits.body_timeout)
    try:
        while True:
            chunk = await content.readany()
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            chunks.append(chunk)
    finally:
        timer.cancel()
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _stall(content: StreamReader, seconds: float) -> None:
    content.set_exception(BodyTimeout(f"timed out reading the request body (limit "
                                      f"{seconds:g}s)"))


class Kind(enum.Enum):
    """How a request counts against the in-flight limits (kube-apiserver's request kinds)."""

    READ_ONLY = "readOnly"
    MUTATING = "mutating"
    LONG_RUNNING = "longRunning"
    EXEMPT = "exempt"


def classify(method: str, path: str, ri: RequestInfo | None, watch: str | None) -> Kind:
    """The kind of a request: ``watch`` is the ``watch`` query parameter (None if absent).

    A collection GET with any ``watch`` value but a false one is long-running (an invalid
    value is refused by the handler at once, so counting it as long-running costs nothing,
    and a real watch is never counted against the read-only limit).
    """
    if ri is None:
        if path in EXEMPT_PATHS or path.startswith(EXEMPT_PREFIXES):
            return Kind.EXEMPT
        return Kind.READ_ONLY if method in ("GET", "HEAD", "OPTIONS") else Kind.MUTATING
    if ri.subresource in LONG_RUNNING_SUBRESOURCES:
        return Kind.LONG_RUNNING
    if method in ("GET", "HEAD", "OPTIONS"):
        if watch is not None and not ri.name and watch not in _WATCH_FALSE:
            return Kind.LONG_RUNNING
        return Kind.READ_ONLY
    return Kind.MUTATING


class InflightLimiter:
    """Counts the requests being served per kind and refuses one beyond its limit.

    Single-threaded (one event loop): :meth:`try_acquire` and :meth:`release` need no lock.
    Every successful acquire must be paired with exactly one release. Only
    :attr:`Kind.READ_ONLY` and :attr:`Kind.MUTATING` are counted.
    """

    __slots__ = ("_mutating", "_mutating_limit", "_read_only", "_read_only_limit")

    def __init__(self, limits: Limits) -> None:
        # two plain counters: this runs twice per request, and enum-keyed dicts are slower
        self._read_only_limit = limits.max_requests_inflight
        self._mutating_limit = limits.max_mutating_requests_inflight
        self._read_only = 0
        self._mutating = 0

    def try_acquire(self, kind: Kind) -> bool:
        if kind is Kind.MUTATING:
            if self._mutating >= self._mutating_limit:
                return False
            self._mutating += 1
            return True
        if self._read_only >= self._read_only_limit:
            return False
        self._read_only += 1
        return True

    def release(self, kind: Kind) -> None:
        if kind is Kind.MUTATING:
            self._mutating -= 1
        else:
            self._read_only -= 1

    def in_flight(self, kind: Kind) -> int:
        return self._mutating if kind is Kind.MUTATING else self._read_only

    def limit(self, kind: Kind) -> int:
        return self._mutating_limit if kind is Kind.MUTATING else self._read_only_limit


def too_many_requests(retry_after: int) -> errors.TooManyRequests:
    """kube-apiserver's message for a request over the in-flight limit."""
    return errors.TooManyRequests("Too many requests, please try again later.",
                                  retry_after=retry_after)
