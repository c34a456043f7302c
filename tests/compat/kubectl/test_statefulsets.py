"""A StatefulSet driven by the real kubectl against ``setpoint serve`` with its node agent on
the simulated pod runtime: apply starts web-0, web-1, web-2 in order, ``rollout status``
follows the start and a rolling update, ``scale`` down removes the highest ordinal first,
``get all`` lists it; ``rollout history|undo`` read the ControllerRevisions of a StatefulSet
and of a DaemonSet."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]

Obj = dict[str, Any]


def manifests(image: str = "nginx:1.25", name: str = "web") -> str:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"clusterIP": "None", "selector": {"app": name},
                        "ports": [{"port": 80, "name": "http"}]}}
    statefulset = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
        "spec": {"serviceName": name, "replicas": 3,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}, "annotations": {
                     # a second before Ready: a pod made too early would show it
                     "simulate.setpoint.dev/ready-after": "1"}},
                     "spec": {"terminationGracePeriodSeconds": 1,
                              "containers": [{"name": "nginx", "image": image,
                                              "volumeMounts": [{"name": "www",
                                                                "mountPath": "/www"}]}]}},
                 "volumeClaimTemplates": [{"metadata": {"name": "www"}, "spec": {
                     "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}]}}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, statefulset]})


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


def live(kubectl: Kubectl, app: str = "web") -> dict[str, Obj]:
    items = kubectl.json("get", "pods", "-l", f"app={app}")["items"]
    return {p["metadata"]["name"]: p for p in items
            if not p["metadata"].get("deletionTimestamp")}


def ready_since(pod: Obj) -> str:
    return next(c["lastTransitionTime"] for c in pod["status"]["conditions"]
                if c["type"] == "Ready" and c["status"] == "True")


def rollout_status(kubectl: Kubectl, target: str = "statefulset/web") -> str:
    return kubectl.run("rollout", "status", target, "--timeout=90s", timeout=100).stdout


def test_a_statefulset_starts_updates_and_scales_down_in_order(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=manifests())
    out = rollout_status(kubectl)
    # the defaulted partition (0) makes kubectl report a partitioned roll out, as against
    # Kubernetes
    assert "partitioned roll out complete: 3 new pods have been updated" in out, out
    pods = live(kubectl)
    assert sorted(pods) == ["web-0", "web-1", "web-2"]
    assert all(p["status"]["phase"] == "Running" for p in pods.values())
    # each one was created once the previous one was Ready (the server's own timestamps)
    assert ready_since(pods["web-0"]) <= pods["web-1"]["metadata"]["creationTimestamp"]
    assert ready_since(pods["web-1"]) <= pods["web-2"]["metadata"]["creationTimestamp"]
    assert pods["web-1"]["spec"]["hostname"] == "web-1"
    assert pods["web-1"]["spec"]["subdomain"] == "web"

    table = kubectl.run("get", "statefulset", "web").stdout.split("\n")
    assert table[0].split() == ["NAME", "READY", "AGE"]
    assert table[1].split()[:2] == ["web", "3/3"]
    wide = kubectl.run("get", "sts", "web", "-o", "wide").stdout.split("\n")
    assert wide[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    assert wide[1].split()[3:] == ["nginx", "nginx:1.25"]
    everything = kubectl.run("get", "all").stdout
    assert "statefulset.apps/web" in everything, everything
    assert "pod/web-2" in everything, everything

    # a rolling update: every pod at the new revision, rollout status follows it
    kubectl.run("apply", "-f", "-", input=manifests("nginx:1.26"))
    out = rollout_status(kubectl)
    assert "partitioned roll out complete: 3 new pods have been updated" in out, out
    sts = kubectl.json("get", "statefulset", "web")
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]
    images = {p["spec"]["containers"][0]["image"] for p in live(kubectl).values()}
    assert images == {"nginx:1.26"}

    # scale down: web-2 goes first, then web-1
    kubectl.run("scale", "statefulset/web", "--replicas=2")
    eventually(lambda: sorted(live(kubectl)) == ["web-0", "web-1"], timeout=60)
    kubectl.run("scale", "statefulset/web", "--replicas=1")
    eventually(lambda: sorted(live(kubectl)) == ["web-0"], timeout=60)
    eventually(lambda: kubectl.json("get", "statefulset", "web")["status"].get(
        "readyReplicas") == 1, timeout=30)

    kubectl.run("delete", "statefulset", "web", "--wait=true", timeout=90)
    eventually(lambda: live(kubectl) == {}, timeout=60)


def images_of(kubectl: Kubectl, app: str) -> set[str]:
    return {p["spec"]["containers"][0]["image"] for p in live(kubectl, app).values()}


def history_rows(kubectl: Kubectl, target: str) -> list[list[str]]:
    """The rows of ``kubectl rollout history`` under its REVISION CHANGE-CAUSE header."""
    lines = [line.split() for line in kubectl.run("rollout", "history", target).stdout
             .splitlines() if line.strip()]
    header = lines.index(["REVISION", "CHANGE-CAUSE"])
    return lines[header + 1:]


def test_rollout_history_and_undo_of_a_statefulset(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=manifests("nginx:1.25", name="hist"))
    rollout_status(kubectl, "statefulset/hist")
    kubectl.run("apply", "-f", "-", input=manifests("nginx:1.26", name="hist"))
    rollout_status(kubectl, "statefulset/hist")
    assert images_of(kubectl, "hist") == {"nginx:1.26"}

    assert [row[0] for row in history_rows(kubectl, "statefulset/hist")] == ["1", "2"]
    first = kubectl.run("rollout", "history", "statefulset/hist", "--revision=1").stdout
    assert "nginx:1.25" in first, first
    assert "nginx:1.26" not in first, first
    table = kubectl.run("get", "controllerrevisions").stdout.splitlines()
    assert table[0].split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    rows = sorted(line.split()[1:3] for line in table[1:]
                  if line.split()[1] == "statefulset.apps/hist")
    assert rows == [["statefulset.apps/hist", "1"], ["statefulset.apps/hist", "2"]]
    sts = kubectl.json("get", "statefulset", "hist")
    revisions = {r["metadata"]["name"]: r for r in kubectl.json(
        "get", "controllerrevisions", "-l", "app=hist")["items"]}
    update = revisions[sts["status"]["updateRevision"]]
    assert update["revision"] == 2
    assert update["metadata"]["ownerReferences"][0]["uid"] == sts["metadata"]["uid"]
    assert update["data"]["spec"]["template"]["$patch"] == "replace"

    out = kubectl.run("rollout", "undo", "statefulset/hist").stdout
    assert "rolled back" in out, out
    rollout_status(kubectl, "statefulset/hist")
    eventually(lambda: images_of(kubectl, "hist") == {"nginx:1.25"}, timeout=90)
    # the first template came back: its revision is renumbered, not copied
    assert [row[0] for row in history_rows(kubectl, "statefulset/hist")] == ["2", "3"]
    sts = kubectl.json("get", "statefulset", "hist")
    back = kubectl.json("get", "controllerrevision", sts["status"]["updateRevision"])
    assert back["revision"] == 3
    assert {p["metadata"]["labels"]["controller-revision-hash"]
            for p in live(kubectl, "hist").values()} == {back["metadata"]["name"]}

    # --to-revision picks one by number: revision 2 (nginx:1.26) becomes revision 4
    out = kubectl.run("rollout", "undo", "statefulset/hist", "--to-revision=2").stdout
    assert "rolled back" in out, out
    rollout_status(kubectl, "statefulset/hist")
    eventually(lambda: images_of(kubectl, "hist") == {"nginx:1.26"}, timeout=90)
    assert [row[0] for row in history_rows(kubectl, "statefulset/hist")] == ["3", "4"]

    kubectl.run("delete", "statefulset", "hist", "--wait=true", timeout=90)
    # the revisions go with their owner (garbage collection)
    eventually(lambda: kubectl.json("get", "controllerrevisions", "-l", "app=hist")[
        "items"] == [], timeout=60)


def daemonset(image: str) -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agentd"},
        "spec": {"selector": {"matchLabels": {"app": "agentd"}},
                 "template": {"metadata": {"labels": {"app": "agentd"}},
                              "spec": {"terminationGracePeriodSeconds": 1,
                                       "containers": [{"name": "d", "image": image}]}}}})


def test_rollout_history_and_undo_of_a_daemonset(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=daemonset("busybox:1.36"))
    rollout_status(kubectl, "daemonset/agentd")
    kubectl.run("apply", "-f", "-", input=daemonset("busybox:1.37"))
    rollout_status(kubectl, "daemonset/agentd")
    eventually(lambda: images_of(kubectl, "agentd") == {"busybox:1.37"}, timeout=60)

    assert [row[0] for row in history_rows(kubectl, "daemonset/agentd")] == ["1", "2"]
    first = kubectl.run("rollout", "history", "daemonset/agentd", "--revision=1").stdout
    assert "busybox:1.36" in first, first
    assert "busybox:1.37" not in first, first
    names = [line.split()[1] for line in
             kubectl.run("get", "controllerrevisions").stdout.splitlines()[1:]]
    assert names.count("daemonset.apps/agentd") == 2

    out = kubectl.run("rollout", "undo", "daemonset/agentd").stdout
    assert "rolled back" in out, out
    eventually(lambda: images_of(kubectl, "agentd") == {"busybox:1.36"}, timeout=90)
    rollout_status(kubectl, "daemonset/agentd")
    assert [row[0] for row in history_rows(kubectl, "daemonset/agentd")] == ["2", "3"]
    # the pods carry the hash label of the revision they were made from
    newest = max(kubectl.json("get", "controllerrevisions", "-l", "app=agentd")["items"],
                 key=lambda r: r["revision"])
    assert {p["metadata"]["labels"]["controller-revision-hash"]
            for p in live(kubectl, "agentd").values()} == {
        newest["metadata"]["labels"]["controller-revision-hash"]}
    kubectl.run("delete", "daemonset", "agentd", "--wait=true", timeout=90)
