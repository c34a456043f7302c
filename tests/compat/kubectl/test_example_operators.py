"""The examples whose operators run pods, end to end: ``setpoint serve`` with its node agent
running the pods as processes, each example's operator under ``setpoint run``, and the real
kubectl. BitcoinNetwork: a StatefulSet of peer-to-peer nodes peered by the operator, and
its owner tree in the web UI in headless chromium (skipped, saying why, without chromium).
Watertank: the tank is a pod of its own, disturbed through ``kubectl exec`` and ``kubectl
port-forward``, and the operator's loop brings it back.

What the programs hold is read from them (their HTTP API at the pod IPs the agent reported),
not only from the status the operators write. Every wait is for a positive signal: a status,
a peer list, a pod's new uid.
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
from tests.integration.ui.browser import chromium, sign_in, snapshot, until

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


@contextlib.contextmanager
def running_operator(example: str, serve: ServeProcess, log: Path) -> Iterator[None]:
    """``setpoint run examples/EXAMPLE/operator.py``; it must stop cleanly, without a
    traceback."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "run",
             str(ROOT / "examples" / example / "operator.py"),
             "--kubeconfig", str(serve.kubeconfig)], cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        yield
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


def install_crd(kubectl: Kubectl, path: Path, name: str) -> None:
    kubectl.apply(path)
    kubectl.run("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s",
                timeout=40)


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


@pytest.fixture(scope="module")
def bitcoin_operator(serve: ServeProcess, kubectl: Kubectl,
                     tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The BitcoinNetwork CRD installed and its operator running, for the module's network
    tests (each starts from ``network.yaml``: the first converges it, the next finds it
    converged)."""
    install_crd(kubectl, EXAMPLE / "crd.yaml", "bitcoinnetworks.bitcoin.example.com")
    with running_operator("bitcoinnetwork", serve,
                          tmp_path_factory.mktemp("bitcoin") / "operator.log"):
        yield


def ui_token(kubectl: Kubectl) -> str:
    """A token for the UI (which signs in with bearer tokens, not the admin's client
    certificate): a ServiceAccount bound to cluster-admin, its token from TokenRequest."""
    if kubectl.run("get", "serviceaccount", "ui-admin", check=False).returncode != 0:
        kubectl.run("create", "serviceaccount", "ui-admin")
        kubectl.run("create", "clusterrolebinding", "ui-admin", "--clusterrole",
                    "cluster-admin", "--serviceaccount", "default:ui-admin")
    return kubectl.run("create", "token", "ui-admin", "--duration", "10m").stdout.strip()


def test_the_networks_owner_tree_in_the_ui_shows_its_statefulset_and_ready_pods(
        serve: ServeProcess, kubectl: Kubectl, bitcoin_operator: None, tmp_path: Path) -> None:
    with chromium(tmp_path / "chromium") as driver:
        from selenium.webdriver.common.by import By

        kubectl.apply(EXAMPLE / "network.yaml")
        fully_peered(kubectl, 3)
        sign_in(driver, serve.url, ui_token(kubectl))
        until(driver, lambda d: d.find_element(By.ID, "kinds"), "signed in")
        driver.get(serve.url + f"/ui/#/o/bitcoin.example.com/v1/bitcoinnetworks/default/{NETWORK}")
        network = f"#tree li.self[data-kind=BitcoinNetwork][data-name={NETWORK}]"
        statefulset = f"{network} > ul > li[data-kind=StatefulSet][data-name={NETWORK}]"

        def own_health(d: Any, selector: str) -> str:
            return str(d.find_element(By.CSS_SELECTOR, f"{selector} > [data-health]")
                       .get_attribute("data-health"))

        def pods_in_tree(d: Any) -> dict[str, str]:
            return {li.get_attribute("data-name"): li.find_element(
                By.CSS_SELECTOR, ":scope > [data-health]").get_attribute("data-health")
                for li in d.find_elements(By.CSS_SELECTOR,
                                          f"{statefulset} > ul > li[data-kind=Pod]")}

        def children(d: Any) -> set[tuple[str, str]]:
            return {(li.get_attribute("data-kind"), li.get_attribute("data-name"))
                    for li in d.find_elements(By.CSS_SELECTOR, f"{network} > ul > li")}

        until(driver, lambda d: own_health(d, network) == "ready"
              and {("StatefulSet", NETWORK), ("Service", NETWORK),
                   ("ConfigMap", f"{NETWORK}-node-program")} <= children(d)
              and own_health(d, statefulset) == "ready"
              and pods_in_tree(d) == {f"{NETWORK}-{i}": "ready" for i in range(3)},
              "the network's tree shows its StatefulSet, Service and ConfigMap, and the "
              "StatefulSet's three pods, all ready")
        assert "NetworkReady" in driver.find_element(By.ID, "health-message").text
        snapshot(driver, "bitcoinnetwork")


def test_a_network_is_peered_scaled_healed_updated_and_deleted(
        serve: ServeProcess, kubectl: Kubectl, bitcoin_operator: None) -> None:
    bitcoin_network(serve, kubectl)


def bitcoin_network(serve: ServeProcess, kubectl: Kubectl) -> None:
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


TANK_EXAMPLE = ROOT / "examples" / "watertank"
TANK_SCRIPT = """import os, sys, urllib.request as u
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
r = u.Request("http://" + os.environ["POD_IP"] + ":8080" + sys.argv[2], method=sys.argv[1],
              data=data)
print(u.urlopen(r, timeout=5).read().decode())
"""


def tank_api(kubectl: Kubectl, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """The tank's API, called from inside its pod with ``kubectl exec``."""
    extra = [json.dumps(body)] if body is not None else []
    answer: dict[str, Any] = json.loads(kubectl.run(
        "exec", "rooftop-tank", "--", "python3", "-c", TANK_SCRIPT, method, path,
        *extra).stdout)
    return answer


@contextlib.contextmanager
def port_forward(kubectl: Kubectl, target: str, port: int) -> Iterator[str]:
    """``kubectl port-forward TARGET :PORT``; the local URL."""
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "port-forward", target,
         f":{port}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=kubectl.env)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "Forwarding from 127.0.0.1:" in line, line
        yield "http://127.0.0.1:" + line.split("127.0.0.1:", 1)[1].split()[0]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def tank_status(kubectl: Kubectl) -> dict[str, Any]:
    status: dict[str, Any] = kubectl.json("get", "tank", "rooftop").get("status") or {}
    return status


def held(kubectl: Kubectl, target: float, tolerance: float) -> dict[str, Any]:
    """Wait for the tank itself (asked through kubectl exec) to hold the level with its pump
    off and its tap closed, and for the Tank's status to say so."""
    def check() -> dict[str, Any]:
        real = tank_api(kubectl, "GET", "/tank")
        assert real["pump"] == "off", real
        assert real["tap"] == 0, real
        assert abs(real["level"] - target) <= tolerance, real
        status = tank_status(kubectl)
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        assert conditions.get("AtTarget") == "True", status
        assert status["pump"] == "off", status
        assert status["tankPod"] == "rooftop-tank", status
        assert abs(status["level"] - target) <= tolerance, status
        return real

    result: dict[str, Any] = eventually(check, timeout=90, interval=0.5)
    return result


def test_the_tank_pod_is_disturbed_through_kubectl_and_the_loop_recovers(
        serve: ServeProcess, kubectl: Kubectl, tmp_path: Path) -> None:
    install_crd(kubectl, TANK_EXAMPLE / "crd.yaml", "tanks.waterworks.example.com")
    with running_operator("watertank", serve, tmp_path / "operator.log"):
        kubectl.run("apply", "-f", "-", input=json.dumps({
            "apiVersion": "waterworks.example.com/v1", "kind": "Tank",
            "metadata": {"name": "rooftop", "namespace": "default"},
            "spec": {"targetLevel": 20, "tolerance": 2}}))
        held(kubectl, 20, 2)
        pod = kubectl.json("get", "pod", "rooftop-tank")
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Tank"

        # the tap opened through kubectl exec: the level falls, the loop starts the pump
        # against it (the Tank's status shows both)
        assert tank_api(kubectl, "PUT", "/tap", {"rate": 2})["tap"] == 2

        def fighting() -> bool:
            status = tank_status(kubectl)
            assert status.get("tap") == 2, status
            assert status.get("pump") == "filling", status
            return True

        eventually(fighting, timeout=60, interval=0.3)
        tank_api(kubectl, "PUT", "/tap", {"rate": 0})
        held(kubectl, 20, 2)

        # water poured in through kubectl port-forward: the loop drains it back
        with port_forward(kubectl, "pod/rooftop-tank", 8080) as url:
            request = urllib.request.Request(f"{url}/level", method="PUT",
                                             data=b'{"level": 70}')
            with urllib.request.urlopen(request, timeout=10) as response:
                assert json.loads(response.read())["level"] == 70
        eventually(lambda: tank_status(kubectl).get("pump") == "draining", timeout=60,
                   interval=0.3)
        held(kubectl, 20, 2)

        # the tank's pod deleted: the operator starts another (an empty tank) and fills it
        old = pod["metadata"]["uid"]
        kubectl.run("delete", "pod", "rooftop-tank", "--wait=true", timeout=90)
        eventually(lambda: kubectl.json("get", "pod", "rooftop-tank")["metadata"]["uid"] != old,
                   timeout=60)
        held(kubectl, 20, 2)
        assert pod_processes(old) == set()

        # the Tank deleted: its pod goes with it, and its processes
        uid = kubectl.json("get", "pod", "rooftop-tank")["metadata"]["uid"]
        kubectl.run("delete", "tank", "rooftop", "--wait=true", timeout=60)

        def collected() -> bool:
            names = [p["metadata"]["name"] for p in kubectl.json("get", "pods")["items"]]
            assert "rooftop-tank" not in names
            assert pod_processes(uid) == set()
            return True

        eventually(collected, timeout=90, interval=0.5)
