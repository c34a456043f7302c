"""The BitcoinNetwork example end to end: ``setpoint serve`` with its node agent running the
nodes as processes, the example's operator under ``setpoint run``, and the real kubectl.

Peer lists are read from the nodes themselves (their HTTP API at the pod IPs the agent
reported), not only from the status the operator writes. Every wait is for a positive
signal: a status, a peer list, a pod's new uid.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_pods_run import kubectl_for, pod_processes, start, stop_cleanly
from tests.conftest import ServeProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "bitcoinnetwork"
NETWORK = "demo"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = start(tmp_path_factory.mktemp("serve"))
    try:
        yield proc
    finally:
        stop_cleanly(proc, kubectl_for(proc, tmp_path_factory.mktemp("cleanup")))


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = kubectl_for(serve, tmp_path_factory.mktemp("kubecache"))
    eventually(lambda: k.json("get", "nodes")["items"], timeout=60)
    return k


@pytest.fixture(scope="module")
def operator(serve: ServeProcess, kubectl: Kubectl,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    kubectl.apply(EXAMPLE / "crd.yaml")
    kubectl.run("wait", "--for=condition=Established", "crd/bitcoinnetworks.bitcoin.example.com",
                "--timeout=30s", timeout=40)
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "run", str(EXAMPLE / "operator.py"),
             "--kubeconfig", str(serve.kubeconfig)], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        output = log.read_text()
        assert code == 0, output
        assert "Traceback" not in output, output


def node_api(address: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as response:
        return json.loads(response.read())


def pods(kubectl: Kubectl) -> dict[str, dict[str, Any]]:
    items = kubectl.json("get", "pods", "-l", f"bitcoin.example.com/network={NETWORK}")["items"]
    return {p["metadata"]["name"]: p for p in items}


def recorded_pids(serve: ServeProcess) -> dict[str, set[tuple[int, int]]]:
    """(pid, start ticks) of every container the agent has recorded, by pod uid."""
    found: dict[str, set[tuple[int, int]]] = {}
    for state in (serve.data_dir / "agent" / "pods" / "pods").glob("*/state.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(state.read_text())
            found[state.parent.name] = {(i["pid"], i["startTicks"])
                                        for i in data["instances"].values()}
    return found


def alive(pid: int, start_ticks: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return int(fields[19]) == start_ticks  # field 22, starttime: the same process


def fully_peered(kubectl: Kubectl, size: int, version: str = "v1") -> dict[str, dict[str, Any]]:
    """Wait for ``size`` Ready nodes, each listing every other one at its current pod IP
    (asked of the node itself), and the network's status to say so; the pods."""
    def check() -> dict[str, dict[str, Any]]:
        current = pods(kubectl)
        assert sorted(current) == [f"{NETWORK}-{i}" for i in range(size)]
        assert all((p.get("status") or {}).get("podIP") for p in current.values())
        addresses = {name: f"{p['status']['podIP']}:8333" for name, p in current.items()}
        for name, address in addresses.items():
            status = node_api(address, "/status")
            assert status["version"] == version
            assert status["peers"] == {n: a for n, a in addresses.items() if n != name}
        network = kubectl.json("get", "bitcoinnetwork", NETWORK)
        assert "conditions" in network.get("status", {})
        ready = [c for c in network["status"]["conditions"] if c["type"] == "Ready"]
        assert ready[0]["status"] == "True", ready
        assert network["status"]["observedGeneration"] == network["metadata"]["generation"]
        assert network["status"]["readyNodes"] == size
        assert [(n["name"], n["peers"], n["version"]) for n in network["status"]["nodes"]] == [
            (f"{NETWORK}-{i}", size - 1, version) for i in range(size)]
        return current

    result: dict[str, dict[str, Any]] = eventually(check, timeout=120, interval=0.5)
    return result


def test_a_network_is_peered_scaled_healed_updated_and_deleted(
        serve: ServeProcess, kubectl: Kubectl, operator: Path) -> None:
    kubectl.apply(EXAMPLE / "network.yaml")
    three = fully_peered(kubectl, 3)
    table = kubectl.run("get", "btc", NETWORK).stdout
    assert table.split("\n")[1].split()[:5] == [NETWORK, "3", "3", "v1", "True"], table

    # a block mined on one node reaches the others through the peer lists
    first = three[f"{NETWORK}-0"]["status"]["podIP"]
    request = urllib.request.Request(f"http://{first}:8333/mine", method="POST",
                                     data=b'{"data": "hello"}')
    with urllib.request.urlopen(request, timeout=10) as response:
        block = json.loads(response.read())

    def same_tip() -> bool:
        for p in three.values():
            assert node_api(f"{p['status']['podIP']}:8333", "/status")["tip"] == block["hash"]
        return True

    eventually(same_tip, timeout=30)

    # scaled up: all five see four peers
    kubectl.run("patch", "btc", NETWORK, "--type", "merge", "-p", '{"spec":{"nodes":5}}')
    five = fully_peered(kubectl, 5)
    seen = recorded_pids(serve)

    # a pod killed by hand: replaced (a new uid), and re-peered at its new address
    victim = five[f"{NETWORK}-1"]
    old_uid = victim["metadata"]["uid"]
    kubectl.run("delete", "pod", f"{NETWORK}-1", "--wait=true", timeout=90)
    healed = fully_peered(kubectl, 5)
    assert healed[f"{NETWORK}-1"]["metadata"]["uid"] != old_uid
    assert pod_processes(old_uid) == set()
    assert not any(alive(*p) for p in seen[old_uid])

    # a new version: the StatefulSet replaces every node, and they are peered again
    kubectl.run("patch", "btc", NETWORK, "--type", "merge", "-p", '{"spec":{"version":"v2"}}')
    updated = fully_peered(kubectl, 5, version="v2")
    assert all(updated[n]["metadata"]["uid"] != healed[n]["metadata"]["uid"] for n in updated)

    # scaled down: the two last nodes go, and the others forget them
    kubectl.run("patch", "btc", NETWORK, "--type", "merge", "-p", '{"spec":{"nodes":3}}')
    fully_peered(kubectl, 3, version="v2")

    # deleted: the finalizer detaches the nodes, then nothing of the network is left
    uids = {p["metadata"]["uid"] for p in updated.values()}
    seen = recorded_pids(serve)
    assert uids & set(seen)
    kubectl.run("delete", "btc", NETWORK, "--wait=true", timeout=90)
    events = kubectl.json("get", "events", "--field-selector", "reason=Detached")["items"]
    assert [e["involvedObject"]["name"] for e in events] == [NETWORK]

    def gone() -> bool:
        assert pods(kubectl) == {}
        assert kubectl.json("get", "statefulsets")["items"] == []
        for uid in uids:
            assert pod_processes(uid) == set()
            assert not any(alive(*p) for p in seen.get(uid, ()))
        return True

    eventually(gone, timeout=90, interval=0.5)
    for kind in ("services", "configmaps"):  # collected by the garbage collector
        eventually(lambda kind=kind: not {NETWORK, f"{NETWORK}-node-program"} & {
            i["metadata"]["name"] for i in kubectl.json("get", kind)["items"]}, timeout=30)
