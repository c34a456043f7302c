"""The DaemonSet controller against a real, secured server with the scheduler and a node
agent running simulated pods; more nodes join as Node objects written through the API."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
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
NODE = ("v1", "Node")
DS = ("apps/v1", "DaemonSet")

pytestmark = pytest.mark.slow


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 60) -> Any:
    """The suite's wait, with the patience pods on a loaded machine need."""
    return await waiting.eventually(check, timeout=timeout)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"daemonset", "scheduler", "serviceaccount",
                               "garbagecollector"}),
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime="simulate"),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        async def ready() -> bool:
            try:
                await c.get(("v1", "ServiceAccount"), "default", namespace="default")
                await c.get(NODE, "node-a")
            except errors.NotFound:
                return False
            return True
        await eventually(ready)
        yield c


def node(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": spec,
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def daemonset(name: str, image: str = "v1") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": {
                         "simulate.setpoint.dev/start-after": "0",
                         "simulate.setpoint.dev/ready-after": "0"}},
                         "spec": {"terminationGracePeriodSeconds": 1,
                                  "containers": [{"name": "c", "image": image}]}}}}


async def placement(client: Client, name: str) -> dict[str, Obj]:
    """Live pods of the DaemonSet by the node they are for."""
    page = await client.list(POD, namespace="default", label_selector=f"app={name}")
    out: dict[str, Obj] = {}
    for pod in page["items"]:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        out[terms[0]["matchFields"][0]["values"][0]] = pod
    return out


async def status_is(client: Client, name: str, **expected: int) -> Obj:
    async def check() -> Obj | None:
        got = await client.get(DS, name, namespace="default")
        status = got.get("status", {})
        return got if all(status.get(k, 0) == v for k, v in expected.items()) else None
    result: Obj = await eventually(check)
    return result


async def test_one_pod_per_node_following_nodes(client: Client) -> None:
    await client.create(daemonset("agent"))
    await status_is(client, "agent", desiredNumberScheduled=1, currentNumberScheduled=1,
                     numberReady=1, numberAvailable=1, updatedNumberScheduled=1)
    pods = await placement(client, "agent")
    assert list(pods) == ["node-a"]
    assert pods["node-a"]["spec"]["nodeName"] == "node-a"
    assert pods["node-a"]["status"]["phase"] == "Running"
    keys = {(t["key"], t["effect"]) for t in pods["node-a"]["spec"]["tolerations"]}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/not-ready", "NoExecute") in keys

    # a node joins: it gets a pod; a tainted node does not; a cordoned one does
    await client.create(node("node-b"))
    await client.create(node("node-c", taints=[{"key": "dedicated", "value": "db",
                                                "effect": "NoSchedule"}]))
    await client.create(node("node-d", unschedulable=True))
    await status_is(client, "agent", desiredNumberScheduled=3, currentNumberScheduled=3)
    assert sorted(await placement(client, "agent")) == ["node-a", "node-b", "node-d"]

    # the taint goes: node-c gets one too; node-b leaves: its pod goes
    await client.patch(NODE, "node-c", {"spec": {"taints": None}})
    await client.delete(NODE, "node-b")
    await status_is(client, "agent", desiredNumberScheduled=3, currentNumberScheduled=3,
                    numberMisscheduled=0)

    async def moved() -> dict[str, Obj] | None:
        found = await placement(client, "agent")
        return found if sorted(found) == ["node-a", "node-c", "node-d"] else None
    await eventually(moved)


async def test_rolling_update_replaces_pods(client: Client) -> None:
    await client.create(daemonset("roll"))
    await status_is(client, "roll", numberAvailable=1, updatedNumberScheduled=1)
    before = (await placement(client, "roll"))["node-a"]
    await client.patch(DS, "roll", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "v2"}]}}}}, namespace="default")

    async def replaced() -> Obj | None:
        pod = (await placement(client, "roll")).get("node-a")
        if pod is None or pod["metadata"]["uid"] == before["metadata"]["uid"]:
            return None
        return pod if pod.get("status", {}).get("phase") == "Running" else None
    after = await eventually(replaced)
    assert after["spec"]["containers"][0]["image"] == "v2"
    assert after["metadata"]["labels"]["controller-revision-hash"] != \
        before["metadata"]["labels"]["controller-revision-hash"]
    got = await status_is(client, "roll", updatedNumberScheduled=1, numberAvailable=1)
    assert got["status"]["observedGeneration"] == 2
