"""The BitcoinNetwork operator on the in-process control plane (no node agent, no StatefulSet
controller, no scheduler): its children are created as they should be, and pods made Ready
by hand, whose pod IPs are real node programs listening on loopback addresses of their own,
are peered with each other, forgotten when they go, and detached by the finalizer.

The end-to-end test, with the StatefulSet controller and the agent running the nodes as
processes, is tests/compat/kubectl/test_example_operators.py."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from setpoint.testing import ControlPlane, control_plane, load_operator

HERE = Path(__file__).parent
NETWORK = ("bitcoin.example.com/v1", "BitcoinNetwork")
POD = ("v1", "Pod")
STATEFULSET = ("apps/v1", "StatefulSet")

operator = load_operator(HERE / "operator.py")


def _load_node() -> Any:
    spec = importlib.util.spec_from_file_location("bitcoinnetwork_node", HERE / "node.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


node = _load_node()


@pytest.fixture
def programs() -> Iterator[dict[str, Any]]:
    """Node programs on port 8333 of 127.X.Y.1..4: X in 250-254, above the loopback ranges
    the test suite's agents hand out to pods, and X.Y derived from this process's pid, so
    parallel workers do not meet."""
    base = f"127.{250 + os.getpid() % 5}.{os.getpid() // 5 % 250}"
    started: dict[str, Any] = {}
    for i in range(4):
        ip = f"{base}.{i + 1}"
        server = node.NodeServer((ip, operator.PORT), node.Node(f"demo-{i}", "v1",
                                                                f"{ip}:{operator.PORT}"))
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        started[f"demo-{i}"] = server
    yield started
    for server in started.values():
        server.shutdown()
        server.server_close()


def peers_of(server: Any) -> dict[str, str]:
    host, port = server.server_address[:2]
    with urllib.request.urlopen(f"http://{host}:{port}/peers", timeout=5) as response:
        result: dict[str, str] = json.loads(response.read())["peers"]
    return result


async def make_ready(cp: ControlPlane, name: str, server: Any) -> None:
    """A pod of the network, as the StatefulSet would make it, Ready at the program's IP."""
    template = operator.pod_template("demo", {"version": "v1"})
    await cp.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": "default",
                                 "labels": template["metadata"]["labels"]},
                    "spec": template["spec"]})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await cp.client.patch_status(POD, name, {"status": {
        "phase": "Running", "podIP": server.server_address[0],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]}},
        namespace="default")


def network_ready(size: int) -> Any:
    def check(network: dict[str, Any]) -> bool:
        status = network.get("status") or {}
        return (status.get("readyNodes") == size and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in status.get("conditions") or ())
            and [n.get("peers") for n in status["nodes"]] == [size - 1] * size)
    return check


async def test_ready_pods_are_peered_forgotten_and_detached(programs: dict[str, Any]) -> None:
    # no StatefulSet controller or scheduler: the pods are the test's own
    async with control_plane(controllers=("garbagecollector", "crd")) as cp:
        await cp.apply(HERE / "crd.yaml")
        await cp.run_operator(operator.build(converge_every=0.1, resync_every=5.0))
        await cp.apply({"apiVersion": "bitcoin.example.com/v1", "kind": "BitcoinNetwork",
                        "metadata": {"name": "demo"}, "spec": {"nodes": 3, "version": "v1"}})
        sts = await cp.wait_for(STATEFULSET, "demo", lambda s: True)
        assert sts["spec"]["replicas"] == 3
        assert sts["spec"]["serviceName"] == "demo"
        assert sts["metadata"]["ownerReferences"][0]["kind"] == "BitcoinNetwork"
        container = sts["spec"]["template"]["spec"]["containers"][0]
        assert container["command"] == ["python3", "/opt/bitcoinnode/node.py"]
        program = await cp.wait_for(("v1", "ConfigMap"), "demo-node-program", lambda c: True)
        assert program["data"]["node.py"] == (HERE / "node.py").read_text()
        await cp.wait_for(("v1", "Service"), "demo", lambda s: True)
        waiting = await cp.wait_for(NETWORK, "demo", lambda n: any(
            c["reason"] == "NodesNotReady" for c in (n.get("status") or {}).get(
                "conditions") or ()))
        assert waiting["status"]["readyNodes"] == 0

        for i in range(3):
            await make_ready(cp, f"demo-{i}", programs[f"demo-{i}"])
        ready = await cp.wait_for(NETWORK, "demo", network_ready(3))
        assert ready["status"]["observedGeneration"] == ready["metadata"]["generation"]
        for i in range(3):
            assert peers_of(programs[f"demo-{i}"]) == {
                f"demo-{j}": f"{programs[f'demo-{j}'].server_address[0]}:8333"
                for j in range(3) if j != i}

        # a fourth node: the spec asks for it and its pod becomes Ready
        await cp.apply({"apiVersion": "bitcoin.example.com/v1", "kind": "BitcoinNetwork",
                        "metadata": {"name": "demo"}, "spec": {"nodes": 4, "version": "v1"}})
        await cp.wait_for(STATEFULSET, "demo", lambda s: s["spec"]["replicas"] == 4)
        await make_ready(cp, "demo-3", programs["demo-3"])
        await cp.wait_for(NETWORK, "demo", network_ready(4))
        assert set(peers_of(programs["demo-0"])) == {"demo-1", "demo-2", "demo-3"}

        # a node that forgot its peers (a restarted program) is repaired
        programs["demo-2"].node.peers.clear()
        await cp.eventually(lambda: len(peers_of(programs["demo-2"])) == 3)

        # a pod that goes is dropped from every other node's list
        await cp.client.delete(POD, "demo-3", namespace="default", grace_period_seconds=0)
        await cp.eventually(lambda: all(
            "demo-3" not in peers_of(programs[f"demo-{i}"]) for i in range(3)))

        # deleting the network detaches every node before the finalizer goes
        await cp.client.delete(NETWORK, "demo", namespace="default")
        await cp.wait_deleted(NETWORK, "demo")
        assert all(peers_of(programs[f"demo-{i}"]) == {} for i in range(3))
        events = await cp.client.list(("v1", "Event"), namespace="default",
                                      field_selector="reason=Detached")
        assert [e["message"] for e in events["items"]] == [
            "peer lists emptied on 3 node(s): demo-0, demo-1, demo-2"]
