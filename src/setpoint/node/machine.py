"""What a node reports about its machine: capacity, addresses, system info, conditions.

The kubelet's Node status, computed from this machine: ``capacity`` (``cpu`` = the CPUs the
process may use, ``memory`` = ``MemTotal`` in Ki, ``pods``, ``ephemeral-storage`` = the size
of the file system holding the agent's directory), ``allocatable`` (the same: no reservations
are configured), ``addresses`` (``InternalIP``, ``Hostname``), ``nodeInfo`` (machine and boot
ids, kernel, OS image, architecture, versions), ``daemonEndpoints`` (the agent's HTTPS port)
and the four conditions with the kubelet's reasons and messages:

=================  ==================================  ===================================
condition          True when                           reasons (False / True)
=================  ==================================  ===================================
``Ready``          always, while the agent reports     ``KubeletReady`` (True)
``MemoryPressure`` ``MemAvailable`` < 100 Mi           ``KubeletHasSufficientMemory`` /
                                                       ``KubeletHasInsufficientMemory``
``DiskPressure``   < 10 % free on the agent's FS       ``KubeletHasNoDiskPressure`` /
                                                       ``KubeletHasDiskPressure``
``PIDPressure``    > 90 % of ``pid_max`` in use        ``KubeletHasSufficientPID`` /
                                                       ``KubeletHasInsufficientPID``
=================  ==================================  ===================================

(the kubelet's default hard eviction thresholds; the agent evicts nothing). A condition's
``lastTransitionTime`` moves only when its status changes; ``lastHeartbeatTime`` on every
report.

Everything read from the machine goes through :class:`Probe`, so tests can inject one.
Non-guarantee: a file that cannot be read leaves its field empty (``systemUUID`` is usually
readable by root only).
"""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from setpoint.apimachinery import timeutil

__all__ = ["AGENT_VERSION", "MachineFacts", "Probe", "conditions", "node_object",
           "node_status", "route_address"]

Obj = dict[str, Any]

#: the ``kubeletVersion`` a node reports (kubectl prints it as VERSION)
AGENT_VERSION: Final = "v1.32.0-setpoint"
MEMORY_PRESSURE_BYTES: Final = 100 * 1024 * 1024
DISK_PRESSURE_FREE: Final = 0.10
PID_PRESSURE_USED: Final = 0.90

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le",
         "s390x": "s390x", "i686": "386"}


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """A sample of the machine (see :class:`Probe`)."""

    cpus: int
    memory_total: int
    memory_available: int
    disk_total: int
    disk_free: int
    pids: int
    pid_max: int
    machine_id: str = ""
    system_uuid: str = ""
    boot_id: str = ""
    kernel: str = ""
    os_image: str = ""
    architecture: str = "amd64"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace").strip()
    except OSError:
        return ""


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    for line in _read("/proc/meminfo").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _os_image() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.system()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class Probe:
    """Reads :class:`MachineFacts` for the file system holding ``root_dir``."""

    root_dir: Path

    def sample(self) -> MachineFacts:
        mem = _meminfo()
        try:
            fs = os.statvfs(self.root_dir)
            disk_total, disk_free = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
        except OSError:
            disk_total = disk_free = 0
        pid_max = int(_read("/proc/sys/kernel/pid_max") or 0) or 4_194_304
        pids = sum(1 for name in _listdir("/proc") if name.isdigit())
        return MachineFacts(
            cpus=_cpus(), memory_total=mem.get("MemTotal", 0),
            memory_available=mem.get("MemAvailable", mem.get("MemFree", 0)),
            disk_total=disk_total, disk_free=disk_free, pids=pids, pid_max=pid_max,
            machine_id=_read("/etc/machine-id"),
            system_uuid=_read("/sys/class/dmi/id/product_uuid"),
            boot_id=_read("/proc/sys/kernel/random/boot_id"),
            kernel=platform.release(), os_image=_os_image(),
            architecture=_ARCH.get(platform.machine(), platform.machine() or "amd64"))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def route_address(host: str, port: int) -> str:
    """The local address this machine uses to reach ``host`` (what a node reports as its
    InternalIP when none is given: the kubelet picks the default route's address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((host, port or 443))  # UDP: no packet is sent
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeIdentity:
    name: str
    address: str
    hostname: str
    port: int
    max_pods: int
    runtime_version: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _quantity_ki(value: int) -> str:
    return f"{value // 1024}Ki"


def capacity(facts: MachineFacts, max_pods: int) -> dict[str, str]:
    return {"cpu": str(facts.cpus), "memory": _quantity_ki(facts.memory_total),
            "pods": str(max_pods), "ephemeral-storage": _quantity_ki(facts.disk_total)}


_CONDITIONS: Final = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
     "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
     "KubeletHasDiskPressure", "kubelet has disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available",
     "KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
)


def conditions(facts: MachineFacts, now: datetime,
               previous: list[Mapping[str, Any]] | None = None) -> list[Obj]:
    """The node's conditions, keeping ``lastTransitionTime`` of those that did not change."""
    stamp = timeutil.format_time(now)
    before = {c.get("type"): c for c in previous or [] if isinstance(c, Mapping)}
    pressure = {
        "MemoryPressure": facts.memory_total > 0
        and facts.memory_available < MEMORY_PRESSURE_BYTES,
        "DiskPressure": facts.disk_total > 0
        and facts.disk_free < facts.disk_total * DISK_PRESSURE_FREE,
        "PIDPressure": facts.pid_max > 0 and facts.pids > facts.pid_max * PID_PRESSURE_USED,
    }
    out: list[Obj] = []

    def add(type_: str, status: str, reason: str, message: str) -> None:
        old = before.get(type_)
        since = old.get("lastTransitionTime") if old is not None \
            and old.get("status") == status else None
        out.append({"type": type_, "status": status, "lastHeartbeatTime": stamp,
                    "lastTransitionTime": since or stamp, "reason": reason,
                    "message": message})

    for type_, ok_reason, ok_message, bad_reason, bad_message in _CONDITIONS:
        if pressure[type_]:
            add(type_, "True", bad_reason, bad_message)
        else:
            add(type_, "False", ok_reason, ok_message)
    add("Ready", "True", "KubeletReady", "kubelet is posting ready status")
    return out


def node_status(identity: NodeIdentity, facts: MachineFacts, now: datetime,
                previous: Mapping[str, Any] | None = None) -> Obj:
    """The Node's ``status`` as the agent reports it."""
    cap = capacity(facts, identity.max_pods)
    addresses = [{"type": "InternalIP", "address": identity.address}]
    if identity.hostname and identity.hostname != identity.address:
        addresses.append({"type": "Hostname", "address": identity.hostname})
    return {
        "capacity": cap,
        "allocatable": dict(cap),
        "conditions": conditions(facts, now, list((previous or {}).get("conditions") or [])),
        "addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": identity.port}},
        "nodeInfo": {
            "machineID": facts.machine_id, "systemUUID": facts.system_uuid,
            "bootID": facts.boot_id, "kernelVersion": facts.kernel,
            "osImage": facts.os_image, "containerRuntimeVersion": identity.runtime_version,
            "kubeletVersion": AGENT_VERSION, "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": facts.architecture,
        },
    }


def node_labels(identity: NodeIdentity, facts: MachineFacts) -> dict[str, str]:
    """The well-known labels a kubelet puts on its Node, then the configured ones."""
    return {"kubernetes.io/hostname": identity.name, "kubernetes.io/os": "linux",
            "kubernetes.io/arch": facts.architecture, "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": facts.architecture, **identity.labels}


def node_object(identity: NodeIdentity, facts: MachineFacts, now: datetime) -> Obj:
    """The Node the agent registers."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": identity.name, "labels": node_labels(identity, facts),
                         "annotations": {
                             "node.alpha.kubernetes.io/ttl": "0",
                             "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {},
            "status": node_status(identity, facts, now)}
