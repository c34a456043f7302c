"""The connection guard's bookkeeping: states, eviction order, refusal, timers."""

from __future__ import annotations

import asyncio

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
    g._lost(t)  # type: ignore[arg-type]
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
