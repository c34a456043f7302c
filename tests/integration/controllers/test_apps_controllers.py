"""ReplicaSets and Deployments against a real, secured control plane with a node agent on the
simulated pod runtime (pods become Running and Ready without processes): pods are made,
replaced, adopted and released; Deployments roll, recreate, pause, roll back, clean up their
history, and report their conditions."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, PatchType, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig, ServeAgentConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
POD = ("v1", "Pod")
RS = ("apps/v1", "ReplicaSet")
DEPLOY = ("apps/v1", "Deployment")
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
                               "replicaset", "deployment"}),
        controllers_mode="inline",
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime="simulate"))
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        await eventually(lambda: exists(c, ("v1", "ServiceAccount"), "default", NS))
        yield c


async def exists(client: Client, resource: Any, name: str, namespace: str | None = None
                 ) -> bool:
    try:
        await client.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return False
    return True


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
    """The suite's wait, with the patience controllers on a loaded machine need."""
    return await waiting.eventually(check, timeout=timeout)


def workload(kind: str, name: str, replicas: int = 3, image: str = "app:1", **spec: Any
             ) -> Obj:
    body: Obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name},
                 "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                          "template": {"metadata": {"labels": {"app": name}},
                                       "spec": {"containers": [{"name": "c",
                                                                "image": image}]}}}}
    body["spec"].update(spec)
    return body


async def pods_of(client: Client, app: str) -> list[Obj]:
    listed = await client.list(POD, namespace=NS, label_selector=f"app={app}")
    return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]


def ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


async def rolled_out(client: Client, name: str) -> Obj | None:
    """The Deployment once ``kubectl rollout status`` would say it is done."""
    d = await client.get(DEPLOY, name, namespace=NS)
    status, spec = d.get("status", {}), d["spec"]
    if d["metadata"]["generation"] <= status.get("observedGeneration", 0) \
            and status.get("updatedReplicas", 0) == spec["replicas"] \
            and status.get("replicas", 0) == spec["replicas"] \
            and status.get("availableReplicas", 0) == spec["replicas"]:
        return d
    return None


async def sets_of(client: Client, app: str) -> list[Obj]:
    listed = await client.list(RS, namespace=NS, label_selector=f"app={app}")
    return sorted(listed["items"], key=lambda s: int(
        s["metadata"]["annotations"]["deployment.kubernetes.io/revision"]))


async def test_replica_set_keeps_its_pods(client: Client) -> None:
    rs = await client.create(workload("ReplicaSet", "web"), namespace=NS)

    async def three_ready() -> list[Obj] | None:
        found = await pods_of(client, "web")
        return found if len(found) == 3 and all(map(ready, found)) else None

    pods = await eventually(three_ready)
    for pod in pods:
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["uid"], ref["controller"]) == (
            "ReplicaSet", "web", rs["metadata"]["uid"], True)
        assert pod["metadata"]["generateName"] == "web-"

    async def status_ready() -> Obj | None:
        got = await client.get(RS, "web", namespace=NS)
        s = got["status"]
        return got if (s.get("readyReplicas"), s.get("availableReplicas"),
                       s.get("fullyLabeledReplicas"), s.get("observedGeneration")) == (
            3, 3, 3, 1) else None

    await eventually(status_ready)
    # a pod deleted by hand is replaced
    victim = pods[0]["metadata"]["name"]
    await client.delete(POD, victim, namespace=NS)
    await eventually(lambda: _replaced(client, victim))
    # scaled down through /scale: two go
    await client.patch(RS, "web", {"spec": {"replicas": 1}}, namespace=NS,
                       subresource="scale")

    async def one() -> bool:
        return len(await pods_of(client, "web")) == 1

    await eventually(one)
    # a pod relabelled out of the selector is released; an orphan that matches is adopted
    [kept] = await pods_of(client, "web")
    await client.patch(POD, kept["metadata"]["name"],
                       {"metadata": {"labels": {"app": "elsewhere"}}}, namespace=NS)

    async def released() -> bool:
        pod = await client.get(POD, kept["metadata"]["name"], namespace=NS)
        return not pod["metadata"].get("ownerReferences") and \
            len(await pods_of(client, "web")) == 1

    await eventually(released)
    await client.patch(RS, "web", {"spec": {"replicas": 2}}, namespace=NS)
    await client.patch(POD, kept["metadata"]["name"],
                       {"metadata": {"labels": {"app": "web"}}}, namespace=NS)

    async def adopted() -> bool:
        pod = await client.get(POD, kept["metadata"]["name"], namespace=NS)
        refs = pod["metadata"].get("ownerReferences") or []
        return [r["uid"] for r in refs] == [rs["metadata"]["uid"]] and \
            len(await pods_of(client, "web")) == 2

    await eventually(adopted)


async def _replaced(client: Client, victim: str) -> bool:
    found = await pods_of(client, "web")
    return len(found) == 3 and victim not in {p["metadata"]["name"] for p in found} \
        and all(map(ready, found))


async def test_deployment_rolls_and_rolls_back(client: Client) -> None:
    await client.create(workload("Deployment", "app", replicas=4,
                                 strategy={"rollingUpdate": {"maxSurge": 1,
                                                             "maxUnavailable": 1}}),
                        namespace=NS)
    first = await eventually(lambda: rolled_out(client, "app"))
    assert first["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    conditions = {c["type"]: c for c in first["status"]["conditions"]}
    assert (conditions["Available"]["status"], conditions["Available"]["reason"]) == (
        "True", "MinimumReplicasAvailable")
    assert conditions["Progressing"]["reason"] == "NewReplicaSetAvailable"
    [rs1] = await sets_of(client, "app")
    hash1 = rs1["metadata"]["labels"]["pod-template-hash"]
    assert rs1["metadata"]["name"] == f"app-{hash1}"
    assert rs1["spec"]["selector"]["matchLabels"] == {"app": "app", "pod-template-hash": hash1}
    # a new image rolls: watch every ReplicaSet while it does
    await client.patch(DEPLOY, "app", {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "app:2"}]}}}}, namespace=NS)
    most = 0

    async def watch_total() -> Obj | None:
        nonlocal most
        sets = (await client.list(RS, namespace=NS))["items"]
        most = max(most, sum(s["spec"]["replicas"] for s in sets))
        return await rolled_out(client, "app")

    second = await eventually(watch_total)
    assert most <= 5  # replicas + maxSurge
    assert second["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    rs1_now, rs2 = await sets_of(client, "app")
    assert rs1_now["spec"]["replicas"] == 0
    assert rs2["spec"]["replicas"] == 4
    assert {p["spec"]["containers"][0]["image"] for p in await pods_of(client, "app")} == {
        "app:2"}
    # rollback as kubectl rollout undo does it: the old template, hash label removed
    template = copy.deepcopy(rs1_now["spec"]["template"])
    del template["metadata"]["labels"]["pod-template-hash"]
    await client.patch(DEPLOY, "app", [{"op": "replace", "path": "/spec/template",
                                        "value": template}], namespace=NS,
                       patch_type=PatchType.JSON)

    async def back() -> Obj | None:
        d = await rolled_out(client, "app")
        if d is None:
            return None
        sets = await sets_of(client, "app")
        return d if sets[-1]["metadata"]["uid"] == rs1["metadata"]["uid"] else None

    third = await eventually(back)
    assert third["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert {p["spec"]["containers"][0]["image"] for p in await pods_of(client, "app")} == {
        "app:1"}


async def test_recreate_pause_and_history(client: Client) -> None:
    await client.create(workload("Deployment", "re", replicas=2, revisionHistoryLimit=1,
                                 strategy={"type": "Recreate"}), namespace=NS)
    await eventually(lambda: rolled_out(client, "re"))
    for image in ("app:2", "app:3"):
        await client.patch(DEPLOY, "re", {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": image}]}}}}, namespace=NS)
        await eventually(lambda: rolled_out(client, "re"))

    async def pruned() -> list[Obj] | None:
        sets = await sets_of(client, "re")
        return sets if len(sets) == 2 else None

    sets = await eventually(pruned)
    assert [s["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
            for s in sets] == ["2", "3"]
    # paused: a template change rolls nothing until resumed
    await client.patch(DEPLOY, "re", {"spec": {"paused": True}}, namespace=NS)

    async def paused() -> Obj | None:
        d = await client.get(DEPLOY, "re", namespace=NS)
        cond = {c["type"]: c for c in d["status"].get("conditions", [])}
        return d if cond.get("Progressing", {}).get("reason") == "DeploymentPaused" else None

    await eventually(paused)
    await client.patch(DEPLOY, "re", {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}}}}}, namespace=NS)
    d = await client.get(DEPLOY, "re", namespace=NS)

    async def observed() -> bool:
        got = await client.get(DEPLOY, "re", namespace=NS)
        return bool(got["status"].get("observedGeneration") == d["metadata"]["generation"])

    await eventually(observed)
    assert len(await sets_of(client, "re")) == 2
    await client.patch(DEPLOY, "re", {"spec": {"paused": False}}, namespace=NS)
    await eventually(lambda: rolled_out(client, "re"))
    pods = await pods_of(client, "re")
    assert len(pods) == 2
    assert all(p["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] for p in pods)


async def test_progress_deadline_exceeded(client: Client) -> None:
    # an image the node never makes ready cannot exist in the simulated runtime; a
    # readiness that never comes is modelled by a node selector no node has
    body = workload("Deployment", "stuck", replicas=1, progressDeadlineSeconds=1)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"no": "such-node"}
    await client.create(body, namespace=NS)

    async def exceeded() -> Obj | None:
        d = await client.get(DEPLOY, "stuck", namespace=NS)
        cond = {c["type"]: c for c in d["status"].get("conditions", [])}
        got = cond.get("Progressing", {})
        return got if got.get("reason") == "ProgressDeadlineExceeded" else None

    condition = await eventually(exceeded)
    assert condition["status"] == "False"
    assert condition["message"].endswith("has timed out progressing.")
