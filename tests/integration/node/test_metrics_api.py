"""metrics.k8s.io through the API of a secured server whose node agent runs simulated pods
(which report zero): discovery, shapes, selectors, namespaces, RBAC, an unreachable node."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import ALL_NAMESPACES, Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig, ServeAgentConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

Obj = dict[str, Any]
NODE_METRICS = ("metrics.k8s.io/v1beta1", "NodeMetrics")
POD_METRICS = ("metrics.k8s.io/v1beta1", "PodMetrics")

pytestmark = pytest.mark.slow


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[tuple[ControlPlane, Client]]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"serviceaccount"}),
        agent=ServeAgentConfig(node_name="node-a", root_dir=tmp_path / "agent",
                               pod_runtime="simulate"),
        controllers_mode="inline")
    async with ControlPlane(config) as cp, Client(load_kubeconfig(kubeconfig)) as c:
        await waiting.eventually(lambda: c.get(("v1", "Node"), "node-a"), timeout=60,
                                 retry_on=(errors.NotFound,))
        yield cp, c


def pod(name: str, namespace: str, labels: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": {"simulate.setpoint.dev/start-after": "0",
                                         "simulate.setpoint.dev/ready-after": "0"}},
            "spec": {"nodeName": "node-a", "containers": [
                {"name": "one", "image": "x"}, {"name": "two", "image": "x"}]}}


async def test_node_and_pod_metrics(plane: tuple[ControlPlane, Client], tmp_path: Path
                                    ) -> None:
    cp, client = plane
    groups = await client.request("GET", "/apis")
    assert any(g["name"] == "metrics.k8s.io" and g["preferredVersion"]["version"] == "v1beta1"
               for g in groups["groups"])
    resources = await client.request("GET", "/apis/metrics.k8s.io/v1beta1")
    assert {(r["name"], r["kind"], r["namespaced"], tuple(r["verbs"]))
            for r in resources["resources"]} == {
        ("nodes", "NodeMetrics", False, ("get", "list")),
        ("pods", "PodMetrics", True, ("get", "list"))}

    await client.create(pod("a", "default", {"app": "a"}))
    await client.create(pod("b", "kube-system", {"app": "b"}))

    async def listed() -> Obj | None:
        got: Obj = await client.list(POD_METRICS, namespace=ALL_NAMESPACES)
        names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in got["items"]}
        return got if {("default", "a"), ("kube-system", "b")} <= names else None

    everything = await waiting.eventually(listed, timeout=60)
    assert everything["kind"] == "PodMetricsList"
    a = next(i for i in everything["items"] if i["metadata"]["name"] == "a")
    assert a["apiVersion"] == "metrics.k8s.io/v1beta1"
    assert a["kind"] == "PodMetrics"
    assert a["metadata"]["labels"] == {"app": "a"}
    assert [c["name"] for c in a["containers"]] == ["one", "two"]  # the spec's order
    assert a["containers"][0]["usage"] == {"cpu": "0n", "memory": "0Ki"}  # simulated
    assert a["timestamp"].endswith("Z")
    assert a["window"].endswith("s")

    in_default = await client.list(POD_METRICS, namespace="default")
    assert [i["metadata"]["name"] for i in in_default["items"]] == ["a"]
    by_label = await client.list(POD_METRICS, namespace=ALL_NAMESPACES,
                                label_selector="app=b")
    assert [i["metadata"]["name"] for i in by_label["items"]] == ["b"]
    by_field = await client.list(POD_METRICS, field_selector="metadata.name=a")
    assert [i["metadata"]["name"] for i in by_field["items"]] == ["a"]
    with pytest.raises(errors.BadRequest, match=r"field label not supported: spec\.x"):
        await client.list(POD_METRICS, field_selector="spec.x=1")
    one = await client.get(POD_METRICS, "b", namespace="kube-system")
    assert one["metadata"]["name"] == "b"
    with pytest.raises(errors.NotFound, match=re.escape(
            'podmetrics.metrics.k8s.io "default/nope" not found')):
        await client.get(POD_METRICS, "nope", namespace="default")
    with pytest.raises(errors.MethodNotAllowed):
        await client.request("GET", "/apis/metrics.k8s.io/v1beta1/pods",
                             params={"watch": "true"})

    nodes = await client.list(NODE_METRICS)
    (node,) = nodes["items"]
    assert node["metadata"]["name"] == "node-a"
    assert node["usage"]["cpu"].endswith("n")
    assert node["usage"]["memory"].endswith("Ki")
    assert int(node["usage"]["memory"][:-2]) > 0  # the machine's own memory in use
    assert (await client.get(NODE_METRICS, "node-a"))["metadata"]["name"] == "node-a"

    # a node whose agent cannot be reached is left out; getting it is NotFound
    await client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gone"}})
    await client.patch_status(("v1", "Node"), "gone", {"status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 1}}}})
    names = [i["metadata"]["name"] for i in (await client.list(NODE_METRICS))["items"]]
    assert names == ["node-a"]
    with pytest.raises(errors.NotFound, match=re.escape(
            'nodemetrics.metrics.k8s.io "gone" not found')):
        await client.get(NODE_METRICS, "gone")

    # RBAC: someone without a binding may not; a viewer may
    secured = cp.server.secured
    assert secured is not None
    config = secured.kubeconfig(cp.server.url, name="someone", user="someone", groups=())
    path = tmp_path / "someone.kubeconfig"
    path.write_text(json.dumps(config))
    async with Client(load_kubeconfig(path)) as someone:
        with pytest.raises(errors.Forbidden, match=re.escape(
                '"someone" cannot list resource "pods" in API group "metrics.k8s.io"')):
            await someone.request("GET", "/apis/metrics.k8s.io/v1beta1/pods")
        await client.create({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "someone-views", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "someone"}]})

        async def allowed() -> Obj | None:
            try:
                got: Obj = await someone.request(
                    "GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods")
            except errors.Forbidden:
                return None
            return got

        seen = await waiting.eventually(allowed, timeout=30)
        assert [i["metadata"]["name"] for i in seen["items"]] == ["a"]
