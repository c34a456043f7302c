"""The StatefulSet controller against a real, secured server with the scheduler and a node
agent running simulated pods.

Order is proven from the server's own sequence, never from timing: a watch on the pods
records every event with its resourceVersion, and each step must come after the event that
allows it (``web-1`` is ADDED after the event that shows ``web-0`` Running and Ready, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig, ServeAgentConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
POD = ("v1", "Pod")
STS = ("apps/v1", "StatefulSet")

pytestmark = pytest.mark.slow


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 90) -> Any:
    return await waiting.eventually(check, timeout=timeout)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"statefulset", "scheduler", "serviceaccount",
                               "garbagecollector"}),
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime="simulate"),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        async def ready() -> bool:
            try:
                await c.get(("v1", "ServiceAccount"), "default", namespace="default")
                await c.get(("v1", "Node"), "node-a")
            except errors.NotFound:
                return False
            return True
        await eventually(ready)
        yield c


def statefulset(name: str, replicas: int = 3, image: str = "v1", **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": name,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": {
                         "simulate.setpoint.dev/start-after": "0",
                         "simulate.setpoint.dev/ready-after": "0"}},
                         "spec": {"terminationGracePeriodSeconds": 1,
                                  "containers": [{"name": "c", "image": image}]}},
                     **spec}}


def running_and_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ())


@dataclass
class PodLog:
    """Every pod event of one StatefulSet, in the server's order."""

    events: list[tuple[str, int, Obj]] = field(default_factory=list)  # (type, rv, pod)

    async def follow(self, client: Client, app: str, ready: asyncio.Event) -> None:
        listed = await client.list(POD, namespace="default", label_selector=f"app={app}")
        async with client.watch(POD, namespace="default", label_selector=f"app={app}",
                                resource_version=listed["metadata"]["resourceVersion"]
                                ) as events:
            ready.set()
            async for event in events:
                if event.type in ("ADDED", "MODIFIED", "DELETED"):
                    self.events.append((event.type, int(
                        event.object["metadata"]["resourceVersion"]), event.object))

    def first(self, name: str, match: Callable[[str, Obj], bool]) -> int:
        """The resourceVersion of the first event of pod ``name`` that ``match``es."""
        for kind, rv, pod in self.events:
            if pod["metadata"]["name"] == name and match(kind, pod):
                return rv
        raise AssertionError(f"no such event for {name}")


def added(kind: str, pod: Obj) -> bool:
    return kind == "ADDED"


def ready(kind: str, pod: Obj) -> bool:
    return kind != "DELETED" and running_and_ready(pod)


def deleting(kind: str, pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp")) or kind == "DELETED"


def gone(kind: str, pod: Obj) -> bool:
    return kind == "DELETED"


async def status_is(client: Client, name: str, **expected: Any) -> Obj:
    async def check() -> Obj | None:
        got = await client.get(STS, name, namespace="default")
        status = got.get("status", {})
        return got if all(status.get(k, 0) == v for k, v in expected.items()) else None
    result: Obj = await eventually(check)
    return result


async def live_pods(client: Client, app: str) -> dict[str, Obj]:
    page = await client.list(POD, namespace="default", label_selector=f"app={app}")
    return {p["metadata"]["name"]: p for p in page["items"]
            if not p["metadata"].get("deletionTimestamp")}


@contextlib.asynccontextmanager
async def pod_log(client: Client, app: str) -> AsyncIterator[PodLog]:
    log = PodLog()
    started = asyncio.Event()
    task = asyncio.create_task(log.follow(client, app, started))
    try:
        await asyncio.wait_for(started.wait(), 30)
        yield log
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_ordered_start_rolling_update_and_ordered_scale_down(client: Client) -> None:
    async with pod_log(client, "web") as log:
        await client.create(statefulset("web"))
        first = await status_is(client, "web", replicas=3, readyReplicas=3,
                                availableReplicas=3, updatedReplicas=3, currentReplicas=3,
                                observedGeneration=1)
        revision = first["status"]["updateRevision"]
        assert first["status"]["currentRevision"] == revision

        # stable names and identities
        pods = await live_pods(client, "web")
        assert sorted(pods) == ["web-0", "web-1", "web-2"]
        for ordinal in range(3):
            pod = pods[f"web-{ordinal}"]
            labels = pod["metadata"]["labels"]
            assert labels["statefulset.kubernetes.io/pod-name"] == f"web-{ordinal}"
            assert labels["apps.kubernetes.io/pod-index"] == str(ordinal)
            assert labels["controller-revision-hash"] == revision
            assert pod["spec"]["hostname"] == f"web-{ordinal}"
            assert pod["spec"]["subdomain"] == "web"
        # OrderedReady: each pod is created only after the previous one is Running and Ready
        assert log.first("web-0", ready) < log.first("web-1", added)
        assert log.first("web-1", ready) < log.first("web-2", added)

        # a rolling update goes from the highest ordinal down, each after the previous is
        # back and Ready
        await client.patch(STS, "web", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "v2"}]}}}}, namespace="default")
        updated = await status_is(client, "web", observedGeneration=2, updatedReplicas=3,
                                  readyReplicas=3, currentReplicas=3)
        new_revision = updated["status"]["updateRevision"]
        assert new_revision != revision
        assert updated["status"]["currentRevision"] == new_revision
        pods = await live_pods(client, "web")
        assert {p["spec"]["containers"][0]["image"] for p in pods.values()} == {"v2"}
        assert log.first("web-2", deleting) < log.first("web-1", deleting) < \
            log.first("web-0", deleting)

        def back_ready(name: str) -> int:
            return log.first(name, lambda k, p: ready(k, p) and p["metadata"]["labels"][
                "controller-revision-hash"] == new_revision)
        assert back_ready("web-2") < log.first("web-1", deleting)
        assert back_ready("web-1") < log.first("web-0", deleting)

        # scale down: web-2 goes first, and web-1 only once web-2 is gone
        marker = log.events[-1][1]
        await client.patch(STS, "web", {"spec": {"replicas": 1}}, namespace="default")
        await status_is(client, "web", replicas=1, readyReplicas=1)

        async def only_web_0() -> bool:
            return sorted(await live_pods(client, "web")) == ["web-0"]
        await eventually(only_web_0)

        def after_marker(match: Callable[[str, Obj], bool]) -> Callable[[str, Obj], bool]:
            return lambda k, p: int(p["metadata"]["resourceVersion"]) > marker and match(k, p)
        assert log.first("web-2", after_marker(gone)) < log.first("web-1",
                                                                   after_marker(deleting))


async def test_parallel_policy_does_not_wait(client: Client) -> None:
    async with pod_log(client, "par") as log:
        sts = statefulset("par", podManagementPolicy="Parallel")
        # pods that never become Ready: OrderedReady would stop at par-0
        sts["spec"]["template"]["metadata"]["annotations"][
            "simulate.setpoint.dev/ready-after"] = "3600"
        await client.create(sts)

        async def three() -> bool:
            return sorted(await live_pods(client, "par")) == ["par-0", "par-1", "par-2"]
        await eventually(three)
        assert not any(ready(k, p) for k, _, p in log.events)
        got = await status_is(client, "par", replicas=3)
        assert got["status"].get("readyReplicas", 0) == 0


async def test_a_deleted_pod_comes_back_under_its_name(client: Client) -> None:
    await client.create(statefulset("db", replicas=2))
    await status_is(client, "db", readyReplicas=2)
    before = (await live_pods(client, "db"))["db-1"]
    await client.delete(POD, "db-1", namespace="default")

    async def replaced() -> Obj | None:
        pod = (await live_pods(client, "db")).get("db-1")
        if pod is None or pod["metadata"]["uid"] == before["metadata"]["uid"]:
            return None
        return pod if running_and_ready(pod) else None
    after = await eventually(replaced)
    assert after["spec"]["hostname"] == "db-1"


async def test_orphaned_pods_are_adopted_again(client: Client) -> None:
    await client.create(statefulset("keep", replicas=2))
    await status_is(client, "keep", readyReplicas=2)
    before = await live_pods(client, "keep")
    await client.delete(STS, "keep", namespace="default", propagation_policy="Orphan")

    async def orphaned() -> bool:
        pods = await live_pods(client, "keep")
        return len(pods) == 2 and all(not p["metadata"].get("ownerReferences")
                                      for p in pods.values())
    await eventually(orphaned)

    async def deleted() -> bool:  # the orphan finalizer goes once the pods are released
        try:
            await client.get(STS, "keep", namespace="default")
        except errors.NotFound:
            return True
        return False
    await eventually(deleted)
    created = await client.create(statefulset("keep", replicas=2))
    await status_is(client, "keep", readyReplicas=2, replicas=2)

    async def adopted() -> dict[str, Obj] | None:
        pods = await live_pods(client, "keep")
        ok = all([r["uid"] for r in p["metadata"].get("ownerReferences") or []] == [
            created["metadata"]["uid"]] for p in pods.values())
        return pods if ok else None
    after = await eventually(adopted)
    # the same pods, not new ones
    assert {p["metadata"]["uid"] for p in after.values()} == {
        p["metadata"]["uid"] for p in before.values()}
