"""Fixtures for the process runtime against real processes.

``runtime`` is parametrised over the isolation modes: ``none`` (what an unprivileged agent
does) and ``namespaces`` (root only: network namespaces on a test bridge, mount namespaces,
cgroups). Each test gets its own root directory, bridge name and pod CIDR, and the fixture
checks on the way out that nothing the test started survives: no process carrying the
agent's marker, no network namespace, no bridge, no cgroup directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.agent import inputs as inp
from setpoint.agent import procs
from setpoint.agent.process import ProcessRuntime, ProcessRuntimeConfig
from setpoint.agent.resolve import resolve_inputs
from setpoint.runtime import clock as rtclock

_ids = itertools.count(1)


def can_namespace() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


def network_names() -> tuple[str, str]:
    """A bridge name and a /24 of its own for one test."""
    n = next(_ids)
    slot = (os.getpid() * 7 + n) % 250
    return f"spt{os.getpid() % 100000}x{n}"[:15], f"10.{200 + n % 50}.{slot}.0/24"


def make_config(root: Path, isolation: str, **extra: Any) -> ProcessRuntimeConfig:
    """``none`` is what an unprivileged agent does: no namespaces and no cgroups either (the
    tests run as root, which would otherwise still use cgroups)."""
    bridge, cidr = network_names()
    if isolation == "none":
        extra.setdefault("cgroups", "off")
    return ProcessRuntimeConfig(root_dir=root, isolation=isolation,  # type: ignore[arg-type]
                                bridge=bridge,
                                pod_cidr=cidr if isolation == "namespaces" else None,
                                default_grace_period=10, **extra)


def leftovers(rt: ProcessRuntime, bridge: str) -> list[str]:
    found = []
    marked = procs.marked(rt.agent_id + "/")
    if marked:
        found.append(f"processes: {marked}")
    netns = [n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
             if n.startswith(f"setpoint-{rt.agent_id}-")]
    if netns:
        found.append(f"network namespaces: {netns}")
    if os.path.exists(f"/sys/class/net/{bridge}"):
        found.append(f"bridge {bridge}")
    # whether this runtime uses cgroups or not (another agent on its directory may have)
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(top) == f"setpoint-{rt.agent_id}":
            pods = [d for d in dirs if d.startswith("pod")]
            if pods:
                found.append(f"cgroups of pods {pods} in {top}")
            dirs.clear()
        elif os.path.basename(top).startswith("setpoint-"):
            dirs.clear()
    return found


@contextlib.asynccontextmanager
async def running(config: ProcessRuntimeConfig, *, clock: rtclock.AsyncClock | None = None
                  ) -> AsyncIterator[ProcessRuntime]:
    """A runtime that removes its pods at the end, then checks nothing is left."""
    rt = ProcessRuntime(config, clock=clock)
    try:
        async with rt:
            try:
                yield rt
            finally:
                await rt.shutdown_pods(grace_period=0)
    finally:
        if rt.agent_id:
            assert leftovers(rt, config.bridge) == []


@pytest.fixture(params=["none", "namespaces"])
def isolation(request: pytest.FixtureRequest) -> str:
    if request.param == "namespaces" and not can_namespace():
        pytest.skip("namespaces need root and iproute2")
    return str(request.param)


@pytest.fixture
async def runtime(tmp_path: Path, isolation: str) -> AsyncIterator[ProcessRuntime]:
    async with running(make_config(tmp_path / "agent", isolation)) as rt:
        yield rt


_uids = itertools.count(1)


def pod(*containers: dict[str, Any], name: str = "web", policy: str = "Always",
        inits: tuple[dict[str, Any], ...] = (), volumes: tuple[dict[str, Any], ...] = (),
        grace: int = 5, **spec: Any) -> dict[str, Any]:
    uid = f"uid-{os.getpid()}-{next(_uids)}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": uid,
                         "labels": {"app": name}},
            "spec": {"restartPolicy": policy, "terminationGracePeriodSeconds": grace,
                     "initContainers": list(inits), "containers": list(containers),
                     "volumes": list(volumes), **spec}}


def sh(name: str, script: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script], **extra}


def uid_of(p: dict[str, Any]) -> str:
    return str(p["metadata"]["uid"])


async def start(rt: ProcessRuntime, p: dict[str, Any], **objects: Any) -> str:
    await rt.sync_pod(p, resolve_inputs(p, **objects))
    return uid_of(p)


async def wait_for(rt: ProcessRuntime, uid: str, check: Callable[[dict[str, Any]], bool],
                   timeout: float = 60.0) -> dict[str, Any]:
    """The pod's status once ``check`` holds (polled; fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        status = rt.pod_status(uid)
        if status is not None and check(status):
            return status
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out; last status: {status}")


async def wait_path(path: Path, timeout: float = 60.0) -> None:
    """Until ``path`` exists (polled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} did not appear")


def container(status: dict[str, Any], name: str = "c") -> dict[str, Any]:
    for c in [*status.get("initContainerStatuses", []), *status["containerStatuses"]]:
        if c["name"] == name:
            return c  # type: ignore[no-any-return]
    raise KeyError(name)


def running_ready(status: dict[str, Any]) -> bool:
    return status["phase"] == "Running" and all(
        c["ready"] for c in status["containerStatuses"])


def condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


async def logs_of(rt: ProcessRuntime, uid: str, name: str = "c", **options: Any) -> str:
    from setpoint.agent.runtime import LogOptions

    out = b""
    async for chunk in rt.logs(uid, name, LogOptions(**options)):
        out += chunk
    return out.decode()


async def wait_logs(rt: ProcessRuntime, uid: str, text: str, name: str = "c",
                    timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    got = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            got = await logs_of(rt, uid, name)
        if text in got:
            return got
        await asyncio.sleep(0.05)
    raise AssertionError(f"{text!r} not in the logs: {got!r}")


NO_INPUTS = inp.ResolvedInputs()
