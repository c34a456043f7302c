"""The disruption controller against a real, secured control plane with a node agent on the
simulated pod runtime: budgets over Deployments, scaled and integer budgets, unmanaged pods,
owners without a scale, and evictions spending and regaining the budget as the ReplicaSet
replaces pods."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors, timeutil
from setpoint.client import Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig, ServeAgentConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import eventually

Obj = dict[str, Any]
POD = ("v1", "Pod")
PDB = ("policy/v1", "PodDisruptionBudget")
DEPLOY = ("apps/v1", "Deployment")
CM = ("v1", "ConfigMap")
NS = "default"

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"scheduler", "serviceaccount", "garbagecollector",
                               "replicaset", "deployment", "disruption"}),
        controllers_mode="inline",
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime="simulate"))
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        async def account() -> bool:
            try:
                await c.get(("v1", "ServiceAccount"), "default", namespace=NS)
            except errors.NotFound:
                return False
            return True
        await eventually(account, timeout=30)
        yield c


def deployment(name: str, replicas: int) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1"}]}}}}


def budget(name: str, app: str | None, **spec: Any) -> Obj:
    selector = {"matchLabels": {"app": app}} if app is not None else {}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name}, "spec": {"selector": selector, **spec}}


def status_is(**wanted: Any) -> Any:
    def check(pdb: Obj) -> bool:
        status = pdb.get("status") or {}
        return pdb["metadata"]["generation"] == status.get("observedGeneration") and all(
            status.get(k) == v for k, v in wanted.items())
    return check


async def pdb_where(client: Client, name: str, check: Any, timeout: float = 30) -> Obj:
    async def found() -> Obj | None:
        pdb = await client.get(PDB, name, namespace=NS)
        return pdb if check(pdb) else None
    result: Obj = await eventually(found, timeout=timeout)
    return result


async def evict(client: Client, name: str) -> Obj:
    result: Obj = await client.request(
        "POST", f"/api/v1/namespaces/{NS}/pods/{name}/eviction",
        body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
    return result


async def running_pods(client: Client, app: str) -> list[Obj]:
    listed = await client.list(POD, namespace=NS, label_selector=f"app={app}")
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


async def test_evictions_spend_the_budget_and_replacements_restore_it(client: Client) -> None:
    await client.create(deployment("web", 3), namespace=NS)
    await client.create(budget("web", "web", minAvailable=2), namespace=NS)
    pdb = await pdb_where(client, "web", status_is(expectedPods=3, desiredHealthy=2,
                                                   currentHealthy=3, disruptionsAllowed=1))
    [condition] = pdb["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed", "True", "SufficientPods")
    assert condition["observedGeneration"] == 1

    victim, other = [p["metadata"]["name"] for p in await running_pods(client, "web")][:2]
    assert (await evict(client, victim))["status"] == "Success"
    with pytest.raises(errors.TooManyRequests) as refused:
        await evict(client, other)
    assert "would violate the pod's disruption budget" in str(refused.value)
    # the ReplicaSet replaces the evicted pod; once it is Ready the budget allows one again
    # and the granted eviction is forgotten (its pod is gone)
    pdb = await pdb_where(client, "web", lambda p: status_is(
        currentHealthy=3, disruptionsAllowed=1)(p) and not p["status"].get("disruptedPods"))
    assert pdb["status"]["conditions"][0]["status"] == "True"
    assert (await evict(client, other))["status"] == "Success"


async def test_percentages_follow_the_deployments_scale(client: Client) -> None:
    await client.create(deployment("api", 3), namespace=NS)
    await client.create(budget("api", "api", maxUnavailable="34%"), namespace=NS)
    # 34% of 3 is 1.02, rounded up to 2 unavailable: 1 healthy wanted
    await pdb_where(client, "api", status_is(expectedPods=3, desiredHealthy=1,
                                             currentHealthy=3, disruptionsAllowed=2))
    # a patch: the Deployment controller writes the object's status meanwhile
    await client.patch(DEPLOY, "api", {"spec": {"replicas": 5}}, namespace=NS)
    # 34% of 5 is 1.7, rounded up to 2: 3 healthy wanted
    await pdb_where(client, "api", status_is(expectedPods=5, desiredHealthy=3,
                                             currentHealthy=5, disruptionsAllowed=2))
    await client.patch(PDB, "api", {"spec": {"maxUnavailable": None, "minAvailable": "100%"}},
                       namespace=NS)
    pdb = await pdb_where(client, "api", status_is(expectedPods=5, desiredHealthy=5,
                                                   disruptionsAllowed=0))
    assert pdb["metadata"]["generation"] == 2
    assert pdb["status"]["conditions"][0]["reason"] == "InsufficientPods"


async def test_bare_pods_count_for_integer_budgets_and_not_for_scaled_ones(
        client: Client) -> None:
    for i in range(2):
        await client.create({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"bare-{i}", "labels": {"app": "bare"}},
                             "spec": {"containers": [{"name": "c", "image": "app:1"}]}},
                            namespace=NS)
    await client.create(budget("bare-int", "bare", minAvailable=1), namespace=NS)
    await client.create(budget("bare-max", "bare", maxUnavailable=1), namespace=NS)
    await pdb_where(client, "bare-int", status_is(expectedPods=2, desiredHealthy=1,
                                                  currentHealthy=2, disruptionsAllowed=1))
    # unmanaged pods are left out of the scale: nothing expected, nothing allowed
    await pdb_where(client, "bare-max", status_is(expectedPods=0, currentHealthy=2,
                                                  disruptionsAllowed=0))

    async def warned() -> bool:
        events = await client.list(("v1", "Event"), namespace=NS)
        return any(e.get("reason") == "UnmanagedPods" and
                   e["involvedObject"]["name"] == "bare-max" for e in events["items"])
    await eventually(warned, timeout=30)


async def test_an_owner_without_a_scale_makes_the_budget_safe(client: Client) -> None:
    owner = await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "owner"}}, namespace=NS)
    await client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "owned", "labels": {"app": "owned"}, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner["metadata"]["uid"], "controller": True}]},
        "spec": {"containers": [{"name": "c", "image": "app:1"}]}}, namespace=NS)
    await client.create(budget("owned", "owned", maxUnavailable="50%"), namespace=NS)

    def failed(pdb: Obj) -> bool:
        conditions = (pdb.get("status") or {}).get("conditions") or []
        return any(c["reason"] == "SyncFailed" for c in conditions)
    pdb = await pdb_where(client, "owned", failed)
    [condition] = pdb["status"]["conditions"]
    assert condition["status"] == "False"
    assert condition["message"] == 'found no controllers for pod "owned"'
    assert pdb["status"]["disruptionsAllowed"] == 0


async def test_a_stale_disruption_target_is_reset(client: Client) -> None:
    """An eviction marked the pod but its deletion never came: after the timeout the
    ``disruption-pods`` controller (as the disruption controller's identity) resets it."""
    created = await client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kept"},
        "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "app:1"}]}},
        namespace=NS)
    old = timeutil.format_time(datetime.now(UTC) - timedelta(minutes=10))
    created["status"] = {"phase": "Running", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
         "message": "Eviction API: evicting", "lastTransitionTime": old}]}
    await client.update_status(created)

    async def reset() -> Obj | None:
        pod = await client.get(POD, "kept", namespace=NS)
        conditions = pod.get("status", {}).get("conditions", [])
        found = [c for c in conditions if c["type"] == "DisruptionTarget"]
        return found[0] if found and found[0]["status"] == "False" else None
    condition = await eventually(reset, timeout=30)
    assert condition["lastTransitionTime"] > old
    assert "reason" not in condition
