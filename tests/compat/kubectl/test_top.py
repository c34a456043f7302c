"""``kubectl top pod|node`` against ``setpoint serve`` and its agent, with a real process.

The numbers come from the agent's measurement of the pod's process (``/proc``) and of the
machine, read by the server from the agent's ``/metrics/resource`` (``metrics.k8s.io``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_pods_run import (
    NODE,
    apply,
    kubectl_for,
    pod,
    start,
    stop_cleanly,
    wait_ready,
)
from tests.conftest import ServeProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BURNER = ("exec python3 -c 'held = bytearray(96 * 1024 * 1024)\n"
          "for i in range(0, len(held), 4096): held[i] = 1\n"
          "while True: pass'")


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
    eventually(lambda: k.json("get", "node", NODE), timeout=60)
    return k


def _millicores(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(text) * 1000


def _mebibytes(text: str) -> int:
    assert text.endswith("Mi"), text
    return int(text[:-2])


def test_top_pod_and_node_show_a_busy_process(kubectl: Kubectl) -> None:
    apply(kubectl, {**pod("burner", BURNER), "metadata": {
        "name": "burner", "labels": {"app": "burn"}}},
        {**pod("idle", "exec sleep 3600", container="waiter")})
    wait_ready(kubectl, "burner")
    wait_ready(kubectl, "idle")

    def top_pods() -> dict[str, list[str]] | None:
        out = kubectl.run("top", "pod", check=False)
        if out.returncode != 0:
            return None
        rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:]}
        return rows if {"burner", "idle"} <= rows.keys() else None

    rows = eventually(top_pods, timeout=60)
    header = kubectl.run("top", "pod").stdout.splitlines()[0].split()
    assert header == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    _, cpu, memory = rows["burner"]
    assert _millicores(cpu) >= 100  # a busy loop: most of a core (the machine is shared)
    assert _mebibytes(memory) >= 90
    assert _mebibytes(rows["idle"][2]) < 90

    containers = kubectl.run("top", "pod", "burner", "--containers").stdout.splitlines()
    assert containers[0].split() == ["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert containers[1].split()[:2] == ["burner", "app"]
    selected = kubectl.run("top", "pod", "-l", "app=burn").stdout.splitlines()[1:]
    assert [line.split()[0] for line in selected] == ["burner"]
    everywhere = kubectl.run("top", "pod", "-A").stdout.splitlines()
    assert everywhere[0].split()[0] == "NAMESPACE"
    assert any(line.split()[:2] == ["default", "burner"] for line in everywhere[1:])

    nodes = kubectl.run("top", "node").stdout.splitlines()
    assert nodes[0].split() == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)",
                                "MEMORY(%)"]
    row = next(line.split() for line in nodes[1:] if line.split()[0] == NODE)
    assert _millicores(row[1]) >= 100  # the burner alone uses that much of the machine
    assert _mebibytes(row[3]) >= 90

    raw = json.loads(kubectl.run(
        "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/burner").stdout)
    assert raw["kind"] == "PodMetrics"
    assert raw["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert raw["metadata"]["labels"] == {"app": "burn"}
    assert raw["window"].endswith("s")
    assert raw["timestamp"].endswith("Z")
    (usage,) = raw["containers"]
    assert usage["name"] == "app"
    assert usage["usage"]["cpu"].endswith("n")
    assert usage["usage"]["memory"].endswith("Ki")

    missing = kubectl.run("top", "pod", "nothing-here", check=False)
    assert missing.returncode != 0
    assert 'podmetrics.metrics.k8s.io "default/nothing-here" not found' in missing.stderr
    none = kubectl.run("top", "node", "no-such-node", check=False)
    assert 'nodemetrics.metrics.k8s.io "no-such-node" not found' in none.stderr
