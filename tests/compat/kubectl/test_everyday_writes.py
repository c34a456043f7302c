"""Everyday kubectl writes whose result depends on server semantics: concurrent labels,
the field managers kubectl's commands are recorded under, namespace labels, event tables."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.compat.conftest import Kubectl
from tests.integration.api.helpers import CRD_V1

pytestmark = pytest.mark.compat


def test_six_parallel_labels_all_succeed(kubectl: Kubectl) -> None:
    kubectl.run("create", "configmap", "labelled", "--from-literal=k=v")

    def label(i: int) -> subprocess.CompletedProcess[str]:
        return kubectl.run("label", "configmap", "labelled", f"team{i}=t{i}", check=False)

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(label, range(6)))
    failed = [r.stderr for r in results if r.returncode != 0]
    assert not failed, failed
    labels = kubectl.json("get", "configmap", "labelled")["metadata"]["labels"]
    assert labels == {f"team{i}": f"t{i}" for i in range(6)}
    kubectl.run("delete", "configmap", "labelled")


def test_scale_is_recorded_as_kubectl_through_the_scale_subresource(kubectl: Kubectl) -> None:
    # kubectl scale sends no fieldManager; Kubernetes names the manager after the
    # User-Agent's program ("kubectl/v1.32.4 ...") and records the /scale subresource
    kubectl.run("apply", "-f", "-", input=json.dumps(CRD_V1))
    kubectl.run("wait", "--for=condition=Established",
                "customresourcedefinition/widgets.example.com", "--timeout=10s")
    kubectl.run("create", "-f", "-", input=json.dumps({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "scaled"},
        "spec": {"size": 1, "replicas": 1}}))
    kubectl.run("scale", "widget", "scaled", "--replicas=3")
    obj = kubectl.json("get", "widget", "scaled", "--show-managed-fields")
    assert obj["spec"]["replicas"] == 3
    entries = {(e["manager"], e["operation"], e.get("subresource", "")): e
               for e in obj["metadata"]["managedFields"]}
    assert set(entries) == {("kubectl-create", "Update", ""), ("kubectl", "Update", "scale")}
    assert entries["kubectl", "Update", "scale"]["fieldsV1"] == {
        "f:spec": {"f:replicas": {}}}
    kubectl.run("delete", "widget", "scaled")


def test_namespaces_carry_their_name_label(kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "labelled-ns")
    labels = kubectl.json("get", "namespace", "labelled-ns")["metadata"]["labels"]
    assert labels == {"kubernetes.io/metadata.name": "labelled-ns"}
    assert kubectl.json("get", "namespace", "default")["metadata"]["labels"] == {
        "kubernetes.io/metadata.name": "default"}
    # the label follows the name whatever a client writes
    kubectl.run("label", "namespace", "labelled-ns", "kubernetes.io/metadata.name=other",
                "team=a", "--overwrite")
    labels = kubectl.json("get", "namespace", "labelled-ns")["metadata"]["labels"]
    assert labels == {"kubernetes.io/metadata.name": "labelled-ns", "team": "a"}
    kubectl.run("label", "namespace", "labelled-ns", "kubernetes.io/metadata.name-")
    labels = kubectl.json("get", "namespace", "labelled-ns")["metadata"]["labels"]
    assert labels["kubernetes.io/metadata.name"] == "labelled-ns"
    selected = kubectl.run("get", "namespaces", "-l",
                           "kubernetes.io/metadata.name=labelled-ns", "-o", "name").stdout
    assert selected.split() == ["namespace/labelled-ns"]
    kubectl.run("delete", "namespace", "labelled-ns", "--wait=false")


def test_events_k8s_io_table_shows_object_and_message(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=json.dumps({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "new-style"}, "eventTime": "2024-01-02T03:04:05.000000Z",
        "reportingController": "example.com/ctl", "reportingInstance": "ctl-1",
        "action": "Sync", "reason": "Synced", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": "cm-1", "namespace": "default"},
        "note": "synced the config map"}))
    for resource in ("events.events.k8s.io", "events"):
        lines = kubectl.run("get", resource, "--field-selector",
                            "metadata.name=new-style").stdout.splitlines()
        assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
        assert lines[1].split()[1:] == ["Normal", "Synced", "configmap/cm-1", "synced", "the",
                                        "config", "map"]
    wide = kubectl.run("get", "events.events.k8s.io", "-o", "wide", "--field-selector",
                       "metadata.name=new-style").stdout.splitlines()
    assert wide[0].split()[-6:] == ["SOURCE", "MESSAGE", "FIRST", "SEEN", "COUNT", "NAME"]
    assert "example.com/ctl, ctl-1" in wide[1]
    assert wide[1].split()[-2:] == ["1", "new-style"]
    kubectl.run("delete", "events.events.k8s.io", "new-style")
