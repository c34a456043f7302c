"""The process table, read from ``/proc``: identity, membership, signals, usage.

A process is identified by its pid *and* its start time (field 22 of ``/proc/PID/stat``, in
clock ticks since boot): a pid alone can be reused after the process exits, the pair cannot
within one boot. Every check that a recorded process still runs (adoption after an agent
restart, signalling) compares both — a process with the right pid but another start time is
someone else's and is never signalled.

Membership of a pod's processes, without cgroups, is found by *marker*: the runtime puts
``SETPOINT_CONTAINER=<agent>/<pod uid>/<container>`` in every process it starts, which
descendants inherit even when they leave the session or daemonize. :func:`marked` scans
``/proc/*/environ`` for a marker prefix. A process that rewrites its own environment escapes
this scan; with cgroups (as root) membership is the cgroup's and nothing escapes.

These functions do blocking reads of procfs (fast: no disk); callers on an event loop run the
scans (:func:`marked`, :func:`table`) in a thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = ["MARKER_VAR", "ProcInfo", "alive", "children", "info", "marked", "send", "table",
           "usage"]

MARKER_VAR: Final = "SETPOINT_CONTAINER"
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True, slots=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_ticks: int
    cpu_ticks: int
    rss_pages: int


def info(pid: int) -> ProcInfo | None:
    """The process ``pid`` as ``/proc/PID/stat`` shows it; None when there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces and parentheses: the fields start after the last ')'.
    close = raw.rfind(b")")
    fields = raw[close + 2:].split()
    try:
        return ProcInfo(pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), sid=int(fields[3]),
                        state=fields[0].decode(), start_ticks=int(fields[19]),
                        cpu_ticks=int(fields[11]) + int(fields[12]),
                        rss_pages=int(fields[21]))
    except (IndexError, ValueError):
        return None


def alive(pid: int, start_ticks: int) -> bool:
    """Whether the process ``pid`` that started at ``start_ticks`` still runs (not a zombie)."""
    p = info(pid)
    return p is not None and p.start_ticks == start_ticks and p.state not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (its main thread's), in creation order."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return []


def table() -> dict[int, ProcInfo]:
    """Every process visible in ``/proc``."""
    out: dict[int, ProcInfo] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            p = info(int(name))
            if p is not None:
                out[p.pid] = p
    return out


def environ_value(pid: int, var: str) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            data = f.read(1 << 20)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    key = var.encode() + b"="
    for entry in data.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key):].decode(errors="replace")
    return None


def marked(prefix: str, *, exclude: Iterable[int] = ()) -> dict[int, str]:
    """Processes whose marker starts with ``prefix``: pid → marker (zombies excluded)."""
    skip = set(exclude) | {os.getpid()}
    out: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        value = environ_value(int(name), MARKER_VAR)
        if value is not None and value.startswith(prefix):
            p = info(int(name))
            if p is not None and p.state not in ("Z", "X"):
                out[p.pid] = value
    return out


def descendants(roots: Iterable[int], procs: dict[int, ProcInfo]) -> set[int]:
    """``roots`` and every process below them in ``procs``."""
    kids: dict[int, list[int]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p.pid)
    out: set[int] = set()
    stack = [r for r in roots if r in procs]
    while stack:
        pid = stack.pop()
        if pid in out:
            continue
        out.add(pid)
        stack.extend(kids.get(pid, ()))
    return out


def send(pid: int, sig: int, start_ticks: int | None = None) -> bool:
    """Signal ``pid`` if it is still the process that started at ``start_ticks``."""
    if pid <= 1 or pid == os.getpid():
        return False
    if start_ticks is not None and not alive(pid, start_ticks):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
        return True
    return False


def usage(pids: Iterable[int]) -> tuple[float, int]:
    """Summed CPU seconds and resident bytes of ``pids``."""
    ticks = 0
    pages = 0
    for pid in pids:
        p = info(pid)
        if p is not None:
            ticks += p.cpu_ticks
            pages += p.rss_pages
    return ticks / CLOCK_TICKS, pages * PAGE_SIZE


def kill_all(pids: Iterable[int]) -> int:
    """SIGKILL each of ``pids``; how many were signalled."""
    return sum(1 for pid in pids if send(pid, signal.SIGKILL))
