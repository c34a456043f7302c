"""The Node authorizer and NodeRestriction on a secured server: two node identities, pods
bound to each, and what each node may read and write (Kubernetes' messages)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting
from tests.integration.api.helpers import secured_config

Obj = dict[str, Any]
POD = ("v1", "Pod")
NODE = ("v1", "Node")
SECRET = ("v1", "Secret")
LEASE = ("coordination.k8s.io/v1", "Lease")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(secured_config(tmp_path)) as srv:
        yield srv


async def node_client(server: Server, tmp_path: Path, node: str) -> Client:
    secured = server.secured
    assert secured is not None
    path = tmp_path / f"{node}.kubeconfig"
    path.write_text(json.dumps(secured.node_kubeconfig(server.url, node)))
    return Client(load_kubeconfig(path))


def pod(name: str, node: str, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}], **spec}}


def forbidden(message: str) -> Any:
    return pytest.raises(errors.Forbidden, match=re.escape(message))


async def test_nodes_reach_only_what_their_own_pods_use(server: Server, tmp_path: Path
                                                        ) -> None:
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin, \
            await node_client(server, tmp_path, "node-a") as a, \
            await node_client(server, tmp_path, "node-b") as b:
        for name in ("node-a", "node-b"):
            await admin.create({"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name}})
        await admin.create({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "only-a"}, "stringData": {"k": "v"}})
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "env-of-a"}, "data": {"k": "v"}})
        await admin.create(pod("on-a", "node-a",
                               volumes=[{"name": "s", "secret": {"secretName": "only-a"}}],
                               containers=[{"name": "c", "image": "x", "envFrom": [
                                   {"configMapRef": {"name": "env-of-a"}}]}]))
        on_b = await admin.create(pod("on-b", "node-b"))
        on_a = await admin.get(POD, "on-a", namespace="default")

        # reads follow the pods: node-a reads its pod's Secret and ConfigMap, node-b cannot
        got = await waiting.eventually(
            lambda: a.get(SECRET, "only-a", namespace="default"), timeout=10,
            retry_on=(errors.Forbidden,))
        assert got["data"] == {"k": "dg=="}
        assert (await a.get(("v1", "ConfigMap"), "env-of-a",
                            namespace="default"))["data"] == {"k": "v"}
        with forbidden('secrets "only-a" is forbidden: User "system:node:node-b" cannot get '
                       'resource "secrets" in API group "" in the namespace "default": no '
                       "relationship found between node 'node-b' and this object"):
            await b.get(SECRET, "only-a", namespace="default")
        with forbidden("no relationship found between node 'node-b' and this object"):
            await b.get(("v1", "ConfigMap"), "env-of-a", namespace="default")
        with forbidden("can only read resources of this type"):
            await a.delete(SECRET, "only-a", namespace="default")
        with forbidden("No Object name found"):
            await a.list(SECRET, namespace="default")
        # the relationship ends with the pod
        await admin.delete(POD, "on-a", namespace="default", grace_period_seconds=0)

        async def revoked() -> bool:
            try:
                await a.get(SECRET, "only-a", namespace="default")
            except errors.Forbidden:
                return True
            return False

        await waiting.eventually(revoked, timeout=10)
        on_a = await admin.create(pod("on-a", "node-a"))

        # Nodes: each writes only its own
        await a.patch(NODE, "node-a", {"metadata": {"labels": {"mine": "yes"}}})
        with forbidden('nodes "node-a" is forbidden: node "node-b" is not allowed to modify '
                       'node "node-a"'):
            await b.patch(NODE, "node-a", {"metadata": {"labels": {"stolen": "yes"}}})
        with forbidden('node "node-b" is not allowed to modify node "node-a"'):
            await b.patch_status(NODE, "node-a", {"status": {"phase": "Running"}})
        with forbidden('node "node-b" is not allowed to modify node "node-a"'):
            await b.delete(NODE, "node-a")
        with forbidden('node "node-a" is not allowed to modify taints'):
            await a.patch(NODE, "node-a", {"spec": {"taints": [
                {"key": "k", "effect": "NoSchedule"}]}})
        with forbidden("is not allowed to modify labels: node-restriction.kubernetes.io/x"):
            await a.patch(NODE, "node-a", {"metadata": {"labels": {
                "node-restriction.kubernetes.io/x": "1"}}})

        # pods: status and deletion of its own pods only; no pods of its own making
        status = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
        await a.patch_status(POD, "on-a", status, namespace="default")
        with forbidden('pods "on-a" is forbidden: node "node-b" can only update pod status '
                       "for pods with their own node name"):
            await b.patch_status(POD, "on-a", status, namespace="default")
        with forbidden('node "node-b" can only delete pods with spec.nodeName set to itself'):
            await b.delete(POD, "on-a", namespace="default")
        with forbidden('node "node-b" can only evict pods with spec.nodeName set to itself'):
            await b.request("POST", "/api/v1/namespaces/default/pods/on-a/eviction",
                            body={"apiVersion": "policy/v1", "kind": "Eviction",
                                  "metadata": {"name": "on-a", "namespace": "default"}})
        with forbidden('User "system:node:node-a" cannot create resource "pods"'):
            await a.create(pod("made-by-a", "node-a"))

        # leases: its own, in kube-node-lease
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "node-a", "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": "node-a"}}
        await a.create(lease)
        with forbidden("can only access node lease with the same name as the requesting "
                       "node"):
            await b.create(lease)
        with forbidden("can only access node lease with the same name as the requesting "
                       "node"):
            await b.get(LEASE, "node-a", namespace="kube-node-lease")
        with forbidden('can only access leases in the "kube-node-lease" system namespace'):
            await a.get(LEASE, "node-a", namespace="default")

        # tokens: for a pod of its own, bound to it
        def token_request(p: Obj) -> Obj:
            return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                "name": p["metadata"]["name"],
                                                "uid": p["metadata"]["uid"]}}}

        for account in ("default", "other"):
            with contextlib.suppress(errors.AlreadyExists):  # the controller may have made it
                await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": account}})
        path = "/api/v1/namespaces/default/serviceaccounts/default/token"
        answer = await waiting.eventually(
            lambda: a.request("POST", path, body=token_request(on_a)), timeout=10,
            retry_on=(errors.Forbidden,))
        assert answer["status"]["token"]
        with forbidden("node requested token bound to a pod scheduled on a different node"):
            await b.request("POST", path, body=token_request(on_a))
        assert (await b.request("POST", path, body=token_request(on_b)))["status"]["token"]
        with forbidden("node requested token not bound to a pod"):
            await a.request("POST", path, body={
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {}})
        with forbidden("no relationship found between node 'node-a' and this object"):
            await a.request("POST", "/api/v1/namespaces/default/serviceaccounts/other/token",
                            body=token_request(on_a))


async def test_old_data_directories_stop_binding_every_node(tmp_path: Path) -> None:
    storage = StorageConfig(kind="sqlite", path=tmp_path / "state.db")
    config = ServerConfig(port=0, storage=storage, kubeconfig_path=tmp_path / "kubeconfig",
                          security=SecurityConfig(pki_dir=tmp_path / "pki"))
    async with Server(config), Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        binding = await admin.get(("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                                  "system:node")
        assert binding.get("subjects") in (None, [])
        binding["subjects"] = [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "someone"}]
        await admin.update(binding)
    async with Server(config), Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        binding = await admin.get(("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
                                  "system:node")
        assert [s["name"] for s in binding["subjects"]] == ["someone"]


async def test_a_node_lists_and_watches_one_object_its_pods_use(server: Server, tmp_path: Path
                                                                ) -> None:
    """``fieldSelector=metadata.name=NAME`` names the object, as in Kubernetes: the agent
    follows a ConfigMap its pods use with a watch of that one object."""
    configmap = ("v1", "ConfigMap")
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin, \
            await node_client(server, tmp_path, "node-a") as a, \
            await node_client(server, tmp_path, "node-b") as b:
        for name in ("used", "unused"):
            await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": name}, "data": {"k": name}})
        await admin.create(pod("on-a", "node-a", volumes=[
            {"name": "v", "configMap": {"name": "used"}}]))

        listed = await waiting.eventually(
            lambda: a.list(configmap, namespace="default",
                           field_selector="metadata.name=used"),
            timeout=10, retry_on=(errors.Forbidden,))
        assert [i["metadata"]["name"] for i in listed["items"]] == ["used"]
        async with a.watch(configmap, namespace="default", field_selector="metadata.name=used",
                           resource_version="0") as events:
            first = await anext(aiter(events))
            assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "used")

        with forbidden('configmaps "unused" is forbidden: User "system:node:node-a" cannot '
                       'list resource "configmaps" in API group "" in the namespace "default": '
                       "no relationship found between node 'node-a' and this object"):
            await a.list(configmap, namespace="default", field_selector="metadata.name=unused")
        with forbidden("no relationship found between node 'node-b' and this object"):
            await b.list(configmap, namespace="default", field_selector="metadata.name=used")
        for selector in ("metadata.name!=used", "metadata.namespace=default"):
            with forbidden("No Object name found"):
                await a.list(configmap, namespace="default", field_selector=selector)
