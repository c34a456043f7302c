"""The Node authorizer's decisions, with a graph of fixed relationships, and the references
a pod makes (what the graph follows)."""

from __future__ import annotations

from setpoint.auth.attributes import Attributes
from setpoint.auth.nodeauthorizer import NodeAuthorizer
from setpoint.auth.rbac.authorizer import Decision
from setpoint.auth.user import UserInfo
from setpoint.registry.nodegraph import references

NODE_A = UserInfo("system:node:a", groups=("system:nodes", "system:authenticated"))


class Graph:
    def __init__(self, *edges: tuple[str, str, str, str]) -> None:
        self.edges = set(edges)

    def related(self, node: str, kind: str, namespace: str, name: str) -> bool:
        return (node, kind, namespace, name) in self.edges


def ask(user: UserInfo, verb: str, resource: str, *, name: str = "", namespace: str = "ns",
        group: str = "", subresource: str = "") -> tuple[Decision, str]:
    verdict = NodeAuthorizer(Graph(("a", "Secret", "ns", "s"),
                                   ("a", "ServiceAccount", "ns", "sa"),
                                   ("a", "PersistentVolume", "", "pv"))).authorize(Attributes(
        user=user, verb=verb, resource_request=True, namespace=namespace, api_group=group,
        resource=resource, subresource=subresource, name=name))
    return verdict.decision, verdict.reason


def test_only_nodes_are_judged() -> None:
    assert ask(UserInfo("bob"), "get", "secrets", name="s") == (Decision.NO_OPINION, "")
    impostor = UserInfo("system:node:a")  # the name without the group
    assert ask(impostor, "get", "secrets", name="s") == (Decision.NO_OPINION, "")
    nameless = UserInfo("system:node:", groups=("system:nodes",))
    assert ask(nameless, "get", "nodes", name="a") == (
        Decision.NO_OPINION, 'unknown node for user "system:node:"')


def test_objects_follow_the_graph() -> None:
    assert ask(NODE_A, "get", "secrets", name="s")[0] is Decision.ALLOW
    assert ask(NODE_A, "watch", "secrets", name="s")[0] is Decision.ALLOW
    assert ask(NODE_A, "get", "secrets", name="other") == (
        Decision.NO_OPINION, "no relationship found between node 'a' and this object")
    assert ask(NODE_A, "update", "secrets", name="s") == (
        Decision.NO_OPINION, "can only read resources of this type")
    assert ask(NODE_A, "list", "secrets") == (Decision.NO_OPINION, "No Object name found")
    assert ask(NODE_A, "get", "secrets", name="s", namespace="") == (
        Decision.NO_OPINION, "can only read namespaced object of this type")
    assert ask(NODE_A, "list", "persistentvolumes") == (
        Decision.NO_OPINION, "can only get individual resources of this type")
    assert ask(NODE_A, "get", "persistentvolumes", name="pv", namespace="")[0] \
        is Decision.ALLOW
    assert ask(NODE_A, "create", "serviceaccounts", name="sa",
               subresource="token")[0] is Decision.ALLOW
    assert ask(NODE_A, "get", "serviceaccounts", name="sa") == (
        Decision.NO_OPINION, "can only create tokens for individual service accounts")


def test_leases_and_fixed_rules() -> None:
    lease = {"group": "coordination.k8s.io", "namespace": "kube-node-lease"}
    assert ask(NODE_A, "update", "leases", name="a", **lease)[0] is Decision.ALLOW
    assert ask(NODE_A, "create", "leases", name="", **lease)[0] is Decision.ALLOW
    assert ask(NODE_A, "update", "leases", name="b", **lease) == (
        Decision.NO_OPINION,
        "can only access node lease with the same name as the requesting node")
    assert ask(NODE_A, "list", "leases", **lease) == (
        Decision.NO_OPINION, "can only get, create, update, patch, or delete a node lease")
    assert ask(NODE_A, "patch", "nodes", name="b", namespace="")[0] is Decision.ALLOW
    assert ask(NODE_A, "patch", "pods", name="p", subresource="status")[0] is Decision.ALLOW
    assert ask(NODE_A, "create", "pods")[0] is Decision.NO_OPINION
    assert ask(NODE_A, "create", "pods", name="p", subresource="exec")[0] \
        is Decision.NO_OPINION
    assert ask(NODE_A, "list", "namespaces", namespace="")[0] is Decision.NO_OPINION


def test_references_of_a_pod() -> None:
    pod = {"metadata": {"name": "p"}, "spec": {
        "serviceAccountName": "runner",
        "imagePullSecrets": [{"name": "pull"}],
        "volumes": [
            {"name": "v1", "secret": {"secretName": "vol-secret"}},
            {"name": "v2", "configMap": {"name": "vol-cm"}},
            {"name": "v3", "persistentVolumeClaim": {"claimName": "claim"}},
            {"name": "v4", "ephemeral": {"volumeClaimTemplate": {}}},
            {"name": "v5", "projected": {"sources": [
                {"secret": {"name": "proj-secret"}}, {"configMap": {"name": "proj-cm"}},
                {"serviceAccountToken": {"path": "token"}}]}}],
        "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
        "containers": [{"name": "c", "env": [
            {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
            {"name": "C", "value": "plain"}],
            "envFrom": [{"configMapRef": {"name": "from-cm"}}]}]}}
    found = {r for r in references(pod) if r[1]}
    assert found == {
        ("ServiceAccount", "runner"), ("Secret", "pull"), ("Secret", "vol-secret"),
        ("ConfigMap", "vol-cm"), ("PersistentVolumeClaim", "claim"),
        ("PersistentVolumeClaim", "p-v4"), ("Secret", "proj-secret"), ("ConfigMap", "proj-cm"),
        ("Secret", "init-env"), ("ConfigMap", "env-cm"), ("Secret", "env-secret"),
        ("ConfigMap", "from-cm")}
    assert ("ServiceAccount", "default") in set(references({"spec": {}}))
