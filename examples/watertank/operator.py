"""The water-tank operator: hold each Tank's level at its target, with a pump and a drain.

The tanks are simulated in this process (:class:`SimulatedTank`: a level sensor, a pump that
fills at ``fill_rate`` litres per second, a drain that empties at ``drain_rate``, driven by an
injected time source), standing in for hardware the operator reaches over some other API.
The Kubernetes side is the ``Tank`` resource (``waterworks.example.com/v1``): ``spec`` says
what level to hold (``targetLevel``, ``tolerance``); ``status`` reports what the sensor read
(``level``), what the pump does (``pump``: ``filling``, ``draining`` or ``off``) and an
``AtTarget`` condition.

The controller is a closed loop on requeue-after, as controllers of things outside the
cluster are:

- read the level; outside ``target ± tolerance``, start the pump (or drain); once running,
  keep going until the target itself is reached (hysteresis, so it does not chatter at the
  band's edge); otherwise switch off;
- report the reading in ``status`` (a write only when something changed);
- come back when the level should reach the target (``Result.after(eta)``, at most
  ``max_step`` seconds), or after ``idle_check`` seconds when idle, because nothing in the
  cluster says when someone opens a tap: only reading the sensor again does.

The ``Tank`` watch passes only spec changes (``generation_changed``): the controller's own
status writes do not wake it up; its requeue timer does. A deleted Tank has its pump switched
off. The code uses only ``setpoint.runtime``, so it runs unchanged against any cluster::

    setpoint run examples/watertank/operator.py --kubeconfig .setpoint/kubeconfig

Module level builds one simulated plant (``plant``) and its controllers (``registry``); tests
build their own with :func:`build` and a faster plant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from setpoint.runtime import (
    Condition,
    Context,
    Registry,
    Request,
    Result,
    generation_changed,
    set_condition,
)

TANK = ("waterworks.example.com/v1", "Tank")

Pump = Literal["filling", "draining", "off"]


class SimulatedTank:
    """One tank: its level changes at the pump's or the drain's rate, between 0 and
    ``capacity``. Time comes from ``now`` (seconds, monotonic), so tests can drive it."""

    def __init__(self, *, now: Callable[[], float], level: float = 0.0,
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
        self._since = now()
        #: every switch of the pump, as (time, new state)
        self.history: list[tuple[float, Pump]] = []

    def _advance(self) -> None:
        now = self._now()
        elapsed, self._since = max(0.0, now - self._since), now
        if self._pump == "filling":
            self._level = min(self.capacity, self._level + self.fill_rate * elapsed)
        elif self._pump == "draining":
            self._level = max(0.0, self._level - self.drain_rate * elapsed)

    def read_level(self) -> float:
        """The sensor: the level now."""
        self._advance()
        return self._level

    @property
    def pump(self) -> Pump:
        return self._pump

    def switch(self, pump: Pump) -> None:
        """Start filling, start draining, or stop."""
        self._advance()
        if pump != self._pump:
            self._pump = pump
            self.history.append((self._since, pump))

    def set_level(self, level: float) -> None:
        """Someone fills or empties the tank behind the operator's back."""
        self._advance()
        self._level = min(max(level, 0.0), self.capacity)


class Plant:
    """The simulated tanks, by ``namespace/name``; a tank appears (empty) on first use."""

    def __init__(self, *, now: Callable[[], float] = time.monotonic, capacity: float = 100.0,
                 fill_rate: float = 5.0, drain_rate: float = 5.0) -> None:
        self._now = now
        self._options = {"capacity": capacity, "fill_rate": fill_rate,
                         "drain_rate": drain_rate}
        self._tanks: dict[str, SimulatedTank] = {}

    def tank(self, key: str) -> SimulatedTank:
        if key not in self._tanks:
            self._tanks[key] = SimulatedTank(now=self._now, **self._options)
        return self._tanks[key]

    def get(self, key: str) -> SimulatedTank | None:
        return self._tanks.get(key)


def decide(level: float, target: float, tolerance: float, running: Pump) -> Pump:
    """What the pump should do: start outside the band, run on until the target itself."""
    if level < target - tolerance:
        return "filling"
    if level > target + tolerance:
        return "draining"
    if running == "filling" and level < target:
        return "filling"
    if running == "draining" and level > target:
        return "draining"
    return "off"


def build(plant: Plant, *, idle_check: float = 5.0, max_step: float = 1.0) -> Registry:
    """The controllers for ``plant``: read the sensors again every ``idle_check`` seconds
    when idle, and at least every ``max_step`` seconds while pumping."""
    registry = Registry()

    @registry.controller(for_=TANK, predicates=[generation_changed])
    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is None:
            gone = plant.get(request.key)
            if gone is not None:
                gone.switch("off")
            return Result.done()
        tank = plant.tank(request.key)
        spec = obj["spec"]
        target, tolerance = float(spec["targetLevel"]), float(spec.get("tolerance", 1.0))
        if target > tank.capacity:
            tank.switch("off")
            await report(ctx, obj, tank.read_level(), "off", Condition(
                type="AtTarget", status=False, reason="TargetAboveCapacity",
                message=f"the tank holds at most {tank.capacity:g} litres"))
            return Result.done()  # nothing to do until the spec changes
        level = tank.read_level()
        pump = decide(level, target, tolerance, tank.pump)
        tank.switch(pump)
        if pump == "off":
            holding = abs(level - target) <= tolerance
            condition = Condition(type="AtTarget", status=holding,
                                  reason="Holding" if holding else "Waiting",
                                  message=f"level {level:.1f} of {target:g} ± {tolerance:g}")
            await report(ctx, obj, level, pump, condition)
            return Result.after(idle_check)
        rate = tank.fill_rate if pump == "filling" else tank.drain_rate
        eta = abs(target - level) / rate
        await report(ctx, obj, level, pump, Condition(
            type="AtTarget", status=False, reason=pump.capitalize(),
            message=f"level {level:.1f}, target {target:g} in about {eta:.1f}s"))
        return Result.after(min(max(eta, 0.005), max_step))

    return registry


async def report(ctx: Context, obj: Any, level: float, pump: Pump,
                 condition: Condition) -> None:
    """Write what the sensor read and what the pump does, if it changed."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    wanted = {
        "level": round(level, 1),
        "pump": pump,
        "observedGeneration": generation,
        "conditions": set_condition(status.get("conditions") or [], condition,
                                    now=datetime.now(UTC)),
    }
    # set_condition keeps lastTransitionTime while the condition's status holds, so an
    # unchanged reading compares equal and costs no write
    if any(status.get(k) != v for k, v in wanted.items()):
        metadata = obj["metadata"]
        await ctx.client.patch_status(TANK, metadata["name"], {"status": wanted},
                                      namespace=metadata.get("namespace"))


plant = Plant()
registry = build(plant)
