"""The agent's pod loop against a real server, on the simulated runtime: a pod deleted without
a graceful deletion is taken out of the runtime, and a new pod of the same name replaces it
there (the loop's uid bookkeeping, by key and by uid); the ConfigMaps and Secrets pods use
are followed by a watch each, and a change reaches the pods' volumes at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.agent.inputs import ResolvedInputs
from setpoint.agent.simulated import SimulatedRuntime
from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.node.objects import ObjectRef, WatchedObjects, WatchedObjectsConfig
from setpoint.node.pods import PodLoop, PodLoopConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
POD = ("v1", "Pod")
NS = "default"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"serviceaccount"}), controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        await waiting.eventually(lambda: c.get(("v1", "ServiceAccount"), "default",
                                               namespace=NS),
                                 timeout=60, retry_on=(errors.NotFound,))
        yield c


def pod(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": {"simulate.setpoint.dev/start-after": "0",
                                         "simulate.setpoint.dev/ready-after": "0"}},
            "spec": {"nodeName": "node-a", "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "x"}]}}


async def test_force_deleted_and_replaced_pods(client: Client) -> None:
    async with SimulatedRuntime(node_name="node-a") as sim, asyncio.TaskGroup() as group:
        loop = PodLoop(client, sim, PodLoopConfig(node_name="node-a"))
        task = group.create_task(loop.run())

        first = await waiting.eventually(lambda: _created_running(client, sim, "web"),
                                         timeout=30)
        assert loop.uids == {first: f"{NS}/web"}

        # force-deleted and created again under the same name: the old one leaves the runtime
        await client.delete(POD, "web", namespace=NS, grace_period_seconds=0)
        await client.create(pod("web"))
        second = await waiting.eventually(lambda: _created_running(client, sim, "web"),
                                          timeout=30)
        assert second != first
        await waiting.eventually(lambda: sim.pods() == [second], timeout=30)
        await waiting.eventually(lambda: loop.uids == {second: f"{NS}/web"}, timeout=30)

        # another pod beside it, then both force-deleted: the runtime is emptied
        third = await waiting.eventually(lambda: _created_running(client, sim, "db"),
                                         timeout=30)
        assert loop.uids == {second: f"{NS}/web", third: f"{NS}/db"}
        await client.delete(POD, "web", namespace=NS, grace_period_seconds=0)
        await waiting.eventually(lambda: sim.pods() == [third], timeout=30)
        await client.delete(POD, "db", namespace=NS, grace_period_seconds=0)
        await waiting.eventually(lambda: sim.pods() == [], timeout=30)
        await waiting.eventually(lambda: loop.uids == {}, timeout=30)
        task.cancel()


async def _created_running(client: Client, sim: SimulatedRuntime, name: str) -> str:
    """The uid of pod ``name`` (created if missing) once the runtime runs it and the API
    says Running."""
    try:
        got = await client.get(POD, name, namespace=NS)
    except errors.NotFound:
        got = await client.create(pod(name))
    uid = str(got["metadata"]["uid"])
    return uid if uid in sim.pods() and got.get("status", {}).get("phase") == "Running" else ""


class Recording(SimulatedRuntime):
    """The simulated runtime, keeping the inputs of each pod's last sync."""

    def __init__(self) -> None:
        super().__init__(node_name="node-a")
        self.inputs: dict[str, ResolvedInputs] = {}

    async def sync_pod(self, pod: Any, inputs: ResolvedInputs) -> None:
        self.inputs[str(pod["metadata"]["uid"])] = inputs
        await super().sync_pod(pod, inputs)

    def volume(self, uid: str, volume: str) -> dict[str, bytes]:
        found = self.inputs.get(uid)
        return {} if found is None else {f.path: f.data for f in found.volumes.get(volume, ())}


def mounting(name: str, configmap: str, secret: str) -> Obj:
    body = pod(name)
    body["spec"]["volumes"] = [
        {"name": "settings", "configMap": {"name": configmap, "optional": True}},
        {"name": "password", "secret": {"secretName": secret, "optional": True}}]
    return body


@pytest.mark.parametrize("watched", [4096, 0], ids=["watched", "read-each-sync"])
async def test_changed_configmaps_and_secrets_reach_the_volumes(client: Client, watched: int
                                                               ) -> None:
    cm, secret = ("v1", "ConfigMap"), ("v1", "Secret")
    await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "settings", "namespace": NS},
                         "data": {"level": "1"}})
    # resync far away: only the watch can bring a change in time
    config = PodLoopConfig(node_name="node-a", resync=3600, watched_objects=watched)
    async with Recording() as sim, asyncio.TaskGroup() as group:
        loop = PodLoop(client, sim, config)
        task = group.create_task(loop.run())
        a = (await client.create(mounting("a", "settings", "password")))["metadata"]["uid"]
        b = (await client.create(mounting("b", "settings", "other")))["metadata"]["uid"]
        for uid in (a, b):
            await waiting.eventually(lambda uid=uid: sim.volume(uid, "settings") == {
                "level": b"1"}, timeout=30)
        refs = {ObjectRef("ConfigMap", NS, "settings"), ObjectRef("Secret", NS, "password"),
                ObjectRef("Secret", NS, "other")}
        assert loop.objects.watched == (refs if watched else frozenset())
        assert sim.volume(a, "password") == {}  # optional, and not there yet

        if not watched:
            task.cancel()
            return  # without watches, a change waits for the resync: nothing more to see
        await client.patch(cm, "settings", {"data": {"level": "2"}}, namespace=NS)
        await client.create({"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": "password", "namespace": NS},
                             "stringData": {"p": "s3cret"}})
        for uid in (a, b):
            await waiting.eventually(lambda uid=uid: sim.volume(uid, "settings") == {
                "level": b"2"}, timeout=30)
        await waiting.eventually(lambda: sim.volume(a, "password") == {"p": b"s3cret"},
                                 timeout=30)
        await client.delete(secret, "password", namespace=NS)
        await waiting.eventually(lambda: sim.volume(a, "password") == {}, timeout=30)

        # the watch of an object ends with the last pod using it
        await client.delete(POD, "b", namespace=NS, grace_period_seconds=0)
        await waiting.eventually(lambda: loop.objects.watched == refs - {
            ObjectRef("Secret", NS, "other")}, timeout=30)
        await client.delete(POD, "a", namespace=NS, grace_period_seconds=0)
        await waiting.eventually(lambda: loop.objects.watched == frozenset(), timeout=30)
        task.cancel()


class CountingConflicts:
    """The client, counting the status writes the server refused as conflicts."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self.writes = 0
        self.conflicts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def update_status(self, obj: Any, **kwargs: Any) -> Any:
        self.writes += 1
        try:
            return await self._client.update_status(obj, **kwargs)
        except errors.Conflict:
            self.conflicts += 1
            raise


async def test_status_writes_in_quick_succession_do_not_conflict(client: Client) -> None:
    """Running then Ready a moment later: the second write starts from the server's answer
    to the first, not from a cache that has not shown it yet (which the server refuses)."""
    counting = CountingConflicts(client)
    async with SimulatedRuntime(node_name="node-a") as sim, asyncio.TaskGroup() as group:
        loop = PodLoop(counting, sim, PodLoopConfig(node_name="node-a"))  # type: ignore[arg-type]
        task = group.create_task(loop.run())
        for i in range(20):
            body = pod(f"quick-{i}")
            body["metadata"]["annotations"].update({
                "simulate.setpoint.dev/start-after": "0.01",
                "simulate.setpoint.dev/ready-after": "0.02"})
            await client.create(body)

        await waiting.eventually(lambda: _all_ready(client, 20), timeout=30)
        assert counting.writes >= 20
        assert counting.conflicts == 0
        task.cancel()


async def test_terminations_do_not_conflict_with_status_writes(client: Client) -> None:
    """A graceful deletion writes the final status while the status writer may be writing
    the same pod: one write at a time per pod, each from the previous one's answer."""
    counting = CountingConflicts(client)
    async with SimulatedRuntime(node_name="node-a") as sim, asyncio.TaskGroup() as group:
        loop = PodLoop(counting, sim, PodLoopConfig(node_name="node-a"))  # type: ignore[arg-type]
        task = group.create_task(loop.run())
        for i in range(20):
            await client.create(pod(f"going-{i}"))
        await waiting.eventually(lambda: _all_ready(client, 20), timeout=30)
        await client.delete_collection(POD, namespace=NS, grace_period_seconds=1)

        async def gone() -> bool:
            return not (await client.list(POD, namespace=NS))["items"]

        await waiting.eventually(gone, timeout=60)
        assert counting.writes >= 20
        assert counting.conflicts == 0
        task.cancel()


async def _all_ready(client: Client, count: int) -> bool:
    items = (await client.list(POD, namespace=NS))["items"]
    return len(items) == count and all(
        any(c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])) for p in items)


async def test_a_watch_refused_once_starts_at_a_later_use(client: Client) -> None:
    """Objects asked for before the watches run, or beyond ``max_objects``, are read with a
    GET; a later sync of the same pod starts their watch once it can."""
    for name in ("one", "two"):
        await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": name, "namespace": NS}, "data": {"k": name}})
    one, two = ObjectRef("ConfigMap", NS, "one"), ObjectRef("ConfigMap", NS, "two")
    objects = WatchedObjects(client, config=WatchedObjectsConfig(max_objects=1))
    objects.use("pod-a", [one])  # not running yet
    assert objects.watched == frozenset()
    assert (await objects.get(one) or {}).get("data") == {"k": "one"}  # by GET
    async with asyncio.TaskGroup() as group:
        task = group.create_task(objects.run())
        await waiting.eventually(lambda: objects.running, timeout=10)
        objects.use("pod-a", [one])
        objects.use("pod-b", [two])  # beyond the bound
        assert objects.watched == {one}
        assert (await objects.get(two) or {}).get("data") == {"k": "two"}  # by GET
        objects.release("pod-a")
        assert objects.watched == frozenset()
        objects.use("pod-b", [two])
        assert objects.watched == {two}
        assert (await objects.get(two) or {}).get("data") == {"k": "two"}
        assert await objects.get(ObjectRef("ConfigMap", NS, "missing")) is None
        task.cancel()
