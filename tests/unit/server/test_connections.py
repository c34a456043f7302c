"""The connection guard's bookkeeping: states, eviction order, refusal, timers."""

from __future__ import annotations

import asyncio
from typing import Any

from setpoint.server import connections
from setpoint.server.connections import ConnectionGuard, State
from setpoint.server.limits import Limits


class FakeTransport:
    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closed.set()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: the keep-alive options are skipped

    def get_protocol(self) -> asyncio.BaseProtocol | None:
        return self.protocol

    protocol: asyncio.BaseProtocol | None = None


def guard(closes: list[str], **limits: float) -> ConnectionGuard:
    return ConnectionGuard(Limits(**limits), on_close=closes.append)  # type: ignore[arg-type]


async def test_states_follow_the_requests() -> None:
    closes: list[str] = []
    g = guard(closes)
    t = FakeTransport()
    assert g._opened(t)  # type: ignore[arg-type]
    assert g.state_of(t) is State.HEADERS  # type: ignore[arg-type]
    g.request_started(t)  # type: ignore[arg-type]
    assert g.state_of(t) is State.ACTIVE  # type: ignore[arg-type]
    g.request_finished(t)  # type: ignore[arg-type]
    assert g.state_of(t) is State.IDLE  # type: ignore[arg-type]
    g._data(t)  # type: ignore[arg-type]
    assert g.state_of(t) is State.HEADERS  # type: ignore[arg-type]
    g._lost(t, None)  # type: ignore[arg-type]
    assert g.state_of(t) is None  # type: ignore[arg-type]
    assert g.open_connections == 0
    assert closes == []


async def test_the_longest_waiting_is_evicted_and_busy_ones_are_kept() -> None:
    closes: list[str] = []
    g = guard(closes, max_connections=3)
    a, b, c, d = (FakeTransport() for _ in range(4))
    for t in (a, b, c):
        assert g._opened(t)  # type: ignore[arg-type]
    g.request_started(a)  # type: ignore[arg-type]  # a serves a request: never evicted
    assert g._opened(d)  # type: ignore[arg-type]
    assert b.closed.is_set()
    assert not a.closed.is_set()
    assert not c.closed.is_set()
    assert closes == ["evicted"]
    g.request_started(c)  # type: ignore[arg-type]
    g.request_started(d)  # type: ignore[arg-type]
    e = FakeTransport()
    assert not g._opened(e)  # type: ignore[arg-type]
    assert e.closed.is_set()
    assert e.written.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"Retry-After: 1\r\n" in e.written
    assert closes == ["evicted", "refused"]
    assert g.open_connections == 3


async def test_timers_close_stalled_and_idle_connections() -> None:
    closes: list[str] = []
    g = guard(closes, header_timeout=0.01, idle_timeout=0.02)
    stalled, idle, busy = FakeTransport(), FakeTransport(), FakeTransport()
    for t in (stalled, idle, busy):
        g._opened(t)  # type: ignore[arg-type]
    g.request_started(idle)  # type: ignore[arg-type]
    g.request_finished(idle)  # type: ignore[arg-type]
    g.request_started(busy)  # type: ignore[arg-type]
    await asyncio.wait_for(asyncio.gather(stalled.closed.wait(), idle.closed.wait()), 10)
    assert sorted(closes) == ["header_timeout", "idle_timeout"]
    assert not busy.closed.is_set()
    assert g.open_connections == 1
    g.close_all()


async def test_a_connection_the_kernel_gave_up_on_is_counted_as_a_dead_peer() -> None:
    closes: list[str] = []
    g = guard(closes)
    reset, closed, timed_out = FakeTransport(), FakeTransport(), FakeTransport()
    for t in (reset, closed, timed_out):
        assert g._opened(t)  # type: ignore[arg-type]
    g._lost(reset, ConnectionResetError())  # type: ignore[arg-type]
    g._lost(closed, None)  # type: ignore[arg-type]
    assert closes == []
    g._lost(timed_out, TimeoutError(110, "Connection timed out"))  # type: ignore[arg-type]
    assert closes == ["dead_peer"]
    assert g.open_connections == 0


async def test_when_lost_tells_each_listener_once_unless_cancelled() -> None:
    g = guard([])
    inner = asyncio.Protocol()
    protocol = g.protocol_factory(lambda: inner)()
    t = FakeTransport()
    t.protocol = protocol
    protocol.connection_made(t)  # type: ignore[arg-type]
    told: list[tuple[str, BaseException | None]] = []
    connections.when_lost(t, lambda exc: told.append(("a", exc)))  # type: ignore[arg-type]
    cancel = connections.when_lost(t, lambda exc: told.append(("b", exc)))  # type: ignore[arg-type]
    cancel()
    error = TimeoutError(110, "Connection timed out")
    protocol.connection_lost(error)
    protocol.connection_lost(None)  # a second loss tells nobody again
    assert told == [("a", error)]
    # asked after the loss: told at once
    connections.when_lost(t, lambda exc: told.append(("c", exc)))  # type: ignore[arg-type]
    assert told == [("a", error), ("c", error)]
    # a transport that is not a guarded connection's never calls back
    other = FakeTransport()
    connections.when_lost(other, lambda exc: told.append(("d", exc)))  # type: ignore[arg-type]
    assert len(told) == 2
