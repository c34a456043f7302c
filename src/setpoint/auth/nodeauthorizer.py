"""The Node authorizer: what a node agent may do, decided by what is bound to its node.

As Kubernetes' (``--authorization-mode=Node,RBAC``), for users named ``system:node:NAME``
in the group ``system:nodes`` (anyone else: no opinion):

* **Secrets, ConfigMaps** (get, list, watch of one named object), **PersistentVolumeClaims,
  PersistentVolumes** (get) and **ServiceAccount tokens** (create of
  ``serviceaccounts/NAME/token``): only when a pod bound to the node (``spec.nodeName``)
  references the object — in its volumes (``secret``, ``configMap``, ``projected``
  sources, ``persistentVolumeClaim``), its containers' ``env``/``envFrom``, its
  ``imagePullSecrets``, its ``serviceAccountName``; a PersistentVolume through the claim
  bound to it. Otherwise no opinion, with Kubernetes' reasons (``no relationship found
  between node 'NAME' and this object``, ``can only get individual resources of this
  type``, ...), which become the 403's message when nothing else allows the request.
* **Leases**: get, create, update, patch, delete in ``kube-node-lease`` of the lease named
  after the node (create: the name is checked by NodeRestriction).
* everything else the fixed node rules (:data:`NODE_RULES`) allow: its Node and the
  Nodes' status, the pods (reading, deleting; their status; evictions), Services,
  Endpoints, EndpointSlices, Events, token and access reviews. Which Node, which pod's
  status, which pod is deleted or evicted is NodeRestriction's to check
  (:mod:`setpoint.registry.noderestriction`), as in Kubernetes.

The relationships are asked of a :class:`NodeGraph` (the server's reads its watch cache).
Invariants: the authorizer never allows what the node rules and the graph do not; it never
denies (another authorizer, RBAC, may still allow). Non-guarantee: a pod's references are
seen once the cache has the pod, a moment after it is bound.
"""

from __future__ import annotations

from typing import Final, Protocol

from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes
from setpoint.auth.rbac.authorizer import Decision, Verdict
from setpoint.auth.rbac.rules import PolicyRule

__all__ = ["NODE_LEASE_NAMESPACE", "NODE_RULES", "NodeAuthorizer", "NodeGraph",
           "node_name_of"]

NODE_LEASE_NAMESPACE: Final = "kube-node-lease"


def _rule(verbs: tuple[str, ...], groups: tuple[str, ...], resources: tuple[str, ...]
          ) -> PolicyRule:
    return PolicyRule(verbs, groups, resources)


_READ: Final = ("get", "list", "watch")

#: what every node may do regardless of what is bound to it (Kubernetes' NodeRules)
NODE_RULES: Final = (
    _rule(("create", "get", "list", "watch", "update", "patch", "delete"), ("",), ("nodes",)),
    _rule(("patch", "update"), ("",), ("nodes/status",)),
    _rule(("get", "list", "watch", "delete"), ("",), ("pods",)),
    _rule(("patch", "update"), ("",), ("pods/status",)),
    _rule(("create",), ("",), ("pods/eviction",)),
    _rule(_READ, ("",), ("services", "endpoints")),
    _rule(("create", "patch", "update"), ("", "events.k8s.io"), ("events",)),
    _rule(_READ, ("discovery.k8s.io",), ("endpointslices",)),
    _rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    _rule(("create",), ("authorization.k8s.io",), ("subjectaccessreviews",)),
)

#: the kinds whose access follows the graph: resource -> the kind of vertex
_GRAPH_KINDS: Final = {"secrets": "Secret", "configmaps": "ConfigMap",
                       "persistentvolumeclaims": "PersistentVolumeClaim",
                       "persistentvolumes": "PersistentVolume",
                       "serviceaccounts": "ServiceAccount"}


class NodeGraph(Protocol):
    def related(self, node: str, kind: str, namespace: str, name: str) -> bool:
        """Does a pod bound to ``node`` reference the object (see the module docstring)?"""


def node_name_of(user: users.UserInfo) -> str | None:
    """The node a user is (``system:node:NAME`` in ``system:nodes``); None for anyone else,
    ``""`` for a member of ``system:nodes`` without a node name."""
    if users.NODES_GROUP not in user.groups:
        return None
    if not user.name.startswith(users.NODE_PREFIX):
        return None
    return user.name[len(users.NODE_PREFIX):]


def _no(reason: str) -> Verdict:
    return Verdict(Decision.NO_OPINION, reason)


class NodeAuthorizer:
    """See the module docstring."""

    def __init__(self, graph: NodeGraph) -> None:
        self._graph = graph

    def authorize(self, attrs: Attributes) -> Verdict:
        node = node_name_of(attrs.user)
        if node is None:
            return _no("")
        if not node:
            return _no(f'unknown node for user "{attrs.user.name}"')
        if attrs.resource_request and attrs.api_group == "":
            kind = _GRAPH_KINDS.get(attrs.resource)
            if kind == "ServiceAccount":
                return self._create_token(node, attrs)
            if kind in ("Secret", "ConfigMap"):
                return self._read_namespaced(node, kind, attrs)
            if kind is not None:
                return self._get(node, kind, attrs)
        if attrs.resource_request and attrs.api_group == "coordination.k8s.io" \
                and attrs.resource == "leases":
            return self._lease(node, attrs)
        if any(rule.allows(attrs) for rule in NODE_RULES):
            return Verdict(Decision.ALLOW)
        return _no("")

    def _related(self, node: str, kind: str, attrs: Attributes) -> Verdict:
        if not attrs.name:
            return _no("No Object name found")
        if self._graph.related(node, kind, attrs.namespace, attrs.name):
            return Verdict(Decision.ALLOW)
        return _no(f"no relationship found between node '{node}' and this object")

    def _read_namespaced(self, node: str, kind: str, attrs: Attributes) -> Verdict:
        if attrs.verb not in _READ:
            return _no("can only read resources of this type")
        if attrs.subresource:
            return _no("cannot read subresource")
        if not attrs.namespace:
            return _no("can only read namespaced object of this type")
        return self._related(node, kind, attrs)

    def _get(self, node: str, kind: str, attrs: Attributes) -> Verdict:
        if attrs.verb != "get":
            return _no("can only get individual resources of this type")
        if attrs.subresource:
            return _no("cannot get subresource")
        return self._related(node, kind, attrs)

    def _create_token(self, node: str, attrs: Attributes) -> Verdict:
        if attrs.verb != "create" or not attrs.name:
            return _no("can only create tokens for individual service accounts")
        if attrs.subresource != "token":
            return _no("can only create token subresource of serviceaccount")
        return self._related(node, "ServiceAccount", attrs)

    @staticmethod
    def _lease(node: str, attrs: Attributes) -> Verdict:
        if attrs.verb not in ("get", "create", "update", "patch", "delete"):
            return _no("can only get, create, update, patch, or delete a node lease")
        if attrs.namespace != NODE_LEASE_NAMESPACE:
            return _no(f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system '
                       "namespace")
        if attrs.verb != "create" and attrs.name != node:
            return _no("can only access node lease with the same name as the requesting node")
        return Verdict(Decision.ALLOW)
