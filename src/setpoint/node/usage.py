"""What a node agent measures for ``kubectl top``: its machine and its pods' containers.

:func:`collect` gathers one :class:`~setpoint.apimachinery.resourcemetrics.Scrape`, which the
agent's endpoint serves at ``/metrics/resource`` as the kubelet does:

* **the node**: CPU seconds the machine spent outside idle and I/O wait since boot (the
  ``cpu`` line of ``/proc/stat``: user, nice, system, irq, softirq, steal), and its working
  set, ``MemTotal - MemAvailable`` of ``/proc/meminfo`` (metrics-server reads the root
  cgroup's working set; the two differ by reclaimable kernel memory);
* **each container** of the pods the runtime holds: the runtime's cumulative CPU seconds and
  working set (:meth:`~setpoint.agent.PodRuntime.metrics`: the container's cgroup when it has
  one, else the sum over its process tree from ``/proc``: utime + stime, and resident
  memory), and its start time from the pod's status. Simulated pods report zero.

Invariants: every number is cumulative or a gauge; no rate is computed here (the API server
computes it between two scrapes, as metrics-server does, see
:mod:`setpoint.server.nodemetrics`). A pod that ends while it is measured is left out.
Non-guarantees: the node's numbers are the whole machine's, also when several agents share
one machine; ``/proc`` that cannot be read gives zeros.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.agent import PodRuntime
from setpoint.agent.runtime import AgentError
from setpoint.apimachinery import resourcemetrics as rm
from setpoint.apimachinery import timeutil

__all__ = ["NodeProbe", "collect"]


@dataclass(frozen=True, slots=True)
class NodeProbe:
    """Reads the machine's CPU and memory use from a procfs (``/proc`` unless told)."""

    proc: Path = Path("/proc")
    clock_ticks: int = os.sysconf("SC_CLK_TCK")

    def cpu_seconds(self) -> float:
        try:
            text = (self.proc / "stat").read_text()
        except OSError:
            return 0.0
        for line in text.splitlines():
            parts = line.split()
            if parts and parts[0] == "cpu":
                values = [int(v) for v in parts[1:] if v.isdigit()]
                values += [0] * (8 - len(values))
                user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
                return (user + nice + system + irq + softirq + steal) / self.clock_ticks
        return 0.0

    def memory_working_set(self) -> int:
        try:
            text = (self.proc / "meminfo").read_text()
        except OSError:
            return 0
        info: dict[str, int] = {}
        for line in text.splitlines():
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                info[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
        total = info.get("MemTotal", 0)
        return max(total - info.get("MemAvailable", info.get("MemFree", total)), 0)

    def sample(self, now: float) -> rm.NodeSample:
        return rm.NodeSample(self.cpu_seconds(), self.memory_working_set(), now)


def _start_times(status: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in (status or {}).get(key) or []:
            started = ((cs.get("state") or {}).get("running") or {}).get("startedAt")
            if isinstance(started, str):
                try:
                    out[str(cs.get("name"))] = timeutil.parse_time(started).timestamp()
                except ValueError:
                    continue
    return out


async def collect(runtime: PodRuntime, pods: Iterable[Mapping[str, Any]], probe: NodeProbe,
                  now: Callable[[], float]) -> rm.Scrape:
    """One scrape of the node and of ``pods`` (the pods bound to it) that the runtime runs."""
    node = probe.sample(now())
    held = set(runtime.pods())
    containers: list[rm.ContainerSample] = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if uid not in held:
            continue
        try:
            measured = await runtime.metrics(uid)
        except AgentError:
            continue
        starts = _start_times(runtime.pod_status(uid))
        timestamp = measured.timestamp.timestamp()
        for c in measured.containers:
            containers.append(rm.ContainerSample(
                str(meta.get("namespace") or ""), str(meta.get("name") or ""), c.name,
                c.cpu_seconds, c.memory_bytes, timestamp, starts.get(c.name)))
    return rm.Scrape(node, tuple(containers))
