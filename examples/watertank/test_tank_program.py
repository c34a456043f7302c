"""The tank program on its own: its HTTP API on a loopback port (pump, tap, level), with
hostile requests answered by a 4xx while it keeps serving; and the closed loop on the
in-process control plane fighting an open tap."""

from __future__ import annotations

import http.client
import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.testing import control_plane, load_operator

HERE = Path(__file__).parent
TANK = ("waterworks.example.com/v1", "Tank")

operator = load_operator(HERE / "operator.py")
program = operator.tank_program


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def served() -> Iterator[tuple[Any, Clock]]:
    clock = Clock()
    server = program.TankServer(("127.0.0.1", 0), program.SimulatedTank(
        now=clock, capacity=100.0, fill_rate=10.0, drain_rate=5.0))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server, clock
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def call(server: Any, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        raw = response.read()
        # an unknown method gets http.server's own error page
        return response.status, json.loads(raw) if response.status != 501 else raw
    finally:
        conn.close()


def test_the_api_drives_the_pump_the_tap_and_the_level(served: tuple[Any, Clock]) -> None:
    server, clock = served
    assert call(server, "GET", "/healthz") == (200, {"ok": True})
    assert call(server, "PUT", "/pump", b'{"pump": "filling"}')[1]["pump"] == "filling"
    clock.t += 3.0
    assert call(server, "GET", "/tank")[1]["level"] == pytest.approx(30.0)
    assert call(server, "PUT", "/tap", b'{"rate": 4}')[1]["tap"] == 4
    clock.t += 5.0  # filling 10, tap 4: 6 litres a second
    assert call(server, "GET", "/tank")[1]["level"] == pytest.approx(60.0)
    call(server, "PUT", "/pump", b'{"pump": "off"}')
    clock.t += 100.0  # the open tap empties the tank, and no further
    assert call(server, "GET", "/tank")[1]["level"] == 0.0
    assert call(server, "PUT", "/level", b'{"level": 500}')[1]["level"] == 100.0
    state = call(server, "GET", "/tank")[1]
    assert state["capacity"] == 100.0
    assert (state["fillRate"], state["drainRate"]) == (10.0, 5.0)


@pytest.mark.parametrize(("method", "path", "body", "code"), [
    ("PUT", "/pump", b'{"pump": "sideways"}', 400),
    ("PUT", "/pump", b"{}", 400),
    ("PUT", "/tap", b'{"rate": -1}', 400),
    ("PUT", "/tap", b'{"rate": 1e9}', 400),
    ("PUT", "/tap", b'{"rate": "fast"}', 400),
    ("PUT", "/tap", b'{"rate": true}', 400),
    ("PUT", "/level", b'{"level": NaN}', 400),
    ("PUT", "/level", b"[]", 400),
    ("PUT", "/level", b"\xff\xfe", 400),
    ("PUT", "/level", b"x" * 5000, 400),
    ("PUT", "/nowhere", b"{}", 404),
    ("GET", "/nowhere", None, 404),
    ("POST", "/tank", b"{}", 501),
])
def test_bad_requests_get_a_4xx(served: tuple[Any, Clock], method: str, path: str,
                                body: bytes | None, code: int) -> None:
    server, _ = served
    assert call(server, method, path, body)[0] == code
    assert call(server, "GET", "/tank")[1]["tap"] == 0
    assert call(server, "GET", "/healthz")[0] == 200


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/pump", "/tap", "/level"]), body=st.one_of(
    st.binary(max_size=64),
    st.dictionaries(st.sampled_from(["pump", "rate", "level", "x"]), st.one_of(
        st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=10)),
        max_size=3).map(lambda d: json.dumps(d).encode())))
def test_any_request_leaves_a_tank_within_its_bounds(served: tuple[Any, Clock], path: str,
                                                     body: bytes) -> None:
    server, clock = served
    code, _ = call(server, "PUT", path, body)
    assert code in (200, 400)
    clock.t += 1.0
    state = call(server, "GET", "/tank")[1]
    assert 0.0 <= state["level"] <= state["capacity"]
    assert math.isfinite(state["level"])
    assert 0.0 <= state["tap"] <= state["capacity"]
    assert state["pump"] in ("filling", "draining", "off")


async def test_the_loop_holds_the_level_against_an_open_tap() -> None:
    plant = operator.Plant(fill_rate=80.0, drain_rate=80.0)
    registry = operator.build(plant, idle_check=0.05, max_step=0.1)
    async with control_plane() as cp:
        await cp.apply(HERE / "crd.yaml")
        await cp.run_operator(registry)
        await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                        "metadata": {"name": "rooftop"},
                        "spec": {"targetLevel": 40, "tolerance": 2}})
        await cp.wait_for(TANK, "rooftop", lambda t: (t.get("status") or {}).get(
            "pump") == "off" and abs(t["status"]["level"] - 40) <= 2)
        tank = plant.tank("default/rooftop")
        switches = len(tank.history)
        tank.open_tap(30.0)  # less than the pump's 80: the loop can win
        fought = await cp.wait_for(TANK, "rooftop", lambda t: t["status"].get(
            "tap") == 30 and t["status"]["pump"] == "filling")
        assert fought["status"]["level"] < 40
        assert tank.history[switches][1] == "filling"
        tank.open_tap(0.0)
        await cp.wait_for(TANK, "rooftop", lambda t: t["status"].get("tap") == 0 and any(
            c["type"] == "AtTarget" and c["status"] == "True"
            for c in t["status"]["conditions"]))
        assert abs(tank.read_level() - 40) <= 2
