#!/usr/bin/env python3
"""A water tank as a process: its physics, and an HTTP API that anyone can disturb.

Standard library only, one file: the water-tank operator runs it as a Pod (from a ConfigMap,
on a stock ``python`` image) and reaches it at its pod IP; the operator's tests also import
:class:`SimulatedTank` to run the same physics in-process on a hand-driven clock.

The tank holds between 0 and ``capacity`` litres. Its pump fills at ``fill_rate`` litres per
second, its drain valve empties at ``drain_rate``, and a tap (a disturbance: nobody in the
cluster knows it is open) lets water out at the ``tap`` rate while open. The level moves
continuously between readings; time comes from an injected monotonic clock.

API (JSON bodies of at most ``MAX_BODY`` bytes):

- ``GET /healthz``: 200 once serving (the readiness probe).
- ``GET /tank``: ``level``, ``pump``, ``tap``, ``capacity``, ``fillRate``, ``drainRate``.
- ``PUT /pump`` ``{"pump": "filling" | "draining" | "off"}``: what the operator does.
- ``PUT /tap`` ``{"rate": litres per second}``: open the tap (0 closes it), at most
  ``capacity`` litres per second.
- ``PUT /level`` ``{"level": litres}``: someone fills or empties the tank by hand.

Not guaranteed: the level is kept in memory only; a restarted tank starts empty.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

MAX_BODY = 4096
MAX_DISCARD = 64 * 1024
PUMP_STATES = ("filling", "draining", "off")

Pump = Literal["filling", "draining", "off"]


class SimulatedTank:
    """One tank: its level changes at the pump's or the drain's rate, minus an open tap,
    between 0 and ``capacity``. Time comes from ``now`` (seconds, monotonic)."""

    def __init__(self, *, now: Callable[[], float] = time.monotonic, level: float = 0.0,
                 capacity: float = 100.0, fill_rate: float = 5.0,
                 drain_rate: float = 5.0) -> None:
        if capacity <= 0 or fill_rate <= 0 or drain_rate <= 0:
            raise ValueError("capacity and rates must be positive")
        self._now = now
        self.capacity = capacity
        self.fill_rate = fill_rate
        self.drain_rate = drain_rate
        self._level = min(max(level, 0.0), capacity)
        self._pump: Pump = "off"
        self._tap = 0.0
        self._since = now()
        self._lock = threading.Lock()
        #: every switch of the pump, as (time, new state)
        self.history: list[tuple[float, Pump]] = []

    def _advance(self) -> None:
        now = self._now()
        elapsed, self._since = max(0.0, now - self._since), now
        rate = -self._tap
        if self._pump == "filling":
            rate += self.fill_rate
        elif self._pump == "draining":
            rate -= self.drain_rate
        self._level = min(self.capacity, max(0.0, self._level + rate * elapsed))

    def read_level(self) -> float:
        """The sensor: the level now."""
        with self._lock:
            self._advance()
            return self._level

    @property
    def pump(self) -> Pump:
        return self._pump

    @property
    def tap(self) -> float:
        return self._tap

    def switch(self, pump: Pump) -> None:
        """Start filling, start draining, or stop."""
        if pump not in PUMP_STATES:
            raise ValueError(f"pump must be one of {', '.join(PUMP_STATES)}")
        with self._lock:
            self._advance()
            if pump != self._pump:
                self._pump = pump
                self.history.append((self._since, pump))

    def set_level(self, level: float) -> None:
        """Someone fills or empties the tank behind the operator's back."""
        with self._lock:
            self._advance()
            self._level = min(max(level, 0.0), self.capacity)

    def open_tap(self, rate: float) -> None:
        """Let water out at ``rate`` litres per second (0 closes the tap)."""
        if not 0 <= rate <= self.capacity:
            raise ValueError(f"the tap's rate must be between 0 and {self.capacity:g}")
        with self._lock:
            self._advance()
            self._tap = rate

    def state(self) -> dict[str, Any]:
        level = self.read_level()
        return {"level": level, "pump": self._pump, "tap": self._tap,
                "capacity": self.capacity, "fillRate": self.fill_rate,
                "drainRate": self.drain_rate}


def number(body: dict[str, Any], key: str) -> float:
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
            value):
        raise ValueError(f"{key} must be a finite number")
    return float(value)


class Handler(BaseHTTPRequestHandler):
    server: TankServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer(self, code: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            return self.answer(200, {"ok": True})
        if path == "/tank":
            return self.answer(200, self.server.tank.state())
        return self.answer(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path[:100]}"})

    def do_PUT(self) -> None:
        tank = self.server.tank
        path = self.path.split("?", 1)[0]
        if path not in ("/pump", "/tap", "/level"):
            self.close_connection = True
            return self.answer(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path[:100]}"})
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True
                if 0 < length <= MAX_DISCARD:  # read it, or closing would reset the answer
                    self.rfile.read(length)
                raise ValueError(f"the body must be at most {MAX_BODY} bytes")
            body = json.loads(self.rfile.read(length) if length else b"{}")
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            if path == "/pump":
                tank.switch(body.get("pump"))  # type: ignore[arg-type]
            elif path == "/tap":
                tank.open_tap(number(body, "rate"))
            else:
                tank.set_level(number(body, "level"))
        except ValueError as e:
            return self.answer(HTTPStatus.BAD_REQUEST, {"error": str(e)})
        return self.answer(200, tank.state())


class TankServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], tank: SimulatedTank) -> None:
        super().__init__(address, Handler)
        self.tank = tank

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that went away
            super().handle_error(request, client_address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--host", default=os.environ.get("POD_IP") or "0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--capacity", type=float, default=100.0)
    parser.add_argument("--fill-rate", type=float, default=5.0)
    parser.add_argument("--drain-rate", type=float, default=5.0)
    args = parser.parse_args(argv)
    tank = SimulatedTank(capacity=args.capacity, fill_rate=args.fill_rate,
                         drain_rate=args.drain_rate)
    server = TankServer((args.host, args.port), tank)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"tank of {args.capacity:g} litres serving on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
