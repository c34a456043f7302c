"""The simulated runtime: pods move through their states on a script and a fake clock."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import pytest

from setpoint.agent import inputs as inp
from setpoint.agent import network as net
from setpoint.agent import runtime as rt
from setpoint.agent.simulated import Script, SimulatedRuntime
from setpoint.runtime.clock import FakeAsyncClock

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

NO_INPUTS = inp.ResolvedInputs()


@pytest.fixture
def clock() -> FakeAsyncClock:
    return FakeAsyncClock()


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    import asyncio

    before = asyncio.all_tasks()
    yield
    leaked = [t for t in asyncio.all_tasks() - before
              if t is not asyncio.current_task() and not t.done()]
    assert not leaked, leaked


def pod(uid: str, *, policy: str = "Always", inits: tuple[str, ...] = (),
        annotations: dict[str, str] | None = None, containers: tuple[str, ...] = ("c",)
        ) -> dict[str, Any]:
    return {"metadata": {"name": f"pod-{uid}", "namespace": "ns", "uid": uid,
                         "annotations": annotations or {}},
            "spec": {"restartPolicy": policy,
                     "initContainers": [{"name": n, "image": "busybox"} for n in inits],
                     "containers": [{"name": n, "image": "busybox"} for n in containers]}}


def ready(status: dict[str, Any] | None) -> bool:
    assert status is not None
    return next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"


async def test_pods_become_running_then_ready_on_the_script(clock: FakeAsyncClock) -> None:
    async with SimulatedRuntime(clock=clock, script=Script(start_after=2, ready_after=3)) as sim:
        await sim.sync_pod(pod("a"), NO_INPUTS)
        await clock.tick(0)
        s = sim.pod_status("a")
        assert s is not None
        assert s["phase"] == "Pending"
        assert s["podIP"] == "10.96.0.2"
        await clock.tick(2)
        s = sim.pod_status("a")
        assert s is not None
        assert s["phase"] == "Running"
        assert not ready(s)
        await clock.tick(3)
        assert ready(sim.pod_status("a"))
        assert "a" in sim.pending_changes()
        assert [e.reason for e in sim.pending_events()] == ["Started"]


async def test_annotations_script_a_crash_loop(clock: FakeAsyncClock) -> None:
    annotations = {"simulate.setpoint.dev/exit-after": "1",
                   "simulate.setpoint.dev/exit-code": "2"}
    async with SimulatedRuntime(clock=clock) as sim:
        await sim.sync_pod(pod("a", annotations=annotations), NO_INPUTS)
        await clock.tick(0)

        def c() -> dict[str, Any]:
            s = sim.pod_status("a")
            assert s is not None
            return s["containerStatuses"][0]  # type: ignore[no-any-return]

        await clock.tick(1)  # exits; restarts at once the first time
        assert c()["restartCount"] == 1
        assert "running" in c()["state"]
        assert c()["lastState"]["terminated"]["exitCode"] == 2
        await clock.tick(1)  # exits again: back-off 10s
        assert c()["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert c()["state"]["waiting"]["message"] == (
            "back-off 10s restarting failed container=c pod=pod-a_ns(a)")
        await clock.tick(9.9)
        assert c()["restartCount"] == 1
        await clock.tick(0.1)
        assert c()["restartCount"] == 2
        await clock.tick(1)
        assert c()["state"]["waiting"]["message"].startswith("back-off 20s")


async def test_init_containers_complete_in_order(clock: FakeAsyncClock) -> None:
    async with SimulatedRuntime(clock=clock, script=Script(start_after=1)) as sim:
        await sim.sync_pod(pod("a", inits=("i1", "i2")), NO_INPUTS)
        await clock.tick(0)
        s = sim.pod_status("a")
        assert s is not None
        assert s["phase"] == "Pending"
        await clock.tick(1)
        s = sim.pod_status("a")
        assert s is not None
        assert next(c["state"] for c in s["initContainerStatuses"])["terminated"]["reason"] == (
            "Completed")
        assert "waiting" in s["initContainerStatuses"][1]["state"]
        await clock.tick(2)
        s = sim.pod_status("a")
        assert s is not None
        assert s["phase"] == "Running"
        assert ready(s)


async def test_jobs_succeed_and_fail(clock: FakeAsyncClock) -> None:
    async with SimulatedRuntime(clock=clock, script=Script(exit_after=5)) as sim:
        await sim.sync_pod(pod("ok", policy="Never"), NO_INPUTS)
        await sim.sync_pod(pod("bad", policy="Never",
                               annotations={"simulate.setpoint.dev/exit-code": "1"}), NO_INPUTS)
        await clock.tick(5)
        assert sim.pod_status("ok")["phase"] == "Succeeded"  # type: ignore[index]
        assert sim.pod_status("bad")["phase"] == "Failed"  # type: ignore[index]


async def test_kill_and_remove(clock: FakeAsyncClock) -> None:
    async with SimulatedRuntime(clock=clock, script=Script(start_after=1)) as sim:
        await sim.sync_pod(pod("a"), NO_INPUTS)
        await clock.tick(1)
        await sim.kill_pod("a")
        s = sim.pod_status("a")
        assert s is not None
        assert s["phase"] == "Succeeded"
        assert s["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
        await clock.tick(100)  # nothing scheduled before the kill happens any more
        assert sim.pod_status("a")["phase"] == "Succeeded"  # type: ignore[index]
        await sim.remove_pod("a")
        assert sim.pod_status("a") is None
        assert sim.pods() == []
        with pytest.raises(rt.NotSupported):
            await sim.exec("a", "c", ["true"])
        with pytest.raises(rt.PodNotFound):
            await sim.kill_pod("a")


@pytest.mark.slow
async def test_a_hundred_thousand_pods(clock: FakeAsyncClock) -> None:
    n = 100_000
    pods = [pod(f"u{i}") for i in range(n)]
    tracemalloc.start()
    try:
        async with SimulatedRuntime(clock=clock) as sim:
            before, _ = tracemalloc.get_traced_memory()
            for p in pods:
                await sim.sync_pod(p, NO_INPUTS)
            await clock.tick(0)
            sim.pending_changes()
            sim.pending_events()
            used, _ = tracemalloc.get_traced_memory()
            assert all(sim.pod_status(f"u{i}")["phase"] == "Running"  # type: ignore[index]
                       for i in range(0, n, 997))
            assert len(sim.pods()) == n
            per_pod = (used - before) / n
            assert per_pod < 1500, per_pod  # the runtime's own bytes; the pods are the caller's
    finally:
        tracemalloc.stop()


def test_address_pools_reuse_the_lowest_free_address() -> None:
    pool = net._Pool("10.0.0.0/29", reserved=2)
    got = [pool.allocate(f"p{i}") for i in range(5)]
    assert got == ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
    with pytest.raises(net.NetworkError):
        pool.allocate("full")
    pool.release("p1")
    pool.release("p0")
    assert pool.allocate("again") == "10.0.0.2"
    assert pool.allocate("p0") == "10.0.0.3"
    assert pool.allocate("again") == "10.0.0.2"  # idempotent per uid
    fresh = net._Pool("10.0.0.0/29", reserved=2)
    fresh.claim("old", "10.0.0.2")
    assert fresh.allocate("new") == "10.0.0.3"
