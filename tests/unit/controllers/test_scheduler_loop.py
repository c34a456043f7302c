"""The scheduling loop against caches fed by hand and an API that records: the assume
cache under a slow watch, retries on cluster changes, bind failures (no server)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers.scheduler import SchedulerConfig, SchedulingLoop
from setpoint.runtime import watcher

from .test_scheduling import node, pod

Obj = dict[str, Any]


class FakeApi:
    def __init__(self) -> None:
        self.bindings: list[tuple[str, str]] = []
        self.unschedulable_messages: dict[str, str] = {}
        self.scheduled_events: list[str] = []
        self.fail_next: list[Exception] = []
        self.changed = asyncio.Condition()

    async def _note(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def bind(self, p: Obj, node_name: str) -> None:
        await asyncio.sleep(0)  # in flight: other workers run meanwhile
        if self.fail_next:
            raise self.fail_next.pop(0)
        self.bindings.append((p["metadata"]["name"], node_name))
        await self._note()

    async def scheduled(self, p: Obj, node_name: str) -> None:
        self.scheduled_events.append(p["metadata"]["name"])

    async def unschedulable(self, p: Obj, message: str) -> None:
        self.unschedulable_messages[p["metadata"]["name"]] = message
        await self._note()

    async def until(self, check: Any) -> None:
        async with asyncio.timeout(10):
            async with self.changed:
                await self.changed.wait_for(check)


def synced_cache(*objs: Obj) -> runtime.Cache:
    cache = runtime.Cache()
    cache.apply(watcher.Init())
    for obj in objs:
        cache.apply(watcher.InitApply(obj))
    cache.apply(watcher.InitDone())
    return cache


@contextlib.asynccontextmanager
async def running(pods: runtime.Cache, nodes: runtime.Cache, api: FakeApi,
                  **config: Any) -> AsyncIterator[SchedulingLoop]:
    options = {"workers": 4, "initial_backoff": 0.01, "max_backoff": 0.05, **config}
    loop = SchedulingLoop(pods, nodes, api, config=SchedulerConfig(**options))
    task = asyncio.create_task(loop.run())
    try:
        yield loop
    finally:
        loop.shut_down()
        await asyncio.wait_for(task, 10)


async def test_no_double_binding_while_the_watch_lags() -> None:
    nodes = synced_cache(node("n1", cpu="1"))
    pods = synced_cache(pod("a", cpu="800m"), pod("b", cpu="800m"))
    api = FakeApi()
    async with running(pods, nodes, api) as loop:
        await api.until(lambda: len(api.bindings) + len(api.unschedulable_messages) == 2)
        assert len(api.bindings) == 1
        [(bound, _)] = api.bindings
        other = "b" if bound == "a" else "a"
        assert api.unschedulable_messages == {
            other: "0/1 nodes are available: 1 Insufficient cpu."}
        assert loop.cache.is_assumed(f"default/{bound}")
        # the watch catches up: the bound pod replaces its assumption
        pods.apply(watcher.Apply(pod(bound, cpu="800m", node_name="n1")))
        assert not loop.cache.is_assumed(f"default/{bound}")
        # its deletion makes room: the other pod is tried again and bound, without polling
        pods.apply(watcher.Delete(pod(bound, cpu="800m", node_name="n1")))
        await api.until(lambda: len(api.bindings) == 2)
        assert api.bindings[1] == (other, "n1")


async def test_unschedulable_pod_waits_for_a_node_then_binds() -> None:
    nodes = synced_cache()
    pods = synced_cache(pod("p", nodeSelector={"disk": "ssd"}))
    api = FakeApi()
    async with running(pods, nodes, api) as loop:
        await api.until(lambda: "p" in api.unschedulable_messages)
        assert api.unschedulable_messages["p"] == "no nodes available to schedule pods"
        nodes.apply(watcher.Apply(node("plain")))
        await api.until(lambda: api.unschedulable_messages["p"].startswith("0/1"))
        assert api.unschedulable_messages["p"] == (
            "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.")
        # its own status write (a pod update without a spec change) does not retry it
        p = pods.get("default/p")
        assert p is not None
        pods.apply(watcher.Apply({**p, "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False"}]}}))
        assert "default/p" in loop.unschedulable
        assert len(loop.queue) == 0
        # a node that matches arrives
        nodes.apply(watcher.Apply(node("fast", labels={"disk": "ssd"})))
        await api.until(lambda: api.bindings == [("p", "fast")])
        assert api.scheduled_events == ["p"]


async def test_cordon_and_uncordon() -> None:
    nodes = synced_cache(node("n1", unschedulable=True))
    pods = synced_cache(pod("p"))
    api = FakeApi()
    async with running(pods, nodes, api):
        await api.until(lambda: "p" in api.unschedulable_messages)
        assert api.unschedulable_messages["p"] == \
            "0/1 nodes are available: 1 node(s) were unschedulable."
        nodes.apply(watcher.Apply(node("n1")))
        await api.until(lambda: api.bindings == [("p", "n1")])


@pytest.mark.parametrize("failure", [errors.Conflict("already bound"),
                                     errors.ServiceUnavailable("try again")])
async def test_failed_binding_releases_the_room(failure: Exception) -> None:
    nodes = synced_cache(node("n1", cpu="1"))
    pods = synced_cache(pod("a", cpu="800m"))
    api = FakeApi()
    api.fail_next.append(failure)
    async with running(pods, nodes, api, workers=1) as loop:
        if isinstance(failure, errors.Conflict):
            # a 409: someone else bound it; the watch will say where. Nothing is retried.
            pods.apply(watcher.Apply(pod("b", cpu="800m")))
            await api.until(lambda: api.bindings == [("b", "n1")])
            assert not loop.cache.is_assumed("default/a")
        else:
            # any other failure is retried with backoff
            await api.until(lambda: api.bindings == [("a", "n1")])


async def test_pods_of_other_schedulers_and_bound_pods_are_left_alone() -> None:
    nodes = synced_cache(node("n1"))
    pods = synced_cache(pod("mine"), pod("theirs", schedulerName="other"),
                        pod("bound", node_name="n1"),
                        {**pod("going"), "metadata": {"name": "going", "namespace": "default",
                                                      "deletionTimestamp": "2025-01-01T00:00:00Z"}})
    api = FakeApi()
    async with running(pods, nodes, api) as loop:
        await api.until(lambda: api.bindings == [("mine", "n1")])
        for key in ("default/theirs", "default/bound", "default/going"):
            assert await loop.schedule_one(key) is None
        assert api.bindings == [("mine", "n1")]
