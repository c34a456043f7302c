"""``kubectl cordon``, ``uncordon`` and ``drain`` through PodDisruptionBudgets, with the real
kubectl against ``setpoint serve`` (its own node ``node-a`` on the simulated pod runtime) and
a second node joined with ``setpoint agent`` (``node-b``, simulated too).

Drain evicts as the budget allows: kubectl's evictions that would break it get 429s, which
kubectl retries every 5 seconds, and succeed as the ReplicaSet's replacements (on the other
node) become Ready and the disruption controller gives the budget back. A budget that can
never be met ends in kubectl's global timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = start_serve(tmp_path_factory.mktemp("serve"),
                       extra_args=["--node-name", "node-a", "--pod-runtime", "simulate"],
                       timeout=40)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def second_node(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[str]:
    root = tmp_path_factory.mktemp("node-b")
    log = (root / "agent.log").open("wb")
    agent = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "agent", "--kubeconfig", str(serve.kubeconfig),
         "--name", "node-b", "--root-dir", str(root / "agent"), "--port", "0",
         "--pod-runtime", "simulate", "--service-proxy", "off"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        yield "node-b"
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, second_node: str,
            tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    k = Kubectl(serve.kubeconfig, tmp_path_factory.mktemp("cache"), env)
    for node in ("node-a", second_node):
        eventually(lambda n=node: node_ready(k, n), timeout=60)
    eventually(lambda: k.json("get", "serviceaccount", "default"), timeout=30)
    return k


def node_ready(kubectl: Kubectl, name: str) -> bool:
    result = kubectl.run("get", "node", name, "-o", "json", check=False)
    if result.returncode != 0:
        return False
    conditions = json.loads(result.stdout).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def deployment(name: str, replicas: int, **pod_spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "app:1"}],
                                           **pod_spec}}}}


def budget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}}, **spec}}


def ready_pods(kubectl: Kubectl, app: str) -> list[dict[str, Any]]:
    items = kubectl.json("get", "pods", "-l", f"app={app}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in p.get("status", {}).get("conditions", []))]


def placed(kubectl: Kubectl, app: str, count: int) -> dict[str, int] | None:
    pods = ready_pods(kubectl, app)
    if len(pods) != count:
        return None
    nodes: dict[str, int] = {}
    for pod in pods:
        nodes[pod["spec"]["nodeName"]] = nodes.get(pod["spec"]["nodeName"], 0) + 1
    return nodes


def allowed(kubectl: Kubectl, name: str, wanted: int) -> bool:
    pdb = kubectl.json("get", "pdb", name)
    status = pdb.get("status", {})
    return status.get("observedGeneration") == pdb["metadata"]["generation"] and \
        status.get("disruptionsAllowed") == wanted


def test_cordon_and_uncordon(kubectl: Kubectl) -> None:
    result = kubectl.run("cordon", "node-b")
    assert result.stdout.strip() == "node/node-b cordoned"
    assert kubectl.json("get", "node", "node-b")["spec"]["unschedulable"] is True
    row = kubectl.run("get", "node", "node-b", "--no-headers").stdout.split()
    assert row[1] == "Ready,SchedulingDisabled"
    assert kubectl.run("cordon", "node-b").stdout.strip() == "node/node-b already cordoned"
    assert kubectl.run("uncordon", "node-b").stdout.strip() == "node/node-b uncordoned"
    assert not kubectl.json("get", "node", "node-b")["spec"].get("unschedulable")
    assert kubectl.run("get", "node", "node-b", "--no-headers").stdout.split()[1] == "Ready"


def test_explain_and_columns_of_budgets(kubectl: Kubectl) -> None:
    explained = kubectl.run("explain", "pdb.spec.unhealthyPodEvictionPolicy").stdout
    assert "IfHealthyBudget" in explained
    assert "AlwaysAllow" in explained
    apply(kubectl, budget("shown", maxUnavailable="25%"))
    header, row = kubectl.run("get", "pdb", "shown").stdout.splitlines()
    assert header.split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                              "DISRUPTIONS", "AGE"]
    assert row.split()[:3] == ["shown", "N/A", "25%"]
    kubectl.run("delete", "pdb", "shown")


def test_drain_respects_the_budget_and_completes(kubectl: Kubectl) -> None:
    # every pod on node-a first: node-b takes nothing while cordoned
    kubectl.run("cordon", "node-b")
    apply(kubectl, deployment("web", 3), budget("web", minAvailable=2))
    assert eventually(lambda: placed(kubectl, "web", 3), timeout=60) == {"node-a": 3}
    eventually(lambda: allowed(kubectl, "web", 1), timeout=30)
    row = kubectl.run("get", "pdb", "web", "--no-headers").stdout.split()
    assert row[:4] == ["web", "2", "N/A", "1"]
    described = " ".join(kubectl.run("describe", "pdb", "web").stdout.split())
    assert "Min available: 2 Selector: app=web Status: Allowed disruptions: 1 Current: 3 " \
        "Desired: 2 Total: 3" in described
    kubectl.run("uncordon", "node-b")

    result = kubectl.run("drain", "node-a", "--ignore-daemonsets", "--delete-emptydir-data",
                         "--timeout=120s", timeout=180)
    assert "node/node-a cordoned" in result.stdout
    assert "node/node-a drained" in result.stdout
    # one eviction at a time was allowed: the others were refused and retried
    assert f"(will retry after 5s): {VIOLATION}" in result.stderr
    assert result.stdout.count("evicted") == 3
    assert eventually(lambda: placed(kubectl, "web", 3), timeout=60) == {"node-b": 3}
    eventually(lambda: allowed(kubectl, "web", 1), timeout=30)
    kubectl.run("uncordon", "node-a")
    kubectl.run("delete", "deployment", "web", "--wait=true", timeout=60)


def test_drain_with_a_budget_that_can_never_be_met_times_out(kubectl: Kubectl) -> None:
    # both pods pinned to node-b and a budget that wants both: no eviction is ever allowed
    apply(kubectl, deployment("pinned", 2, nodeSelector={"kubernetes.io/hostname": "node-b"}),
          budget("pinned", minAvailable=2))
    assert eventually(lambda: placed(kubectl, "pinned", 2), timeout=60) == {"node-b": 2}
    eventually(lambda: allowed(kubectl, "pinned", 0), timeout=30)
    result = kubectl.run("drain", "node-b", "--ignore-daemonsets", "--delete-emptydir-data",
                         "--timeout=12s", check=False, timeout=120)
    assert result.returncode != 0
    assert f"(will retry after 5s): {VIOLATION}" in result.stderr
    assert "global timeout reached: 12s" in result.stderr
    assert 'error: unable to drain node "node-b"' in result.stderr
    # nothing was evicted
    assert placed(kubectl, "pinned", 2) == {"node-b": 2}
    kubectl.run("uncordon", "node-b")
