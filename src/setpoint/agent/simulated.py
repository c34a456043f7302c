"""A runtime that runs nothing: pods move through their states on a script.

For operator tests and scale tests: a pod given to :class:`SimulatedRuntime` gets an address,
its init containers complete, its containers become Running, then Ready — with the statuses,
conditions, restarts and CrashLoopBackOff the process runtime would report, and no process.

The script (:class:`Script`) says when: ``start_after`` seconds from acceptance to Running,
``ready_after`` more to Ready, and optionally ``exit_after`` seconds of running before the
container exits with ``exit_code`` (then the restart policy and the backoff apply, as for a
real container). A pod's annotations override the runtime's script per pod::

    simulate.setpoint.dev/start-after: "2"
    simulate.setpoint.dev/ready-after: "1"
    simulate.setpoint.dev/exit-after: "30"
    simulate.setpoint.dev/exit-code: "1"

Time is the injected clock's, so a test on a fake clock moves 100,000 pods through their
lives without waiting. Cost: one timer heap for all pods, driven by one task; a pod is a
:class:`~setpoint.agent.records.PodRecord` (the pod object is referenced, not copied) and
its status is built only when asked for. ``kill_pod`` stops containers at once with
``term_exit_code``.

Not supported (they raise :class:`~setpoint.agent.runtime.NotSupported`): exec and
port-forward. Logs are empty; metrics are zero.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from setpoint.agent import backoff as bo
from setpoint.agent import inputs as inp
from setpoint.agent import network as net
from setpoint.agent import records as rc
from setpoint.agent import runtime as rt
from setpoint.agent import status as st
from setpoint.runtime import clock as rtclock

__all__ = ["ANNOTATION_PREFIX", "Script", "SimulatedRuntime", "script_for"]

ANNOTATION_PREFIX: Final = "simulate.setpoint.dev/"


@dataclass(frozen=True, slots=True, kw_only=True)
class Script:
    start_after: float = 0.0
    ready_after: float = 0.0
    exit_after: float | None = None
    exit_code: int = 0
    term_exit_code: int = 0

    def __post_init__(self) -> None:
        for name in ("start_after", "ready_after"):
            if not 0 <= getattr(self, name) <= 86400 * 365:
                raise ValueError(f"{name} must be between 0 and a year")
        if self.exit_after is not None and not 0 <= self.exit_after <= 86400 * 365:
            raise ValueError("exit_after must be between 0 and a year")


def _number(value: Any, default: float | None) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if 0 <= number <= 86400 * 365 else default


def script_for(pod: Mapping[str, Any], base: Script) -> Script:
    """``base`` with the pod's ``simulate.setpoint.dev/*`` annotations applied."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if not any(k.startswith(ANNOTATION_PREFIX) for k in annotations):
        return base
    get = annotations.get
    exit_code = base.exit_code
    with contextlib.suppress(TypeError, ValueError):
        exit_code = int(get(ANNOTATION_PREFIX + "exit-code", exit_code)) & 0xFF
    return replace(
        base,
        start_after=_number(get(ANNOTATION_PREFIX + "start-after"), base.start_after) or 0.0,
        ready_after=_number(get(ANNOTATION_PREFIX + "ready-after"), base.ready_after) or 0.0,
        exit_after=_number(get(ANNOTATION_PREFIX + "exit-after"), base.exit_after),
        exit_code=exit_code)


class _SimPod:
    __slots__ = ("generation", "rec", "scheduled", "script")

    def __init__(self, rec: rc.PodRecord, script: Script) -> None:
        self.rec = rec
        self.script = script
        self.generation = 0  # bumped when killed: timers of older generations are void
        #: containers whose first start is scheduled (made only for pods that need it)
        self.scheduled: set[str] | None = None

    def schedule(self, name: str) -> bool:
        """Mark ``name``'s first start scheduled; False if it already was."""
        if self.scheduled is None:
            self.scheduled = set()
        if name in self.scheduled:
            return False
        self.scheduled.add(name)
        return True


class SimulatedRuntime:
    """See the module docstring."""

    def __init__(self, *, script: Script | Callable[[Mapping[str, Any]], Script] | None = None,
                 clock: rtclock.AsyncClock | None = None, node_name: str = "",
                 host_ip: str = "127.0.0.1", pod_cidr: str = "10.96.0.0/12",
                 max_pods: int = 1_000_000, events_capacity: int = 1000,
                 backoff_initial: float = 10.0, backoff_max: float = 300.0) -> None:
        self.clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        base = script if isinstance(script, Script) else Script()
        self._script: Callable[[Mapping[str, Any]], Script] = (
            script if callable(script) else (lambda pod: script_for(pod, base)))
        self.node_name = node_name
        self.host_ip = host_ip
        self._pool = net._Pool(pod_cidr, reserved=2)
        self._max_pods = max_pods
        self._backoff = (backoff_initial, backoff_max)
        self._pods: dict[str, _SimPod] = {}
        self._timers: list[tuple[float, int, str, int, str, str]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._feed = rt.ChangeFeed()
        self._events = rt.EventFeed(events_capacity)
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> SimulatedRuntime:
        self._task = asyncio.create_task(self._drive(), name="simulated-runtime")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # -- the timeline --------------------------------------------------------------------

    def _at(self, delay: float, uid: str, generation: int, container: str, action: str) -> None:
        heapq.heappush(self._timers, (self.clock.monotonic() + delay, next(self._seq), uid,
                                      generation, container, action))
        self._wake.set()

    async def _drive(self) -> None:
        while True:
            self._wake.clear()
            now = self.clock.monotonic()
            budget = 10_000  # then let the rest of the loop run
            while self._timers and self._timers[0][0] <= now and budget:
                _, _, uid, generation, container, action = heapq.heappop(self._timers)
                budget -= 1
                sp = self._pods.get(uid)
                if sp is not None and sp.generation == generation:
                    self._step(sp, container, action)
            if self._timers and self._timers[0][0] <= now:
                await asyncio.sleep(0)
                continue
            if not self._timers:
                await self._wake.wait()
                continue
            sleeper = asyncio.ensure_future(rtclock.sleep_until(self.clock, self._timers[0][0]))
            waker = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                waker.cancel()

    def _spec(self, sp: _SimPod) -> Mapping[str, Any]:
        return sp.rec.pod.get("spec") or {}

    def _changed(self, sp: _SimPod) -> None:
        self._feed.mark(sp.rec.uid)

    def _step(self, sp: _SimPod, name: str, action: str) -> None:
        rec = sp.rec
        uid = rec.uid
        now = self.clock.now()
        if action == "sandbox":
            rec.pod_ip = self._pool.allocate(uid)
            rec.sandbox_ready = True
            self._next_init(sp)
        elif action == "start":
            c = rec.containers[name]
            c.run(now, rc.container_id(uid, name, c.restart_count))
            self._emit(sp, "Normal", "Started", f"Started container {name}", name)
            if c.init and not self._sidecar(sp, name):
                self._at(0.0, uid, sp.generation, name, "exit0")
            else:
                self._at(sp.script.ready_after, uid, sp.generation, name, "ready")
                if sp.script.exit_after is not None:
                    self._at(sp.script.exit_after, uid, sp.generation, name, "exit")
        elif action == "ready":
            c = rec.containers[name]
            if c.state == "running":
                c.started = c.ready = True
                if c.init:  # a sidecar: the next init container may start
                    self._next_init(sp)
        elif action in ("exit", "exit0"):
            c = rec.containers[name]
            if c.state != "running":
                return
            code = 0 if action == "exit0" else sp.script.exit_code
            c.terminate(now, code, "Completed" if code == 0 else "Error", "",
                        self.clock.monotonic())
            self._after_exit(sp, name, code)
        elif action == "restart":
            c = rec.containers[name]
            c.backoff.restarted(exited_at=c.exited_mono, now=self.clock.monotonic())
            c.restart_count += 1
            self._at(0.0, uid, sp.generation, name, "start")
            return
        self._changed(sp)

    def _sidecar(self, sp: _SimPod, name: str) -> bool:
        return any(c.get("name") == name and c.get("restartPolicy") == "Always"
                   for c in self._spec(sp).get("initContainers") or [])

    def _next_init(self, sp: _SimPod) -> None:
        """Start the next init container, or the containers when all are done."""
        inits = self._spec(sp).get("initContainers") or []
        for c in inits:
            rec = sp.rec.containers[c["name"]]
            if c.get("restartPolicy") == "Always":
                if sp.schedule(c["name"]):
                    self._at(sp.script.start_after, sp.rec.uid, sp.generation, c["name"],
                             "start")
                    return
                if not rec.started:
                    return
                continue
            if rec.state == "terminated" and rec.exit_code == 0:
                continue
            if sp.schedule(c["name"]):
                self._at(sp.script.start_after, sp.rec.uid, sp.generation, c["name"], "start")
            return
        for c in self._spec(sp).get("containers") or []:
            # Without init containers this runs once (from the sandbox): no bookkeeping.
            if not inits or sp.schedule(c["name"]):
                self._at(sp.script.start_after, sp.rec.uid, sp.generation, c["name"], "start")

    def _after_exit(self, sp: _SimPod, name: str, code: int) -> None:
        rec = sp.rec.containers[name]
        policy = self._spec(sp).get("restartPolicy") or "Always"
        sidecar = self._sidecar(sp, name)
        if sidecar:
            effective = "Always"
        elif rec.init:
            effective = "Never" if policy == "Never" else "OnFailure"
        else:
            effective = policy
        restart = effective == "Always" or (effective == "OnFailure" and code != 0)
        if rec.init and not sidecar and code == 0:
            rec.ready = True
            self._next_init(sp)
            return
        if not restart:
            if all(c.state == "terminated" for n, c in sp.rec.containers.items()
                   if not sp.rec.containers[n].init):
                sp.rec.terminal = True
                self._pool.release(sp.rec.uid)
                sp.rec.sandbox_ready = False
            elif rec.init:  # a failed init container with restartPolicy Never
                sp.rec.sandbox_ready = False
                self._pool.release(sp.rec.uid)
            return
        mono = self.clock.monotonic()
        if rec.backoff.in_backoff(exited_at=rec.exited_mono, now=mono):
            delay = bo.format_duration(rec.backoff.delay)
            rec.wait("CrashLoopBackOff", f"back-off {delay} restarting failed container={name} "
                                         f"pod={sp.rec.full_name()}")
            self._emit(sp, "Warning", "BackOff", f"Back-off restarting failed container {name} "
                                                 f"in pod {sp.rec.full_name()}", name)
            self._at(rec.backoff.ready_at(exited_at=rec.exited_mono) - mono, sp.rec.uid,
                     sp.generation, name, "restart")
        else:
            self._at(0.0, sp.rec.uid, sp.generation, name, "restart")

    def _emit(self, sp: _SimPod, type_: Any, reason: str, message: str, container: str) -> None:
        kind = "initContainers" if sp.rec.containers[container].init else "containers"
        self._events.emit(rt.PodEvent(sp.rec.uid, sp.rec.namespace, sp.rec.name, type_, reason,
                                      message, f"spec.{kind}{{{container}}}"))

    # -- the PodRuntime protocol ---------------------------------------------------------

    def pods(self) -> list[str]:
        return list(self._pods)

    async def sync_pod(self, pod: Mapping[str, Any], inputs: inp.ResolvedInputs) -> None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        if not uid:
            raise ValueError("a pod needs metadata.uid")
        sp = self._pods.get(uid)
        if sp is not None:
            sp.rec.pod = pod
            self._feed.mark(uid)
            return
        if len(self._pods) >= self._max_pods:
            raise rt.AgentError(f"this node runs {self._max_pods} pods already")
        rec = rc.PodRecord(pod, start_time=self.clock.now())
        rec.host_ip = self.host_ip
        for c in rec.containers.values():
            c.backoff.initial, c.backoff.maximum = self._backoff
        sp = _SimPod(rec, self._script(pod))
        self._pods[uid] = sp
        self._at(0.0, uid, 0, "", "sandbox")
        self._feed.mark(uid)

    def _pod(self, uid: str) -> _SimPod:
        sp = self._pods.get(uid)
        if sp is None:
            raise rt.PodNotFound(f"pod {uid} is not on this node")
        return sp

    async def kill_pod(self, uid: str, grace_period: float | None = None) -> None:
        sp = self._pod(uid)
        sp.generation += 1
        now = self.clock.now()
        code = sp.script.term_exit_code
        for name, c in sp.rec.containers.items():
            if c.state == "running":
                self._emit(sp, "Normal", "Killing", f"Stopping container {name}", name)
                c.terminate(now, code, "Completed" if code == 0 else "Error", "",
                            self.clock.monotonic())
        sp.rec.terminal = True
        sp.rec.sandbox_ready = False
        self._pool.release(uid)
        self._feed.mark(uid)

    async def remove_pod(self, uid: str, grace_period: float | None = None) -> None:
        if uid in self._pods:
            await self.kill_pod(uid, grace_period)
            del self._pods[uid]
            self._feed.mark(uid)

    def pod_status(self, uid: str) -> dict[str, Any] | None:
        sp = self._pods.get(uid)
        return None if sp is None else st.pod_status(sp.rec, now=self.clock.now())

    def changes(self) -> AsyncIterator[str]:
        return self._feed.__aiter__()

    def pending_changes(self) -> list[str]:
        """Every pending uid, taken out of the feed (for polling drivers and tests)."""
        return self._feed.drain()

    def events(self) -> AsyncIterator[rt.PodEvent]:
        return self._events.__aiter__()

    def pending_events(self) -> list[rt.PodEvent]:
        return self._events.drain()

    async def logs(self, uid: str, container: str, options: rt.LogOptions
                   ) -> AsyncIterator[bytes]:
        sp = self._pod(uid)
        if container not in sp.rec.containers:
            raise rt.ContainerNotFound(f"container {container} is not valid for pod "
                                       f"{sp.rec.name}")
        return
        yield b""  # an async generator with nothing in it

    async def exec(self, uid: str, container: str, command: list[str], *, stdin: bool = False,
                   tty: bool = False) -> rt.ExecSession:
        raise rt.NotSupported("the simulated runtime runs no processes: no exec")

    async def port_forward(self, uid: str, port: int
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise rt.NotSupported("the simulated runtime runs no processes: no port-forward")

    async def metrics(self, uid: str) -> rt.PodMetrics:
        sp = self._pod(uid)
        return rt.PodMetrics(uid, self.clock.now(),
                             tuple(rt.ContainerMetrics(n, 0.0, 0)
                                   for n, c in sorted(sp.rec.containers.items())
                                   if c.state == "running"))
