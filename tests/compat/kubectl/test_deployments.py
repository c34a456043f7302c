"""Deployments and ReplicaSets driven by the real kubectl against ``setpoint serve`` with its
node agent on the simulated pod runtime (pods Running and Ready without processes):
apply, set image, rollout status/history/undo/pause/resume/restart, scale, a pod deleted by
hand, cascading deletion in the background and foreground, ``get all``, ``explain``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def deployment(name: str, replicas: int = 3, image: str = "nginx:1.25") -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "strategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": image}]}}}})


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
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    k = Kubectl(serve.kubeconfig, tmp_path_factory.mktemp("cache"), env)
    eventually(lambda: k.json("get", "node", "node-a"), timeout=60)
    eventually(lambda: k.json("get", "serviceaccount", "default"), timeout=30)
    return k


def pods(kubectl: Kubectl, app: str) -> list[dict[str, Any]]:
    items = kubectl.json("get", "pods", "-l", f"app={app}")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def running(kubectl: Kubectl, app: str, count: int, image: str | None = None
            ) -> list[dict[str, Any]] | None:
    found = pods(kubectl, app)
    ok = len(found) == count and all(
        p["status"].get("phase") == "Running"
        and (image is None or p["spec"]["containers"][0]["image"] == image) for p in found)
    return found if ok else None


def rollout_status(kubectl: Kubectl, name: str) -> str:
    return kubectl.run("rollout", "status", f"deployment/{name}", "--timeout=60s",
                       timeout=90).stdout


def test_apply_rolls_out_three_running_pods(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=deployment("web"))
    assert "successfully rolled out" in rollout_status(kubectl, "web")
    [rs] = kubectl.json("get", "replicasets", "-l", "app=web")["items"]
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["metadata"]["name"] == f"web-{rs['metadata']['labels']['pod-template-hash']}"
    found = eventually(lambda: running(kubectl, "web", 3), timeout=30)
    assert {p["metadata"]["ownerReferences"][0]["name"] for p in found} == {
        rs["metadata"]["name"]}
    table = kubectl.run("get", "deployment", "web").stdout.split("\n")
    assert table[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1].split()[:4] == ["web", "3/3", "3", "3"]
    wide = kubectl.run("get", "replicaset", "-o", "wide").stdout.split("\n")
    assert wide[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS",
                               "IMAGES", "SELECTOR"]
    described = kubectl.run("describe", "deployment", "web").stdout
    assert f"NewReplicaSet:   {rs['metadata']['name']} (3/3 replicas created)" in described
    assert "RollingUpdateStrategy:  1 max unavailable, 1 max surge" in described
    assert "ScalingReplicaSet" in described
    everything = kubectl.run("get", "all").stdout
    assert "deployment.apps/web" in everything
    assert f"replicaset.apps/{rs['metadata']['name']}" in everything
    assert "pod/web-" in everything


def test_set_image_history_and_undo(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=deployment("hist"))
    rollout_status(kubectl, "hist")
    kubectl.run("set", "image", "deployment/hist", "web=nginx:1.26")
    kubectl.run("annotate", "deployment/hist", "kubernetes.io/change-cause=to 1.26")
    assert "successfully rolled out" in rollout_status(kubectl, "hist")
    eventually(lambda: running(kubectl, "hist", 3, "nginx:1.26"), timeout=30)
    history = kubectl.run("rollout", "history", "deployment/hist").stdout
    assert "REVISION" in history
    revision_2 = kubectl.run("rollout", "history", "deployment/hist",
                             "--revision=2").stdout
    assert "nginx:1.26" in revision_2
    sets = kubectl.json("get", "replicasets", "-l", "app=hist")["items"]
    first = next(s for s in sets if s["metadata"]["annotations"][
        "deployment.kubernetes.io/revision"] == "1")
    kubectl.run("rollout", "undo", "deployment/hist")
    rollout_status(kubectl, "hist")
    eventually(lambda: running(kubectl, "hist", 3, "nginx:1.25"), timeout=30)
    back = kubectl.json("get", "replicaset", first["metadata"]["name"])
    assert back["spec"]["replicas"] == 3, [
        (s["metadata"]["name"], s["spec"]["replicas"], s["metadata"]["annotations"],
         s["spec"]["template"]) for s in kubectl.json("get", "replicasets", "-l",
                                                      "app=hist")["items"]]
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert kubectl.json("get", "deployment", "hist")["metadata"]["annotations"][
        "deployment.kubernetes.io/revision"] == "3"


def test_pause_resume_restart_and_scale(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=deployment("pr", replicas=2))
    rollout_status(kubectl, "pr")
    kubectl.run("rollout", "pause", "deployment/pr")
    kubectl.run("set", "image", "deployment/pr", "web=nginx:1.27")

    def observed() -> bool:
        d = kubectl.json("get", "deployment", "pr")
        return bool(d["status"].get("observedGeneration") == d["metadata"]["generation"])

    eventually(observed, timeout=30)
    assert len(kubectl.json("get", "replicasets", "-l", "app=pr")["items"]) == 1
    kubectl.run("rollout", "resume", "deployment/pr")
    rollout_status(kubectl, "pr")
    eventually(lambda: running(kubectl, "pr", 2, "nginx:1.27"), timeout=30)
    before = {p["metadata"]["name"] for p in pods(kubectl, "pr")}
    kubectl.run("rollout", "restart", "deployment/pr")
    rollout_status(kubectl, "pr")

    def restarted() -> bool:
        found = running(kubectl, "pr", 2)
        return found is not None and not before & {p["metadata"]["name"] for p in found}

    eventually(restarted, timeout=30)
    kubectl.run("scale", "deployment/pr", "--replicas=4")
    rollout_status(kubectl, "pr")
    eventually(lambda: running(kubectl, "pr", 4), timeout=30)


def test_a_pod_deleted_by_hand_is_replaced(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=deployment("heal", replicas=2))
    rollout_status(kubectl, "heal")
    victim = pods(kubectl, "heal")[0]["metadata"]["name"]
    kubectl.run("delete", "pod", victim, "--wait=true", timeout=60)

    def replaced() -> bool:
        found = running(kubectl, "heal", 2)
        return found is not None and victim not in {p["metadata"]["name"] for p in found}

    eventually(replaced, timeout=30)


@pytest.mark.parametrize("cascade", ["background", "foreground"])
def test_deleting_the_deployment_deletes_everything_under_it(kubectl: Kubectl,
                                                              cascade: str) -> None:
    name = f"gone-{cascade}"
    kubectl.run("apply", "-f", "-", input=deployment(name, replicas=2))
    rollout_status(kubectl, name)
    kubectl.run("delete", "deployment", name, f"--cascade={cascade}", "--wait=true",
                timeout=90)

    def all_gone() -> bool:
        return not kubectl.json("get", "replicasets", "-l", f"app={name}")["items"] and \
            not kubectl.json("get", "pods", "-l", f"app={name}")["items"]

    eventually(all_gone, timeout=60)


def test_explain_and_validation(kubectl: Kubectl, tmp_path: Path) -> None:
    explained = kubectl.run("explain", "deployment.spec.strategy").stdout
    assert "rollingUpdate" in explained
    assert "maxSurge" in kubectl.run("explain",
                                     "deployment.spec.strategy.rollingUpdate").stdout
    bad = json.loads(deployment("bad"))
    bad["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0
    assert "`selector` does not match template `labels`" in result.stderr
