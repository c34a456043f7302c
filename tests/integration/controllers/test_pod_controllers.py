"""The scheduler, node lifecycle and taint eviction against a real, secured server: nodes
and pods created through the API (no agent: tests write node status and Leases
themselves), each controller acting as its own user under RBAC."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors, timeutil
from setpoint.client import Client, load_kubeconfig
from setpoint.controllers import NodeLifecycleConfig, SchedulerConfig, Settings
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import eventually

Obj = dict[str, Any]
POD = ("v1", "Pod")
NODE = ("v1", "Node")
LEASE = ("coordination.k8s.io/v1", "Lease")
EVENT = ("v1", "Event")
GRACE = 1.0

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"scheduler", "nodelifecycle", "taint-eviction-controller",
                               "serviceaccount"}),
        controller_settings=Settings(
            scheduler=SchedulerConfig(initial_backoff=0.05, max_backoff=0.2),
            node_lifecycle=NodeLifecycleConfig(grace_period=GRACE)),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        await eventually(lambda: exists(c, ("v1", "ServiceAccount"), "default", "default"))
        yield c


async def exists(client: Client, resource: Any, name: str, namespace: str | None = None
                 ) -> bool:
    try:
        await client.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


def node(name: str, *, cpu: str = "2", memory: str = "4Gi", pods: str = "10",
         labels: dict[str, str] | None = None, ready: str = "True") -> Obj:
    condition: Obj = {"type": "Ready", "status": ready, "reason": "KubeletReady",
                      "message": "ready", "lastHeartbeatTime": timeutil.format_time(
                          datetime.now(UTC))}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  **(labels or {})}},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [condition]}}


def pod(name: str, *, cpu: str = "100m", **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "python3", "resources": {
                "requests": {"cpu": cpu, "memory": "64Mi"}}}], **spec}}


async def bound_node(client: Client, name: str) -> str:
    async def check() -> str:
        got = await client.get(POD, name, namespace="default")
        return str(got["spec"].get("nodeName") or "")
    return str(await eventually(check))


async def events_for(client: Client, name: str, reason: str) -> list[Obj]:
    page = await client.list(EVENT, namespace="default")
    return [e for e in page["items"] if e["involvedObject"]["name"] == name
            and e["reason"] == reason]


async def test_pods_are_bound_to_nodes_that_fit(client: Client) -> None:
    await client.create(node("small", cpu="1"))
    await client.create(node("big", cpu="4"))
    await client.create(node("gpu", cpu="8", labels={"accelerator": "yes"}))
    await client.create(pod("anywhere", cpu="500m"))
    # least allocated: the node with the most room left
    assert await bound_node(client, "anywhere") == "gpu"
    await client.create(pod("selected", nodeSelector={"kubernetes.io/hostname": "small"}))
    assert await bound_node(client, "selected") == "small"
    await client.create(pod("affine", affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "accelerator", "operator": "DoesNotExist"}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn",
                              "values": ["small"]}]}]}}}))
    assert await bound_node(client, "affine") == "big"
    scheduled = await client.get(POD, "affine", namespace="default")
    assert {"type": "PodScheduled", "status": "True"}.items() <= next(
        c for c in scheduled["status"]["conditions"] if c["type"] == "PodScheduled").items()
    [event] = await eventually(lambda: events_for(client, "affine", "Scheduled"))
    assert event["message"] == "Successfully assigned default/affine to big"
    assert event["source"]["component"] == "default-scheduler"


async def test_unschedulable_pod_gets_the_condition_and_event_then_a_node(
        client: Client) -> None:
    await client.create(node("a", cpu="1"))
    await client.create(node("b", cpu="1", labels={"zone": "z"}))
    await client.create(node("c", cpu="1", labels={"zone": "z"}))
    await client.create(pod("huge", cpu="3", nodeSelector={"zone": "z"}))
    # nodes b and c are too small, a does not match
    message = ("0/3 nodes are available: 1 node(s) didn't match Pod's node "
               "affinity/selector, 2 Insufficient cpu.")

    async def condition() -> Obj | None:
        got = await client.get(POD, "huge", namespace="default")
        return next((c for c in got["status"].get("conditions", [])
                     if c["type"] == "PodScheduled"), None)
    cond = await eventually(condition)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", message)
    [event] = await eventually(lambda: events_for(client, "huge", "FailedScheduling"))
    assert (event["type"], event["message"]) == ("Warning", message)
    # a node that fits arrives: the pod is bound, without waiting for a periodic retry
    await client.create(node("d", cpu="4", labels={"zone": "z"}))
    assert await bound_node(client, "huge") == "d"


async def test_cordon_keeps_new_pods_away(client: Client) -> None:
    await client.create(node("only"))
    await client.patch(NODE, "only", {"spec": {"unschedulable": True}})
    await client.create(pod("waiting"))
    await eventually(lambda: events_for(client, "waiting", "FailedScheduling"))
    [event] = await events_for(client, "waiting", "FailedScheduling")
    assert event["message"] == "0/1 nodes are available: 1 node(s) were unschedulable."
    await client.patch(NODE, "only", {"spec": {"unschedulable": False}})
    assert await bound_node(client, "waiting") == "only"


async def test_many_pods_never_overcommit_a_node(client: Client) -> None:
    await client.create(node("n1", cpu="1", pods="100"))
    await client.create(node("n2", cpu="1", pods="100"))
    for i in range(12):
        await client.create(pod(f"p{i}", cpu="300m"))

    async def settled() -> list[Obj] | None:
        items = (await client.list(POD, namespace="default"))["items"]
        done = [p for p in items if p["spec"].get("nodeName") or any(
            c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
            for c in p["status"].get("conditions", []))]
        return items if len(done) == 12 else None
    items = await eventually(settled)
    per_node: dict[str, int] = {}
    for p in items:
        if p["spec"].get("nodeName"):
            per_node[p["spec"]["nodeName"]] = per_node.get(p["spec"]["nodeName"], 0) + 1
    # 3 x 300m fit in 1 cpu, 4 do not: exactly three per node
    assert per_node == {"n1": 3, "n2": 3}


@contextlib.asynccontextmanager
async def heartbeats(client: Client, name: str) -> AsyncIterator[asyncio.Event]:
    """Renew the node's Lease every 0.2 s until the returned event is set."""
    stop = asyncio.Event()

    async def renew() -> None:
        while not stop.is_set():
            now = timeutil.format_micro_time(datetime.now(UTC))
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": "kube-node-lease"},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                             "renewTime": now}}
            try:
                current = await client.get(LEASE, name, namespace="kube-node-lease")
                await client.update({**current, "spec": body["spec"]})
            except errors.NotFound:
                await client.create(body)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    task = asyncio.create_task(renew())
    try:
        yield stop
    finally:
        stop.set()
        await task


async def ready_of(client: Client, name: str) -> Obj:
    got = await client.get(NODE, name)
    return next(c for c in got["status"]["conditions"] if c["type"] == "Ready")


async def taint_keys(client: Client, name: str) -> set[str]:
    got = await client.get(NODE, name)
    return {f"{t['key']}:{t['effect']}" for t in got["spec"].get("taints", [])}


UNREACHABLE = {"node.kubernetes.io/unreachable:NoSchedule",
               "node.kubernetes.io/unreachable:NoExecute"}


async def test_silent_node_is_tainted_and_its_pods_evicted(client: Client) -> None:
    async with heartbeats(client, "n1") as stop:
        await client.create(node("n1"))
        await client.create(pod("quick", tolerations=[
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 1}]))
        await client.create(pod("patient", tolerations=[
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute"}]))
        assert await bound_node(client, "quick") == "n1"
        assert await bound_node(client, "patient") == "n1"
        # what the node's agent would report: the pod runs and is ready
        await client.patch_status(POD, "patient", {"status": {
            "phase": "Running", "podIP": "10.0.0.9",
            "conditions": [{"type": "Ready", "status": "True"}]}}, namespace="default")
        # healthy for several grace periods while the Lease is renewed
        await asyncio.sleep(3 * GRACE)
        assert (await ready_of(client, "n1"))["status"] == "True"
        stop.set()
    # the node falls silent
    ready = await eventually(lambda: _unknown(client, "n1"))
    assert (ready["reason"], ready["message"]) == (
        "NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert await eventually(lambda: _has(client, "n1", UNREACHABLE)) >= UNREACHABLE
    # the pod that tolerates it for 1 s is evicted (marked for graceful deletion: no agent
    # finishes it), the one that tolerates it forever stays
    async def marked() -> bool:
        got = await client.get(POD, "quick", namespace="default")
        return bool(got["metadata"].get("deletionTimestamp"))
    await eventually(marked)
    [event] = await eventually(lambda: events_for(client, "quick", "TaintManagerEviction"))
    assert event["message"] == "Marking for deletion Pod default/quick"
    patient = await client.get(POD, "patient", namespace="default")
    assert not patient["metadata"].get("deletionTimestamp")
    # its pods were marked not ready
    assert await eventually(lambda: events_for(client, "patient", "NodeNotReady"))
    patient = await client.get(POD, "patient", namespace="default")
    assert [c["status"] for c in patient["status"]["conditions"] if c["type"] == "Ready"] == [
        "False"]
    assert await eventually(lambda: events_for(client, "n1", "NodeNotReady"))
    # no new pod goes to it
    await client.create(pod("later"))
    await eventually(lambda: events_for(client, "later", "FailedScheduling"))
    # the node comes back: its agent posts Ready (with a new heartbeat) and renews its Lease
    current = await client.get(NODE, "n1")
    conditions = [dict(c, status="True", reason="KubeletReady",
                       lastHeartbeatTime=timeutil.format_time(datetime.now(UTC)))
                  if c["type"] == "Ready" else c for c in current["status"]["conditions"]]
    async with heartbeats(client, "n1"):
        await client.patch_status(NODE, "n1", {"status": {"conditions": conditions}})
        await eventually(lambda: _has_none(client, "n1", UNREACHABLE))
        assert await bound_node(client, "later") == "n1"


async def _unknown(client: Client, name: str) -> Obj | None:
    ready = await ready_of(client, name)
    return ready if ready["status"] == "Unknown" else None


async def _has(client: Client, name: str, keys: set[str]) -> set[str] | None:
    have = await taint_keys(client, name)
    return have if keys <= have else None


async def _has_none(client: Client, name: str, keys: set[str]) -> bool:
    return not (keys & await taint_keys(client, name))
