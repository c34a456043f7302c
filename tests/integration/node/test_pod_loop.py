"""The agent's pod loop against a real server, on the simulated runtime: a pod deleted without
a graceful deletion is taken out of the runtime, and a new pod of the same name replaces it
there (the loop's uid bookkeeping, by key and by uid)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.agent.simulated import SimulatedRuntime
from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
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
