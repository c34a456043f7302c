"""Per-pod and per-container cgroups: membership, kill, CPU and memory limits, usage.

Layout: under the agent's *own* cgroup in each hierarchy (so pods are accounted inside
whatever contains the agent, and two agents on one machine never meet) the runtime creates
``setpoint-<agent id>/pod<uid>/<container>``. It uses what the machine offers:

* **cgroup v2** (``cgroup2`` mounted anywhere, e.g. ``/sys/fs/cgroup`` or ``.../unified`` on
  hybrid machines): membership, ``cgroup.kill`` (every process, atomically), ``cpu.stat``
  usage; ``cpu.max`` and ``memory.max`` when those controllers can be enabled for the agent's
  subtree (the agent's cgroup must be able to delegate them: the root, or a delegated one).
* **cgroup v1** hierarchies for the controllers v2 does not have: ``memory``
  (``memory.limit_in_bytes``, usage, ``oom_kill`` count), ``cpu`` (``cpu.cfs_quota_us``) and
  ``cpuacct`` (usage).

A process joins by writing its pid to ``cgroup.procs`` of each hierarchy *before* it executes
the container's command (the launcher does), so every descendant is a member from its birth.

Limits: ``resources.limits.cpu`` → a CFS quota of ``cpu * 100 ms`` per 100 ms period;
``resources.limits.memory`` → the memory limit; the kernel's OOM killer then kills inside the
container, which reports ``OOMKilled``. Not enforced without the controllers (a message says so
once). Removal kills what is left, then removes the directories deepest first.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

__all__ = ["CgroupDriver", "ContainerCgroup", "detect"]

logger = logging.getLogger(__name__)

_CPU_PERIOD_US = 100_000


def _own_cgroups() -> dict[str, str]:
    """Controller (``""`` for v2) → the agent's path in that hierarchy."""
    out: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            hid, controllers, path = line.rstrip("\n").split(":", 2)
            if hid == "0" and controllers == "":
                out[""] = path
            else:
                for c in controllers.split(","):
                    out[c] = path
    return out


def _mounts() -> tuple[Path | None, dict[str, Path]]:
    """The cgroup2 mount point, and each v1 controller's mount point."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = left.split()
            fstype, _, opts = right.split()[:3] if len(right.split()) >= 3 else ("", "", "")
            if len(fields) < 5:
                continue
            mount_point = Path(fields[4].replace("\\040", " "))
            if fstype == "cgroup2" and v2 is None:
                v2 = mount_point
            elif fstype == "cgroup":
                for opt in opts.split(","):
                    if opt in ("cpu", "cpuacct", "memory", "pids", "freezer"):
                        v1.setdefault(opt, mount_point)
    return v2, v1


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError as e:
        logger.debug("cannot write %s to %s: %s", value, path, e)
        return False


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _read_keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("-").isdigit():
                out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


@dataclass(frozen=True, slots=True)
class ContainerCgroup:
    """One container's (or a pod's) directories, one per hierarchy used."""

    v2: Path | None
    memory: Path | None
    cpu: Path | None
    cpuacct: Path | None
    v2_memory: bool
    v2_cpu: bool

    def dirs(self) -> list[Path]:
        return [d for d in (self.v2, self.memory, self.cpu, self.cpuacct) if d is not None]

    def procs_files(self) -> list[str]:
        """What a process writes its pid to, to join (every hierarchy)."""
        return [str(d / "cgroup.procs") for d in self.dirs()]

    def pids(self) -> set[int]:
        out: set[int] = set()
        for d in self.dirs():
            with contextlib.suppress(OSError, ValueError):
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return out

    def oom_kills(self) -> int:
        if self.v2 is not None and self.v2_memory:
            return _read_keyed(self.v2 / "memory.events").get("oom_kill", 0)
        if self.memory is not None:
            return _read_keyed(self.memory / "memory.oom_control").get("oom_kill", 0)
        return 0

    def cpu_seconds(self) -> float | None:
        if self.v2 is not None:
            usec = _read_keyed(self.v2 / "cpu.stat").get("usage_usec")
            if usec is not None:
                return usec / 1e6
        if self.cpuacct is not None:
            ns = _read_int(self.cpuacct / "cpuacct.usage")
            if ns is not None:
                return ns / 1e9
        return None

    def memory_bytes(self) -> int | None:
        """The working set: usage minus inactive file cache (what ``kubectl top`` shows)."""
        if self.v2 is not None and self.v2_memory:
            usage = _read_int(self.v2 / "memory.current")
            inactive = _read_keyed(self.v2 / "memory.stat").get("inactive_file", 0)
        elif self.memory is not None:
            usage = _read_int(self.memory / "memory.usage_in_bytes")
            inactive = _read_keyed(self.memory / "memory.stat").get("total_inactive_file", 0)
        else:
            return None
        return None if usage is None else max(0, usage - inactive)

    def kill(self) -> None:
        """SIGKILL every member (``cgroup.kill`` where there is one)."""
        if self.v2 is not None and _write(self.v2 / "cgroup.kill", "1"):
            return
        for pid in self.pids():
            if pid != os.getpid():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)


class CgroupDriver:
    """Creates and removes the agent's cgroups; see the module docstring."""

    def __init__(self, agent_id: str, *, v2: Path | None, v1: dict[str, Path],
                 own: dict[str, str]) -> None:
        name = f"setpoint-{agent_id}"
        self._v2_root = (v2 / own[""].lstrip("/") / name) if v2 is not None and "" in own \
            else None
        self._v1_roots: dict[str, Path] = {}
        for ctrl in ("memory", "cpu", "cpuacct"):
            if ctrl in v1 and ctrl in own:
                self._v1_roots[ctrl] = v1[ctrl] / own[ctrl].lstrip("/") / name
        self.v2_memory = False
        self.v2_cpu = False
        self.warning = ""

    def setup(self) -> bool:
        """Create the agent's directories; False when no hierarchy is writable."""
        ok = False
        if self._v2_root is not None:
            try:
                self._v2_root.mkdir(exist_ok=True)
                ok = True
                wanted = [c for c in ("cpu", "memory")
                          if c in (self._v2_root.parent / "cgroup.controllers").read_text().split()]
                for c in wanted:
                    # Delegation to the agent's directory needs the parent's subtree_control;
                    # a parent that holds processes refuses (no internal processes in v2).
                    if _write(self._v2_root.parent / "cgroup.subtree_control", f"+{c}"):
                        _write(self._v2_root / "cgroup.subtree_control", f"+{c}")
                enabled = (self._v2_root / "cgroup.subtree_control").read_text().split()
                self.v2_memory = "memory" in enabled
                self.v2_cpu = "cpu" in enabled
            except OSError as e:
                logger.info("cgroup v2 not usable at %s: %s", self._v2_root, e)
                self._v2_root = None
        for ctrl, root in list(self._v1_roots.items()):
            if (ctrl == "memory" and self.v2_memory) or (ctrl != "memory" and self.v2_cpu):
                del self._v1_roots[ctrl]
                continue
            try:
                root.mkdir(exist_ok=True)
                ok = True
            except OSError as e:
                logger.info("cgroup v1 %s not usable at %s: %s", ctrl, root, e)
                del self._v1_roots[ctrl]
        missing = [c for c, have in (("memory", self.v2_memory or "memory" in self._v1_roots),
                                     ("cpu", self.v2_cpu or "cpu" in self._v1_roots))
                   if not have]
        if missing:
            self.warning = (f"the {' and '.join(missing)} controller(s) cannot be used: "
                            f"limits on {' and '.join(missing)} are not enforced")
        return ok

    def _paths(self, *parts: str) -> ContainerCgroup:
        def under(root: Path | None) -> Path | None:
            return None if root is None else root.joinpath(*parts)

        return ContainerCgroup(v2=under(self._v2_root),
                               memory=under(self._v1_roots.get("memory")),
                               cpu=under(self._v1_roots.get("cpu")),
                               cpuacct=under(self._v1_roots.get("cpuacct")),
                               v2_memory=self.v2_memory, v2_cpu=self.v2_cpu)

    def pod(self, uid: str) -> ContainerCgroup:
        return self._paths(f"pod{uid}")

    def container(self, uid: str, name: str) -> ContainerCgroup:
        return self._paths(f"pod{uid}", name)

    def create(self, uid: str, name: str, *, cpu: Fraction | None, memory: Fraction | None
               ) -> ContainerCgroup:
        """The container's cgroup, created, with its limits set (None: no limit)."""
        pod = self.pod(uid)
        cg = self.container(uid, name)
        for d in pod.dirs():
            d.mkdir(exist_ok=True)
        if pod.v2 is not None:
            enabled = [f"+{c}" for c, on in (("cpu", self.v2_cpu), ("memory", self.v2_memory))
                       if on]
            if enabled:
                _write(pod.v2 / "cgroup.subtree_control", " ".join(enabled))
        for d in cg.dirs():
            d.mkdir(exist_ok=True)
        quota = (max(1000, math.ceil(cpu * _CPU_PERIOD_US)) if cpu is not None and cpu > 0
                 else None)
        mem = math.ceil(memory) if memory is not None and memory > 0 else None
        if cg.v2 is not None and self.v2_cpu:
            _write(cg.v2 / "cpu.max", f"{quota if quota else 'max'} {_CPU_PERIOD_US}")
        elif cg.cpu is not None:
            _write(cg.cpu / "cpu.cfs_period_us", str(_CPU_PERIOD_US))
            _write(cg.cpu / "cpu.cfs_quota_us", str(quota if quota else -1))
        if cg.v2 is not None and self.v2_memory:
            _write(cg.v2 / "memory.max", str(mem) if mem else "max")
            if mem:
                _write(cg.v2 / "memory.swap.max", "0")
        elif cg.memory is not None:
            _write(cg.memory / "memory.limit_in_bytes", str(mem) if mem else "-1")
        return cg

    def pod_ids(self) -> Iterator[str]:
        """Uids of the pods that have directories (to find what a previous agent left)."""
        seen: set[str] = set()
        for root in (self._v2_root, *self._v1_roots.values()):
            if root is None or not root.is_dir():
                continue
            for d in root.iterdir():
                if d.is_dir() and d.name.startswith("pod") and d.name[3:] not in seen:
                    seen.add(d.name[3:])
                    yield d.name[3:]

    def remove(self, uid: str, *, attempts: int = 100) -> bool:
        """Kill what is left in the pod's cgroups and remove them; False if some remain.

        Blocking (it waits for killed processes to leave): run it in a thread.
        """
        pod = self.pod(uid)
        for _ in range(attempts):
            left = False
            for d in pod.dirs():
                if not d.is_dir():
                    continue
                subdirs = sorted(_subdirs(d), key=lambda p: -len(p.parts))
                if d == pod.v2:
                    _write(d / "cgroup.kill", "1")  # the whole subtree
                else:
                    for sub in [*subdirs, d]:
                        for pid in _pids_of(sub):
                            if pid != os.getpid():
                                with contextlib.suppress(ProcessLookupError, PermissionError):
                                    os.kill(pid, signal.SIGKILL)
                for sub in [*subdirs, d]:
                    try:
                        sub.rmdir()
                    except FileNotFoundError:
                        pass
                    except OSError:
                        left = True
            if not left:
                return True
            time.sleep(0.01)  # killed processes take a moment to leave their cgroup
        return False

    def close(self) -> None:
        """Remove the agent's own directories if no pod is left in them."""
        for root in (self._v2_root, *self._v1_roots.values()):
            if root is not None:
                with contextlib.suppress(OSError):
                    root.rmdir()


def _subdirs(d: Path) -> list[Path]:
    """Every directory below ``d`` (one that disappears meanwhile is skipped)."""
    out: list[Path] = []
    for top, dirs, _ in os.walk(d, onerror=lambda e: None):
        out.extend(Path(top) / name for name in dirs)
    return out


def _pids_of(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def detect(agent_id: str) -> CgroupDriver | None:
    """A driver for this machine, or None when cgroups cannot be used (not root, no mount)."""
    if os.geteuid() != 0:
        return None
    try:
        v2, v1 = _mounts()
        own = _own_cgroups()
    except OSError:
        return None
    driver = CgroupDriver(agent_id, v2=v2, v1=v1, own=own)
    return driver if driver.setup() else None
