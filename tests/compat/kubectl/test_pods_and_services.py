"""kubectl and the bottom of the workload hierarchy: Pods, Nodes, Services, Endpoints and
EndpointSlices as kubectl creates, prints, describes, explains, applies, exposes and deletes
them (no agent runs here: pods stay Pending unless a test binds them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.compat.conftest import Kubectl
from tests.conftest import ServeProcess

pytestmark = pytest.mark.compat


def pod_manifest(name: str, containers: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "labels": {"app": name}},
                       # the tests bind it themselves, not the server's scheduler
                       "spec": {"schedulerName": "by-hand", "containers": containers}})


def bind(serve: ServeProcess, name: str, node: str) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                       "target": {"kind": "Node", "name": node}}).encode()
    with serve.urlopen(f"/api/v1/namespaces/default/pods/{name}/binding", data=body,
                       method="POST", headers={"Content-Type": "application/json"}) as r:
        assert r.status == 201


def lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def test_create_get_wide_and_describe_a_pod(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=pod_manifest("web", [
        {"name": "app", "image": "python:3.12", "ports": [{"containerPort": 8080}],
         "env": [{"name": "MODE", "value": "demo"}]}]))
    table = lines(kubectl.run("get", "pods").stdout)
    assert table[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1][:4] == ["web", "0/1", "Pending", "0"]
    wide = kubectl.run("get", "pod", "web", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                               "NOMINATED", "NODE", "READINESS", "GATES"]
    assert wide[1].split()[5:] == ["<none>", "<none>", "<none>", "<none>"]
    described = kubectl.run("describe", "pod", "web").stdout
    assert "Name:             web" in described
    assert "Status:           Pending" in described
    assert "python:3.12" in described
    assert "MODE:  demo" in described
    assert "QoS Class:                   BestEffort" in described
    assert "node.kubernetes.io/not-ready:NoExecute op=Exists for 300s" in described
    got = kubectl.json("get", "pod", "web")
    assert got["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    kubectl.run("delete", "pod", "web")


def test_explain_pods_and_services(kubectl: Kubectl) -> None:
    containers = kubectl.run("explain", "pod.spec.containers").stdout
    assert "KIND:       Pod" in containers
    assert "FIELD: containers <[]Container>" in containers
    assert "imagePullPolicy" in containers
    service = kubectl.run("explain", "service.spec").stdout
    assert "clusterIP\t<string>" in service
    assert "ports\t<[]ServicePort>" in service
    node = kubectl.run("explain", "nodes.spec.taints").stdout
    assert "effect\t<string> -required-" in node
    slices = kubectl.run("explain", "endpointslices.endpoints").stdout
    assert "addresses\t<[]string> -required-" in slices


def test_apply_twice_with_a_changed_container_list(kubectl: Kubectl) -> None:
    first = pod_manifest("applied", [{"name": "app", "image": "python:3.12"}])
    kubectl.run("apply", "-f", "-", input=first)
    # the images change (allowed for a pod), the merge goes by container name
    second = pod_manifest("applied", [{"name": "app", "image": "python:3.13"}])
    kubectl.run("apply", "-f", "-", input=second)
    got = kubectl.json("get", "pod", "applied")
    [container] = got["spec"]["containers"]
    assert container["image"] == "python:3.13"
    # what the server added to the container (the token mount) survives the merge
    assert container["volumeMounts"][0]["mountPath"] == \
        "/var/run/secrets/kubernetes.io/serviceaccount"
    # another container is a change Kubernetes refuses, with its message
    third = pod_manifest("applied", [{"name": "app", "image": "python:3.13"},
                                     {"name": "side", "image": "busybox"}])
    refused = kubectl.run("apply", "-f", "-", input=third, check=False)
    assert refused.returncode != 0
    assert "pod updates may not change fields other than `spec.containers[*].image`" \
        in refused.stderr
    kubectl.run("delete", "pod", "applied")


def test_a_bound_pod_stays_terminating_until_forced(kubectl: Kubectl,
                                                     serve: ServeProcess) -> None:
    kubectl.run("create", "-f", "-", input=pod_manifest("bound", [
        {"name": "app", "image": "python:3.12"}]))
    bind(serve, "bound", "node-a")
    out = kubectl.run("delete", "pod", "bound", "--wait=false").stdout
    assert 'pod "bound" deleted' in out
    row = lines(kubectl.run("get", "pod", "bound").stdout)[1]
    assert row[2] == "Terminating"
    got = kubectl.json("get", "pod", "bound")
    assert got["metadata"]["deletionGracePeriodSeconds"] == 30
    forced = kubectl.run("delete", "pod", "bound", "--grace-period=0", "--force")
    assert "Immediate deletion does not wait for confirmation" in forced.stderr
    missing = kubectl.run("get", "pod", "bound", check=False)
    assert 'pods "bound" not found' in missing.stderr


def test_expose_and_the_kubernetes_service(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=pod_manifest("exposed", [
        {"name": "app", "image": "python:3.12", "ports": [{"containerPort": 8080}]}]))
    kubectl.run("expose", "pod", "exposed", "--port=80", "--target-port=8080")
    svc = kubectl.json("get", "service", "exposed")
    assert svc["spec"]["selector"] == {"app": "exposed"}
    assert svc["spec"]["clusterIP"].startswith("10.")
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    table = lines(kubectl.run("get", "svc").stdout)
    assert table[0] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    rows = {row[0]: row for row in table[1:]}
    assert rows["exposed"][1:5] == ["ClusterIP", svc["spec"]["clusterIP"], "<none>",
                                    "80/TCP"]
    assert rows["kubernetes"][1:5] == ["ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    kubectl.run("expose", "pod", "exposed", "--name=exposed-np", "--port=81",
                "--type=NodePort")
    np = kubectl.json("get", "service", "exposed-np")
    assert 30000 <= np["spec"]["ports"][0]["nodePort"] <= 32767
    endpoints = lines(kubectl.run("get", "endpoints", "kubernetes").stdout)
    assert endpoints[0] == ["NAME", "ENDPOINTS", "AGE"]
    assert endpoints[1][1].startswith("127.0.0.1:")
    slices = lines(kubectl.run("get", "endpointslices").stdout)
    assert slices[0] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    by_name = {row[0]: row for row in slices[1:]}
    assert by_name["kubernetes"][1:3] == ["IPv4", str(endpoints[1][1].rsplit(":", 1)[1])]
    kubectl.run("delete", "service", "exposed", "exposed-np")
    kubectl.run("delete", "pod", "exposed")


def test_nodes(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                   "nodeInfo": {"kubeletVersion": "v1.32.0"}}}))
    kubectl.run("cordon", "worker-1")
    table = lines(kubectl.run("get", "nodes", "-o", "wide").stdout)
    assert table[0][:6] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP"]
    row = {r[0]: r for r in table[1:]}["worker-1"]  # beside the server's own node
    assert row[1] == "Ready,SchedulingDisabled"
    assert row[4:6] == ["v1.32.0", "10.0.0.7"]
    kubectl.run("taint", "node", "worker-1", "dedicated=db:NoSchedule")
    taints = kubectl.json("get", "node", "worker-1")["spec"]["taints"]
    # (the node lifecycle controller may add node.kubernetes.io/unschedulable beside it)
    assert {"key": "dedicated", "value": "db", "effect": "NoSchedule"} in taints
    kubectl.run("delete", "node", "worker-1")
