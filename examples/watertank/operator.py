"""The water-tank operator: hold each Tank's level at its target, with a pump and a drain.

The Kubernetes side is the ``Tank`` resource (``waterworks.example.com/v1``): ``spec`` says
what level to hold (``targetLevel``, ``tolerance``); ``status`` reports what the sensor read
(``level``), what the pump does (``pump``: ``filling``, ``draining`` or ``off``), the open
tap's outflow (``tap``), the tank's pod (``tankPod``) and an ``AtTarget`` condition.

The tanks are reached through a *plant*, of which there are two:

- :class:`PodPlant` (what ``setpoint run`` uses): each Tank gets a process of its own, a Pod
  ``NAME-tank`` running ``tank.py`` (the program beside this file, shipped in a ConfigMap
  ``NAME-tank-program`` on a stock ``python`` image), both owned by the Tank. The operator
  reads the level and switches the pump through the tank's HTTP API at the pod's
  ``status.podIP``, port 8080 — so it runs where pod IPs are reachable (on setpoint, on the
  node agent's machine). Anyone else can use the same API to disturb the tank (``kubectl
  exec`` or ``kubectl port-forward``, then ``PUT /tap`` or ``PUT /level``). A deleted pod is
  created again (the controller ``owns`` Pods): the new tank starts empty and is refilled.
- :class:`Plant`: the same physics (``tank.SimulatedTank``) in this process, on an injected
  clock, for tests that need no pods.

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
status writes do not wake it up; its requeue timer does (and, with pods, the pod's changes:
it becoming Ready, being deleted). A deleted Tank has its pump switched off (simulated) or
its pod collected with it (pods). The code uses only ``setpoint.runtime`` and aiohttp, so it
runs unchanged against any cluster::

    setpoint run examples/watertank/operator.py --kubeconfig .setpoint/kubeconfig
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol

import aiohttp

from setpoint.apimachinery import errors
from setpoint.runtime import (
    Condition,
    Context,
    Controller,
    Registry,
    Request,
    Result,
    generation_changed,
    set_condition,
    set_controller_reference,
)

TANK = ("waterworks.example.com/v1", "Tank")
POD = ("v1", "Pod")
CONFIGMAP = ("v1", "ConfigMap")
TANK_LABEL = "waterworks.example.com/tank"
TANK_PORT = 8080
MAX_ANSWER = 64 * 1024
PROGRAM_DIR = "/opt/tank"
TANK_PROGRAM_PATH = Path(__file__).parent / "tank.py"

Pump = Literal["filling", "draining", "off"]


def _load_tank_module() -> ModuleType:
    """``tank.py`` is a program of its own (stdlib only, run in the tank's pod); its
    physics are imported from the file beside this one."""
    name = "watertank_tank_program"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TANK_PROGRAM_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


tank_program = _load_tank_module()
SimulatedTank = tank_program.SimulatedTank


@dataclass(frozen=True)
class Reading:
    level: float
    pump: Pump
    tap: float
    capacity: float
    fill_rate: float
    drain_rate: float


class TankHandle(Protocol):
    """One tank, however it is reached."""

    async def read(self) -> Reading: ...

    async def switch(self, pump: Pump) -> None: ...


class TankPending(Exception):
    """The tank cannot be reached yet (its pod is starting); the message says why."""


class _SimulatedHandle:
    def __init__(self, tank: Any) -> None:
        self.tank = tank

    async def read(self) -> Reading:
        t = self.tank
        return Reading(t.read_level(), t.pump, t.tap, t.capacity, t.fill_rate, t.drain_rate)

    async def switch(self, pump: Pump) -> None:
        self.tank.switch(pump)


class Plant:
    """The simulated tanks, by ``namespace/name``; a tank appears (empty) on first use."""

    def __init__(self, *, now: Callable[[], float] = time.monotonic, capacity: float = 100.0,
                 fill_rate: float = 5.0, drain_rate: float = 5.0) -> None:
        self._now = now
        self._options = {"capacity": capacity, "fill_rate": fill_rate,
                         "drain_rate": drain_rate}
        self._tanks: dict[str, Any] = {}

    def tank(self, key: str) -> Any:
        if key not in self._tanks:
            self._tanks[key] = SimulatedTank(now=self._now, **self._options)
        return self._tanks[key]

    def get(self, key: str) -> Any:
        return self._tanks.get(key)

    async def handle(self, ctx: Context, obj: Mapping[str, Any],
                     session: aiohttp.ClientSession) -> TankHandle:
        meta = obj["metadata"]
        return _SimulatedHandle(self.tank(f"{meta['namespace']}/{meta['name']}"))

    async def release(self, request: Request) -> None:
        gone = self.get(request.key)
        if gone is not None:
            gone.switch("off")

    def pod_of(self, obj: Mapping[str, Any]) -> str | None:
        return None


class _HttpHandle:
    def __init__(self, session: aiohttp.ClientSession, address: str) -> None:
        self.session = session
        self.url = f"http://{address}"

    async def read(self) -> Reading:
        async with self.session.get(f"{self.url}/tank") as response:
            response.raise_for_status()
            raw = await response.content.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER:
            raise ValueError(f"the tank's answer is over {MAX_ANSWER} bytes")
        s = json.loads(raw)
        if not isinstance(s, dict) or s.get("pump") not in ("filling", "draining", "off"):
            raise ValueError("the tank's answer is not a reading")
        values = [float(s[k]) for k in ("level", "tap", "capacity", "fillRate", "drainRate")]
        if not all(math.isfinite(v) and v >= 0 for v in values) or min(values[2:]) <= 0:
            raise ValueError("the tank's answer is not a reading")
        level, tap, capacity, fill_rate, drain_rate = values
        return Reading(level, s["pump"], tap, capacity, fill_rate, drain_rate)

    async def switch(self, pump: Pump) -> None:
        async with self.session.put(f"{self.url}/pump", json={"pump": pump}) as response:
            response.raise_for_status()


class PodPlant:
    """Each Tank's tank is a Pod running ``tank.py``, owned by the Tank."""

    def __init__(self, *, capacity: float = 100.0, fill_rate: float = 5.0,
                 drain_rate: float = 5.0, image: str = "python:3.12-alpine") -> None:
        self.args = ["--capacity", f"{capacity:g}", "--fill-rate", f"{fill_rate:g}",
                     "--drain-rate", f"{drain_rate:g}"]
        self.image = image
        self.program = TANK_PROGRAM_PATH.read_text()

    def pod_of(self, obj: Mapping[str, Any]) -> str | None:
        return f"{obj['metadata']['name']}-tank"

    async def handle(self, ctx: Context, obj: Mapping[str, Any],
                     session: aiohttp.ClientSession) -> TankHandle:
        meta = obj["metadata"]
        name, namespace = meta["name"], meta["namespace"]
        program = f"{name}-tank-program"
        if ctx.cache_for(CONFIGMAP).get(f"{namespace}/{program}") is None:
            await self._create(ctx, obj, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": program, "namespace": namespace,
                             "labels": {TANK_LABEL: name}},
                "data": {"tank.py": self.program}})
        pod_name = f"{name}-tank"
        pod = ctx.cache_for(POD).get(f"{namespace}/{pod_name}")
        if pod is None:
            await self._create(ctx, obj, self.pod(name, namespace))
            raise TankPending(f"starting the tank's pod {pod_name}")
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or ())
        if pod["metadata"].get("deletionTimestamp") or not ready or not status.get("podIP"):
            raise TankPending(f"waiting for the tank's pod {pod_name} to be Ready")
        ip = str(status["podIP"])
        address = f"[{ip}]:{TANK_PORT}" if ":" in ip else f"{ip}:{TANK_PORT}"
        return _HttpHandle(session, address)

    async def _create(self, ctx: Context, owner: Mapping[str, Any],
                      obj: dict[str, Any]) -> None:
        set_controller_reference(owner, obj)
        try:
            await ctx.client.create(obj)
        except errors.AlreadyExists:
            return  # the cache is behind; its watch event reconciles again
        await ctx.recorder.normal(owner, "Created",
                                  f"created {obj['kind']} {obj['metadata']['name']}")

    def pod(self, name: str, namespace: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-tank", "namespace": namespace,
                         "labels": {TANK_LABEL: name}},
            "spec": {
                "terminationGracePeriodSeconds": 5,
                "containers": [{
                    "name": "tank", "image": self.image,
                    "command": ["python3", f"{PROGRAM_DIR}/tank.py"],
                    "args": ["--host", "$(POD_IP)", "--port", str(TANK_PORT), *self.args],
                    "env": [{"name": "POD_IP", "valueFrom": {
                        "fieldRef": {"fieldPath": "status.podIP"}}}],
                    "ports": [{"name": "http", "containerPort": TANK_PORT}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": TANK_PORT},
                                       "periodSeconds": 1},
                    "volumeMounts": [{"name": "program", "mountPath": PROGRAM_DIR,
                                      "readOnly": True}]}],
                "volumes": [{"name": "program",
                             "configMap": {"name": f"{name}-tank-program"}}]}}

    async def release(self, request: Request) -> None:
        pass  # the pod and the ConfigMap go with the Tank (owner references)


class AnyPlant(Protocol):
    async def handle(self, ctx: Context, obj: Mapping[str, Any],
                     session: aiohttp.ClientSession) -> TankHandle: ...

    async def release(self, request: Request) -> None: ...

    def pod_of(self, obj: Mapping[str, Any]) -> str | None: ...


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


def build(plant: AnyPlant, *, idle_check: float = 5.0, max_step: float = 1.0,
          http_timeout: float = 3.0) -> Registry:
    """The controllers for ``plant``: read the sensors again every ``idle_check`` seconds
    when idle, and at least every ``max_step`` seconds while pumping; a tank's API that
    does not answer within ``http_timeout`` seconds is reported unreachable."""
    timeout = aiohttp.ClientTimeout(total=http_timeout)

    async def reconcile(request: Request, ctx: Context) -> Result:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            return await loop(request, ctx, session)

    async def loop(request: Request, ctx: Context, session: aiohttp.ClientSession) -> Result:
        obj = ctx.get(request)
        if obj is None:
            await plant.release(request)
            return Result.done()
        if obj["metadata"].get("deletionTimestamp"):
            return Result.done()
        spec = obj["spec"]
        target, tolerance = float(spec["targetLevel"]), float(spec.get("tolerance", 1.0))
        pod = plant.pod_of(obj)
        try:
            tank = await plant.handle(ctx, obj, session)
            reading = await tank.read()
        except TankPending as e:
            await report(ctx, obj, None, "off", 0.0, pod, Condition(
                type="AtTarget", status="Unknown", reason="TankStarting", message=str(e)))
            return Result.after(idle_check)  # the pod's changes also wake the controller
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError,
                TypeError) as e:
            await report(ctx, obj, None, "off", 0.0, pod, Condition(
                type="AtTarget", status="Unknown", reason="TankUnreachable",
                message=f"cannot read the tank: {e!s:.200}"))
            return Result.after(idle_check)
        if target > reading.capacity:
            await tank.switch("off")
            await report(ctx, obj, reading.level, "off", reading.tap, pod, Condition(
                type="AtTarget", status=False, reason="TargetAboveCapacity",
                message=f"the tank holds at most {reading.capacity:g} litres"))
            return Result.done()  # nothing to do until the spec changes
        level = reading.level
        pump = decide(level, target, tolerance, reading.pump)
        if pump != reading.pump:
            await tank.switch(pump)
        if pump == "off":
            holding = abs(level - target) <= tolerance
            condition = Condition(type="AtTarget", status=holding,
                                  reason="Holding" if holding else "Waiting",
                                  message=f"level {level:.1f} of {target:g} ± {tolerance:g}")
            await report(ctx, obj, level, pump, reading.tap, pod, condition)
            return Result.after(idle_check)
        rate = reading.fill_rate if pump == "filling" else reading.drain_rate
        eta = abs(target - level) / rate
        await report(ctx, obj, level, pump, reading.tap, pod, Condition(
            type="AtTarget", status=False, reason=pump.capitalize(),
            message=f"level {level:.1f}, target {target:g} in about {eta:.1f}s"))
        return Result.after(min(max(eta, 0.005), max_step))

    controller = (Controller(TANK, reconcile, name="tank", predicates=[generation_changed])
                  .owns(POD).owns(CONFIGMAP))
    return Registry([controller])


async def report(ctx: Context, obj: Any, level: float | None, pump: Pump, tap: float,
                 pod: str | None, condition: Condition) -> None:
    """Write what the sensor read and what the pump does, if it changed."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    wanted: dict[str, Any] = {
        "pump": pump,
        "tap": round(tap, 2),
        "observedGeneration": generation,
        "conditions": set_condition(status.get("conditions") or [], condition,
                                    now=datetime.now(UTC)),
    }
    if level is not None:
        wanted["level"] = round(level, 1)
    if pod is not None:
        wanted["tankPod"] = pod
    # set_condition keeps lastTransitionTime while the condition's status holds, so an
    # unchanged reading compares equal and costs no write
    if any(status.get(k) != v for k, v in wanted.items()):
        metadata = obj["metadata"]
        try:
            await ctx.client.patch_status(TANK, metadata["name"], {"status": wanted},
                                          namespace=metadata.get("namespace"))
        except errors.NotFound:
            pass  # deleted meanwhile


plant = PodPlant()
registry = build(plant)
