"""The water-tank operator: the simulation alone on a hand-driven clock, then the closed loop
on the in-process control plane with a fast plant (80 litres per second)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from setpoint.testing import control_plane, load_operator

HERE = Path(__file__).parent
TANK = ("waterworks.example.com/v1", "Tank")

operator = load_operator(HERE / "operator.py")


class ManualClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_simulated_tank_fills_drains_and_stays_within_bounds() -> None:
    clock = ManualClock()
    tank = operator.SimulatedTank(now=clock, capacity=50.0, fill_rate=10.0, drain_rate=5.0)
    assert tank.read_level() == 0.0
    tank.switch("filling")
    clock.t += 2.0
    assert tank.read_level() == pytest.approx(20.0)
    clock.t += 10.0
    assert tank.read_level() == 50.0  # full: the overflow goes nowhere
    tank.switch("draining")
    clock.t += 4.0
    assert tank.read_level() == pytest.approx(30.0)
    tank.switch("off")
    clock.t += 100.0
    assert tank.read_level() == pytest.approx(30.0)
    tank.set_level(-5)
    assert tank.read_level() == 0.0
    assert [state for _, state in tank.history] == ["filling", "draining", "off"]


@pytest.mark.parametrize(("level", "running", "expected"), [
    (10.0, "off", "filling"),       # below the band: start filling
    (58.5, "off", "off"),           # inside the band: leave it
    (59.0, "filling", "filling"),   # inside, but filling: run on to the target
    (60.0, "filling", "off"),       # reached
    (63.0, "off", "draining"),      # above the band
    (61.0, "draining", "draining"),
    (59.9, "draining", "off"),
], ids=["below", "inside", "run-on", "reached", "above", "drain-on", "drained"])
def test_decide(level: float, running: str, expected: str) -> None:
    assert operator.decide(level, 60.0, 2.0, running) == expected


def at_target(target: float, tolerance: float) -> Any:
    def check(tank: dict[str, Any]) -> bool:
        status = tank.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return (status.get("pump") == "off" and conditions.get("AtTarget") == "True"
                and abs(status.get("level", -1e9) - target) <= tolerance)
    return check


def pump_is(state: str) -> Any:
    return lambda tank: (tank.get("status") or {}).get("pump") == state


async def test_the_level_is_held_and_recovers_from_interference() -> None:
    plant = operator.Plant(fill_rate=80.0, drain_rate=80.0)
    registry = operator.build(plant, idle_check=0.05, max_step=0.1)
    async with control_plane() as cp:
        await cp.apply(HERE / "crd.yaml")
        await cp.run_operator(registry)
        await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                        "metadata": {"name": "rooftop"},
                        "spec": {"targetLevel": 40, "tolerance": 2}})
        await cp.wait_for(TANK, "rooftop", at_target(40, 2))
        tank = plant.tank("default/rooftop")
        assert abs(tank.read_level() - 40) <= 2
        assert tank.history[0][1] == "filling"

        # someone tops it up from a hose: the next sensor reading notices
        switches = len(tank.history)
        tank.set_level(95.0)
        await cp.wait_for(TANK, "rooftop", pump_is("draining"))
        assert tank.history[switches][1] == "draining"
        await cp.wait_for(TANK, "rooftop", at_target(40, 2))
        assert abs(tank.read_level() - 40) <= 2

        # a new target is a spec change: the watch wakes the controller at once
        await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                        "metadata": {"name": "rooftop"}, "spec": {"targetLevel": 70}})
        switches = len(tank.history)
        await cp.wait_for(TANK, "rooftop", at_target(70, 2))
        assert tank.history[switches][1] == "filling"

        # a second tank, with the schema's default tolerance
        cellar = await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                                 "metadata": {"name": "cellar"}, "spec": {"targetLevel": 20}})
        assert cellar["spec"]["tolerance"] == 1
        await cp.wait_for(TANK, "cellar", at_target(20, 1))

        # beyond the tank: reported, not attempted
        await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                        "metadata": {"name": "rooftop"}, "spec": {"targetLevel": 500}})
        refused = await cp.wait_for(TANK, "rooftop", lambda t: any(
            c["reason"] == "TargetAboveCapacity" for c in t["status"]["conditions"]))
        assert refused["status"]["pump"] == "off"

        # deleting the Tank switches its pump off
        await cp.apply({"apiVersion": "waterworks.example.com/v1", "kind": "Tank",
                        "metadata": {"name": "rooftop"}, "spec": {"targetLevel": 0}})
        await cp.wait_for(TANK, "rooftop", pump_is("draining"))
        await cp.client.delete(TANK, "rooftop")
        await cp.eventually(lambda: tank.pump == "off")
