"""The process runtime: Kubernetes pods as processes on this machine.

:class:`ProcessRuntime` implements :class:`~setpoint.agent.runtime.PodRuntime`. Per pod it
keeps a directory ``<root>/pods/<uid>`` (mode 0700) holding its state, volumes, container
instances (launch spec, output pipes, exit status) and logs, and runs one worker task that
starts the containers as the kubelet does (:mod:`setpoint.agent.supervisor`).

Isolation is what the machine allows (:mod:`setpoint.agent.isolation`): as root, network, UTS
and mount namespaces plus cgroups; otherwise processes share the host, each pod with its own
loopback address.

**Surviving the agent.** Container processes do not depend on the agent: they run in their
own sessions, their output waits in pipes, their exit status is written by their supervisor
shell. Each pod's state (records, addresses, and each running instance's pid *with its start
time*) is rewritten atomically at most 0.1 s after a transition, and at once when an
instance is started. A new agent on the same root directory
(an exclusive lock keeps it to one at a time) reads it back before anything else:

* an instance whose pid still runs with the recorded start time is **adopted** (watched
  again, its output read again) — never started twice;
* one that is gone is recorded as terminated with the status its supervisor wrote, and the
  pod's worker restarts it per its policy;
* processes that carry this agent's marker, cgroups and network namespaces that belong to no
  recorded pod (the agent died between starting them and recording them) are **killed and
  removed**.

The driver then calls :meth:`ProcessRuntime.sync_pod` for the pods it wants and
:meth:`ProcessRuntime.remove_pod` for the others.

Stopping the runtime (leaving ``async with``) stops watching but does not stop the pods, as a
kubelet restart does not; :meth:`ProcessRuntime.remove_pod` (or :meth:`shutdown_pods`) does.

Bounds: ``max_pods`` pods, ``max_execs`` concurrent execs (and exec probes), log rotation per
:class:`~setpoint.agent.logs.LogConfig`, the events buffer. Blocking work (``/proc`` scans,
volume files, cgroup removal) runs in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import secrets
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

from setpoint.agent import (
    cgroups,
    images,
    instances,
    isolation,
    procs,
    spawner,
    supervisor,
    volumes,
)
from setpoint.agent import environment as envs
from setpoint.agent import execs as execmod
from setpoint.agent import inputs as inp
from setpoint.agent import logs as logmod
from setpoint.agent import network as net
from setpoint.agent import records as rc
from setpoint.agent import runtime as rt
from setpoint.agent import status as st
from setpoint.apimachinery import quantity
from setpoint.apimachinery.regexp import Regexp
from setpoint.runtime import clock as rtclock

__all__ = ["ProcessRuntime", "ProcessRuntimeConfig", "RootDirInUse"]

logger = logging.getLogger(__name__)

_STATE_VERSION = 1
#: How long state changes gather before the state file is rewritten. What is lost if the agent
#: dies meanwhile is re-derived from the processes and their exit files; a started instance's
#: pid is written at once.
_FLUSH_DELAY = 0.1
_UID = Regexp(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def _machine_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRuntimeConfig:
    """How the process runtime runs pods; every bound has a default.

    ``root_dir`` holds everything (created 0700). ``isolation``: ``auto`` uses namespaces when
    the agent runs as root. ``pod_cidr``: the pods' addresses (default ``10.244.0.0/16`` with
    namespaces, ``127.64.0.0/16`` without); ``bridge``: the host bridge with namespaces.
    """

    root_dir: Path
    node_name: str = ""
    host_ip: str = "127.0.0.1"
    isolation: isolation.Mode = "auto"
    pod_cidr: str | None = None
    bridge: str = "setpoint0"
    images: images.ImageTable = field(default_factory=images.ImageTable)
    logs: logmod.LogConfig = field(default_factory=logmod.LogConfig)
    max_pods: int = 110
    max_execs: int = 64
    events_capacity: int = 1000
    allocatable_cpu: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    allocatable_memory: int = field(default_factory=_machine_memory)
    backoff_initial: float = 10.0
    backoff_max: float = 300.0
    default_grace_period: float = 30.0
    python: str = sys.executable
    shell: str = "/bin/sh"
    cgroups: Literal["auto", "off"] = "auto"
    spawner: bool = True
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = "cluster.local"

    def __post_init__(self) -> None:
        if not 1 <= self.max_pods <= 100_000:
            raise ValueError("max_pods must be between 1 and 100000")
        if not 1 <= self.max_execs <= 10_000:
            raise ValueError("max_execs must be between 1 and 10000")
        if not 0 < self.backoff_initial <= self.backoff_max:
            raise ValueError("0 < backoff_initial <= backoff_max")


class RootDirInUse(Exception):
    """Another agent holds the runtime's root directory."""


class _Pod:
    """The runtime's view of one pod (internal)."""

    def __init__(self, rec: rc.PodRecord, directory: Path) -> None:
        self.rec = rec
        self.dir = directory
        self.inputs: inp.ResolvedInputs | None = None
        self.address: net.PodAddress | None = None
        self.volumes: volumes.VolumeSet | None = None
        self.instances: dict[str, instances.Instance] = {}
        #: the last launch spec per container: what an exec runs with
        self.launch: dict[str, dict[str, Any]] = {}
        self.worker: asyncio.Task[None] | None = None
        self.inputs_changed = asyncio.Event()
        self.killing = False
        self.kill_lock = asyncio.Lock()
        self.removed = False
        self.teardown: asyncio.Task[None] | None = None
        self._progress = asyncio.Event()

    def progressed(self) -> None:
        """Wake whoever waits for this pod's state to change."""
        event, self._progress = self._progress, asyncio.Event()
        event.set()

    async def wait_progress(self) -> None:
        await self._progress.wait()

    @property
    def uid(self) -> str:
        return self.rec.uid

    def container_spec(self, name: str) -> Mapping[str, Any] | None:
        spec = self.rec.pod.get("spec") or {}
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            if c.get("name") == name:
                return c  # type: ignore[no-any-return]
        return None


class ProcessRuntime:
    """Runs pods as processes; see the module docstring."""

    def __init__(self, config: ProcessRuntimeConfig, *,
                 clock: rtclock.AsyncClock | None = None,
                 network: net.PodNetwork | None = None) -> None:
        self.config = config
        self.clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._network_override = network
        self.network: net.PodNetwork = network or net.LoopbackNetwork()
        self.cgroups: cgroups.CgroupDriver | None = None
        self.namespaces = False
        self.agent_id = ""
        self.isolation_note = ""
        self._pods: dict[str, _Pod] = {}
        self._feed = rt.ChangeFeed()
        self._events = rt.EventFeed(config.events_capacity)
        self._stack = contextlib.AsyncExitStack()
        self._tasks: asyncio.TaskGroup | None = None
        self._lock_fd: int | None = None
        self._exec_slots = asyncio.Semaphore(config.max_execs)
        self._spawned: set[asyncio.Task[Any]] = set()
        self._dirty: set[_Pod] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self.spawner: spawner.Spawner | None = None
        self._started = False

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def pods_dir(self) -> Path:
        return self.config.root_dir / "pods"

    async def __aenter__(self) -> ProcessRuntime:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _start(self) -> None:
        root = self.config.root_dir
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(root, 0o700)
        self.pods_dir.mkdir(exist_ok=True, mode=0o700)
        self._lock()
        self._stack.callback(self._unlock)
        self.agent_id = self._agent_id()
        iso = isolation.decide(self.config.isolation)
        self.namespaces = iso.namespaces
        self.isolation_note = iso.reason
        if self.config.cgroups == "auto":
            self.cgroups = cgroups.detect(self.agent_id)
            if self.cgroups is not None and self.cgroups.warning:
                logger.warning("%s", self.cgroups.warning)
        if self._network_override is None:
            if self.namespaces:
                self.network = net.BridgeNetwork(agent_id=self.agent_id,
                                                 cidr=self.config.pod_cidr or "10.244.0.0/16",
                                                 bridge=self.config.bridge)
            else:
                self.network = net.LoopbackNetwork(self.config.pod_cidr or "127.64.0.0/16")
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        if self.config.spawner:
            self.spawner = spawner.Spawner(python=self.config.python)
            self._stack.push_async_callback(self.spawner.close)
        self._stack.push_async_callback(self._detach_all)
        await self._recover()
        self._started = True
        logger.info("process runtime %s on %s: %s", self.agent_id, root, self.isolation_note)

    def _lock(self) -> None:
        fd = os.open(self.config.root_dir / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RootDirInUse(f"{self.config.root_dir} is used by another agent") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _agent_id(self) -> str:
        path = self.config.root_dir / "agent.json"
        with contextlib.suppress(OSError, ValueError, KeyError):
            agent_id = str(json.loads(path.read_text())["id"])
            if agent_id.isalnum() and len(agent_id) <= 16:
                return agent_id
        agent_id = secrets.token_hex(4)
        _write_json(path, {"id": agent_id})
        return agent_id

    async def _detach_all(self) -> None:
        """Leaving: stop the workers, stop watching; the pods' processes keep running."""
        workers = [p.worker for p in self._pods.values() if p.worker is not None]
        for w in workers:
            w.cancel()
        for w in workers:
            with contextlib.suppress(asyncio.CancelledError):
                await w
        for task in list(self._spawned):  # probes, exit handling: the task group joins them
            task.cancel()
        self._flush()
        for p in self._pods.values():
            # recorded while the instances still count as running: the next agent adopts
            # them (persisting after cancelling ``exited`` recorded none, and the next agent
            # started every container a second time)
            self.persist(p)
            for inst in p.instances.values():
                if not inst.exited.done():
                    inst.detach()
                    inst.exited.cancel()
        if self.cgroups is not None and not self._pods:
            self.cgroups.close()
        if not self._pods:
            await self.network.close()

    async def shutdown_pods(self, grace_period: float | None = None, *,
                            concurrency: int = 16) -> None:
        """Remove every pod (their processes, addresses and directories), ``concurrency`` at
        a time."""
        slots = asyncio.Semaphore(max(1, concurrency))

        async def remove(uid: str) -> None:
            async with slots:
                await self.remove_pod(uid, grace_period)

        async with asyncio.TaskGroup() as group:
            for uid in list(self._pods):
                group.create_task(remove(uid))

    # -- helpers shared with the supervisor ------------------------------------------------

    def now(self) -> datetime:
        return self.clock.now()

    def gateway(self) -> str:
        """The pod network's gateway (the host, on the bridge), if pods have one."""
        return self.network.gateway if isinstance(self.network, net.BridgeNetwork) else ""

    def marker(self, uid: str, container: str = "") -> str:
        return f"{self.agent_id}/{uid}/{container}"

    def changed(self, p: _Pod) -> None:
        """The pod's state changed: its status is due, and its state file is rewritten
        within :data:`_FLUSH_DELAY` (one write for a burst of changes)."""
        self._feed.mark(p.uid)
        p.progressed()
        self._dirty.add(p)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(_FLUSH_DELAY,
                                                                       self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        dirty, self._dirty = self._dirty, set()
        for p in dirty:
            self.persist(p)

    def emit(self, p: _Pod, type_: Literal["Normal", "Warning"], reason: str, message: str,
             container: str | None = None) -> None:
        field_path = ""
        if container is not None:
            spec = p.container_spec(container)
            kind = "initContainers" if spec is not None and p.rec.containers[
                container].init else "containers"
            field_path = f"spec.{kind}{{{container}}}"
        self._events.emit(rt.PodEvent(p.uid, p.rec.namespace, p.rec.name, type_, reason,
                                      message, field_path))

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        assert self._tasks is not None
        task = self._tasks.create_task(coro, name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    def facts(self, p: _Pod) -> envs.PodFacts:
        return envs.PodFacts(pod_ip=p.rec.pod_ip, host_ip=p.rec.host_ip,
                             node_name=self.config.node_name,
                             allocatable_cpu=Fraction(self.config.allocatable_cpu),
                             allocatable_memory=Fraction(self.config.allocatable_memory))

    def log_base(self, p: _Pod, container: str, number: int) -> Path:
        return p.dir / "logs" / container / f"{number}.log"

    def _container_cgroup(self, p: _Pod, container: str) -> cgroups.ContainerCgroup | None:
        if self.cgroups is None:
            return None
        spec = p.container_spec(container) or {}
        limits = (spec.get("resources") or {}).get("limits") or {}
        return self.cgroups.create(p.uid, container, cpu=_quantity(limits.get("cpu")),
                                   memory=_quantity(limits.get("memory")))

    def _instance(self, p: _Pod, container: str, number: int,
                  cg: cgroups.ContainerCgroup | None) -> instances.Instance:
        log = logmod.LogWriter(self.log_base(p, container, number), self.config.logs, self.now)
        return instances.Instance(directory=p.dir / "containers" / container / str(number),
                                  number=number, marker=self.marker(p.uid, container),
                                  cgroup=cg, log=log)

    async def new_instance(self, p: _Pod, container: str, number: int) -> instances.Instance:
        """An instance not started yet, with its cgroup (limits set) and log."""
        cg = await asyncio.to_thread(self._container_cgroup, p, container)
        return self._instance(p, container, number, cg)

    # -- state ---------------------------------------------------------------------------

    def persist(self, p: _Pod) -> None:
        """Rewrite the pod's state file now (``pod.json`` holds the pod object itself; each
        running instance's launch spec is in its own directory)."""
        self._dirty.discard(p)
        if p.removed:
            return
        state = {
            "version": _STATE_VERSION,
            "record": p.rec.to_json(with_pod=False),
            "address": p.address.to_json() if p.address is not None else None,
            "instances": {name: {"number": i.number, "pid": i.pid, "startTicks": i.start_ticks,
                                 "oomBefore": i.oom_before}
                          for name, i in p.instances.items() if not i.exited.done()},
        }
        _write_json(p.dir / "state.json", state)

    def persist_pod(self, p: _Pod) -> None:
        if not p.removed:
            _write_json(p.dir / "pod.json", p.rec.pod)

    def persist_inputs(self, p: _Pod) -> None:
        if p.inputs is not None and not p.removed:
            _write_json(p.dir / "inputs.json", inp.to_json(p.inputs))

    async def _recover(self) -> None:
        known: set[str] = set()
        for d in sorted(self.pods_dir.iterdir()) if self.pods_dir.is_dir() else []:
            try:
                state = json.loads((d / "state.json").read_text())
                if state.get("version") != _STATE_VERSION:
                    raise ValueError("unknown state version")
                rec = rc.PodRecord.from_json(state["record"],
                                             pod=json.loads((d / "pod.json").read_text()))
            except (OSError, ValueError, KeyError, TypeError) as e:
                logger.warning("cannot recover pod directory %s (%s): removing it", d, e)
                await self._purge_dir(d.name, d)
                continue
            p = _Pod(rec, d)
            known.add(rec.uid)
            self._pods[rec.uid] = p
            with contextlib.suppress(OSError, ValueError, inp.InputsError):
                p.inputs = inp.from_json(json.loads((d / "inputs.json").read_text()))
            if state.get("address"):
                p.address = net.PodAddress.from_json(state["address"])
                self.network.restore(rec.uid, p.address)
            for name, info in (state.get("instances") or {}).items():
                if name not in rec.containers:
                    continue
                inst = await self.new_instance(p, name, int(info["number"]))
                inst.oom_before = int(info.get("oomBefore", 0))
                pid, ticks = int(info["pid"]), int(info["startTicks"])
                inst.pid, inst.start_ticks = pid, ticks
                p.instances[name] = inst
                if procs.alive(pid, ticks):
                    with contextlib.suppress(OSError, ValueError):
                        launched = json.loads(inst.spec_path.read_text())
                        p.launch[name] = {"env": launched["env"], "cwd": launched["cwd"],
                                          "namespaces": bool(launched.get("mount_ns")),
                                          "rewrites": launched.get("rewrites") or []}
                    inst.set_exit_callback(functools.partial(self.instance_exited, p, name))
                    inst.adopt(pid, ticks)
                    if rec.containers[name].container_id != rc.container_id(
                            rec.uid, name, inst.number):
                        self._record_running(p, rec.containers[name], inst)
                    logger.info("adopted %s/%s container %s (pid %d)", rec.namespace, rec.name,
                                name, pid)
                else:
                    inst.open_output()  # to keep what it wrote before it ended
                    self.instance_exited(p, name, inst)
            if not rec.terminal:
                p.worker = self.spawn(supervisor.run_pod(self, p), f"pod-{rec.uid}")
        # What belongs to no recorded pod: a previous agent died before recording it.
        prefix = f"{self.agent_id}/"
        strays = await asyncio.to_thread(procs.marked, prefix)
        unknown = {pid for pid, marker in strays.items()
                   if marker[len(prefix):].split("/", 1)[0] not in known}
        if unknown:
            logger.warning("killing %d processes of pods this agent no longer knows",
                           len(unknown))
            await asyncio.to_thread(procs.kill_all, unknown)
        if self.cgroups is not None:
            for uid in list(self.cgroups.pod_ids()):
                if uid not in known:
                    await asyncio.to_thread(self.cgroups.remove, uid)
        await self.network.cleanup(known)
        for p in self._pods.values():
            self._feed.mark(p.uid)

    async def _purge_dir(self, uid: str, d: Path) -> None:
        await asyncio.to_thread(_rmtree, d)

    # -- instances -----------------------------------------------------------------------

    def instance_exited(self, p: _Pod, name: str, inst: instances.Instance) -> None:
        """The instance's process is gone: finish it (in a task: it scans /proc)."""
        self.spawn(self._finish_instance(p, name, inst), f"exit-{p.uid}-{name}")

    async def _finish_instance(self, p: _Pod, name: str, inst: instances.Instance) -> None:
        try:
            # Whatever the program left behind goes with it, as a container's processes do.
            await asyncio.to_thread(inst.kill_all)
            await inst.wait_report()
            result = inst.reap()
            inst.drain()
        except Exception as e:  # a report is still owed to whoever waits
            logger.exception("finishing %s/%s", p.uid, name)
            result = instances.Exit(137, "ContainerStatusUnknown", str(e))
        rec = p.rec.containers[name]
        cid = rc.container_id(p.uid, name, inst.number)
        if rec.container_id != cid and rec.state != "terminated":
            # Recorded before the record said it ran (the agent died in between).
            self._record_running(p, rec, inst)
        if rec.state == "running" and rec.container_id == cid:
            # Recorded here too, so a pod whose worker is not running (killed) shows it.
            rec.terminate(self.now(), result.exit_code, result.reason, result.message,
                          self.clock.monotonic())
        if not inst.exited.done():
            inst.exited.set_result(result)
        self.changed(p)

    def _record_running(self, p: _Pod, rec: rc.ContainerRecord,
                        inst: instances.Instance) -> None:
        rec.restart_count = inst.number
        rec.run(self.now(), rc.container_id(p.uid, rec.name, inst.number))

    # -- the PodRuntime protocol ---------------------------------------------------------

    def pods(self) -> list[str]:
        return list(self._pods)

    async def sync_pod(self, pod: Mapping[str, Any], inputs: inp.ResolvedInputs) -> None:
        if not self._started:
            raise RuntimeError("use the runtime inside 'async with'")
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not _UID.fullmatch(uid):
            raise ValueError(f"a pod needs a valid metadata.uid, not {uid!r}")
        p = self._pods.get(uid)
        if p is None:
            if len(self._pods) >= self.config.max_pods:
                raise rt.AgentError(f"this node runs {self.config.max_pods} pods already")
            rec = rc.PodRecord(pod, start_time=self.now())
            for c in rec.containers.values():
                c.backoff.initial = self.config.backoff_initial
                c.backoff.maximum = self.config.backoff_max
            rec.host_ip = self.config.host_ip
            d = self.pods_dir / uid
            d.mkdir(exist_ok=True, mode=0o700)
            p = _Pod(rec, d)
            p.inputs = inputs
            self._pods[uid] = p
            self.persist_inputs(p)
            self.persist_pod(p)
            self.persist(p)
            self.changed(p)
            p.worker = self.spawn(supervisor.run_pod(self, p), f"pod-{uid}")
            return
        if pod != p.rec.pod:
            p.rec.pod = pod
            self.persist_pod(p)
        if p.inputs != inputs:
            p.inputs = inputs
            self.persist_inputs(p)
            p.inputs_changed.set()
            if p.rec.sandbox_ready and not p.killing:
                p.volumes = await asyncio.to_thread(
                    volumes.materialise, pod, p.dir, inputs, self.facts(p))
        self.changed(p)

    def _pod(self, uid: str) -> _Pod:
        p = self._pods.get(uid)
        if p is None:
            raise rt.PodNotFound(f"pod {uid} is not on this node")
        return p

    async def kill_pod(self, uid: str, grace_period: float | None = None) -> None:
        p = self._pod(uid)
        async with p.kill_lock:
            await supervisor.kill_pod(self, p, grace_period)

    async def remove_pod(self, uid: str, grace_period: float | None = None) -> None:
        p = self._pods.get(uid)
        if p is None:
            return
        await self.kill_pod(uid, grace_period)
        p.removed = True
        self._pods.pop(uid, None)
        await self._purge_dir(uid, p.dir)
        self._feed.mark(uid)

    async def teardown_sandbox(self, p: _Pod) -> None:
        """Release the pod's address and cgroups (its processes are gone).

        Once per pod, whoever asks (the worker at the pod's end, a kill), and never cut short
        by the cancellation of one of them: a half-deleted namespace would be left behind.
        """
        if p.teardown is None:
            p.teardown = self.spawn(self._teardown_sandbox(p), f"teardown-{p.uid}")
        await asyncio.shield(p.teardown)

    async def _teardown_sandbox(self, p: _Pod) -> None:
        if self.cgroups is not None:
            await asyncio.to_thread(self.cgroups.remove, p.uid)
        if p.address is not None or p.rec.sandbox_ready:
            await self.network.teardown(p.uid)
        p.rec.sandbox_ready = False

    def pod_status(self, uid: str) -> dict[str, Any] | None:
        p = self._pods.get(uid)
        if p is None:
            return None
        return st.pod_status(p.rec, now=self.now())

    def changes(self) -> AsyncIterator[str]:
        return self._feed.__aiter__()

    def events(self) -> AsyncIterator[rt.PodEvent]:
        return self._events.__aiter__()

    def pending_events(self) -> list[rt.PodEvent]:
        """Every buffered event, taken out of the buffer (for tests and polling drivers)."""
        return self._events.drain()

    async def logs(self, uid: str, container: str, options: rt.LogOptions
                   ) -> AsyncIterator[bytes]:
        p = self._pod(uid)
        if container not in p.rec.containers:
            raise rt.ContainerNotFound(f"container {container} is not valid for pod "
                                       f"{p.rec.name}")
        rec = p.rec.containers[container]
        inst = p.instances.get(container)
        if rec.state == "waiting" and rec.last is None and (inst is None or inst.exited.done()):
            raise rt.ContainerNotRunning(
                f'container "{container}" in pod "{p.rec.name}" is waiting to start: '
                f"{rec.reason or 'ContainerCreating'}")
        # The newest instance is number restartCount (0 for the first); --previous the one
        # before it, as the kubelet keeps them.
        number = rec.restart_count - (1 if options.previous else 0)
        if number < 0 or not self.log_base(p, container, number).exists():
            if options.previous:
                raise rt.ContainerNotFound(
                    f'previous terminated container "{container}" in pod "{p.rec.name}" '
                    f"not found")
            return
        writer = (inst.log if inst is not None and inst.number == number
                  and not inst.exited.done() else None)
        async for chunk in logmod.read_log(
                self.log_base(p, container, number), tail_lines=options.tail_lines,
                since_time=options.since_time, timestamps=options.timestamps,
                limit_bytes=options.limit_bytes, follow=options.follow, writer=writer):
            yield chunk

    async def exec(self, uid: str, container: str, command: list[str], *, stdin: bool = False,
                   tty: bool = False) -> rt.ExecSession:
        p = self._pod(uid)
        return await execmod.start_exec(self, p, container, command, stdin=stdin, tty=tty)

    async def exec_capture(self, p: _Pod, container: str, command: list[str],
                           timeout: float) -> tuple[int, bytes]:
        """Run ``command`` in the container, with its output (an exec probe or hook).

        Returns exit code -1 when it did not finish within ``timeout`` (it is then killed).
        """
        session = await execmod.start_exec(self, p, container, command, stdin=False,
                                           tty=False)
        try:
            async with asyncio.timeout(timeout):
                out, err, code = await asyncio.gather(session.stdout.read(1 << 16),
                                                      _read_all(session.stderr), session.wait())
            return code, out + err
        except TimeoutError:
            return -1, b""
        finally:
            await session.close()

    def exec_slots(self) -> asyncio.Semaphore:
        return self._exec_slots

    async def port_forward(self, uid: str, port: int
                           ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        p = self._pod(uid)
        if not 0 < port < 65536:
            raise ValueError(f"invalid port {port}")
        if p.address is None or not p.rec.sandbox_ready:
            raise rt.ContainerNotRunning(f"pod {p.rec.name} has no network (it is not running)")
        return await self.network.connect(p.address, port)

    async def metrics(self, uid: str) -> rt.PodMetrics:
        p = self._pod(uid)
        return await asyncio.to_thread(self._metrics, p)

    def _metrics(self, p: _Pod) -> rt.PodMetrics:
        out = []
        for name, inst in list(p.instances.items()):
            if inst.exited.done():
                continue
            cpu = mem = None
            if inst.cgroup is not None:
                cpu = inst.cgroup.cpu_seconds()
                mem = inst.cgroup.memory_bytes()
            if cpu is None or mem is None:
                used_cpu, used_mem = procs.usage(inst.members())
                cpu = used_cpu if cpu is None else cpu
                mem = used_mem if mem is None else mem
            out.append(rt.ContainerMetrics(name, cpu, mem))
        return rt.PodMetrics(p.uid, self.now(), tuple(sorted(out, key=lambda m: m.name)))


async def _read_all(reader: asyncio.StreamReader | None) -> bytes:
    if reader is None:
        return b""
    return await reader.read(1 << 16)


def _quantity(value: Any) -> Fraction | None:
    if value is None:
        return None
    try:
        return quantity.value_of(value)
    except quantity.QuantityError:
        return None


def _write_json(path: Path, data: Any) -> None:
    """Replace ``path`` atomically (not fsynced: it must survive the agent, not the machine)."""
    tmp = path.with_name(path.name + ".tmp")
    encoded = json.dumps(data, separators=(",", ":")).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, encoded)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
