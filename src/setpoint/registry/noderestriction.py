"""NodeRestriction: the writes a node agent may make are about itself and its own pods.

Kubernetes' admission plugin of that name, for requests of ``system:node:NAME`` (in
``system:nodes``); everyone else passes untouched. With Kubernetes' messages (403):

=====================  ==========================================================================
write                  allowed when
=====================  ==========================================================================
Node (create, update,  its name is the node's (``node "A" is not allowed to modify node "B"``);
status, delete)        no label under ``node-restriction.kubernetes.io/`` is set or changed
                       (``node "A" is not allowed to set the following labels: ...`` /
                       ``is not allowed to modify labels: ...``); an update leaves
                       ``spec.taints`` as they are (``node "A" is not allowed to modify
                       taints``)
pod status             the pod is bound to the node (``node "A" can only update pod status for
                       pods with their own node name``)
pod delete, eviction   the pod is bound to the node (``node "A" can only delete pods with
                       spec.nodeName set to itself`` / ``... evict ...``)
Lease                  in ``kube-node-lease``, named after the node (``can only access node
                       lease with the same name as the requesting node``)
TokenRequest           bound to a pod (``boundObjectRef`` kind Pod, with a name and a uid) that
                       exists with that uid and is bound to the node (``node requested token
                       not bound to a pod``, ``... bound to a pod scheduled on a different
                       node``)
=====================  ==========================================================================

Deviation: Kubernetes also forbids a node to set labels of the ``kubernetes.io`` and
``k8s.io`` domains outside the kubelet's own set; setpoint's agent marks the server's node
``node-role.kubernetes.io/control-plane``, so only the ``node-restriction.kubernetes.io/``
prefix is protected. Mirror pods do not exist here: a node may not create pods at all (the
Node authorizer does not allow it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from setpoint.apimachinery import errors
from setpoint.auth.nodeauthorizer import NODE_LEASE_NAMESPACE, node_name_of
from setpoint.auth.user import UserInfo
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.store import Admission, Store

__all__ = ["check_eviction", "check_token_request", "install"]

Obj = Mapping[str, Any]

RESTRICTED_LABEL_PREFIX: Final = "node-restriction.kubernetes.io/"


def _forbidden(resource: str, group: str, name: str, message: str) -> errors.Forbidden:
    what = f"{resource}.{group}" if group else resource
    subject = f'{what} "{name}"' if name else what
    return errors.Forbidden(f"{subject} is forbidden: {message}",
                            details={"name": name, "group": group, "kind": resource})


def _node(user: UserInfo | None) -> str | None:
    return node_name_of(user) if user is not None else None


def _labels(obj: Obj | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("labels") or {}


def _restricted(keys: set[str]) -> list[str]:
    return sorted(k for k in keys if k.startswith(RESTRICTED_LABEL_PREFIX))


async def _admit_node(new: Obj | None, old: Obj | None, attrs: AdmissionAttributes) -> None:
    node = _node(attrs.user)
    if node is None:
        return
    if attrs.name != node:
        raise _forbidden("nodes", "", attrs.name,
                         f'node "{node}" is not allowed to modify node "{attrs.name}"')
    if attrs.operation == "CREATE":
        bad = _restricted(set(_labels(new)))
        if bad:
            raise _forbidden("nodes", "", attrs.name, f'node "{node}" is not allowed to set '
                                                      f"the following labels: {', '.join(bad)}")
    elif attrs.operation == "UPDATE" and new is not None and old is not None:
        if ((new.get("spec") or {}).get("taints") or []) != \
                ((old.get("spec") or {}).get("taints") or []):
            raise _forbidden("nodes", "", attrs.name,
                             f'node "{node}" is not allowed to modify taints')
        before, after = _labels(old), _labels(new)
        changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
        bad = _restricted(changed)
        if bad:
            raise _forbidden("nodes", "", attrs.name,
                             f"is not allowed to modify labels: {', '.join(bad)}")


def _pod_node(pod: Obj | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


async def _admit_pod(new: Obj | None, old: Obj | None, attrs: AdmissionAttributes) -> None:
    node = _node(attrs.user)
    if node is None:
        return
    if attrs.operation == "UPDATE" and attrs.subresource == "status":
        if _pod_node(old) != node:
            raise _forbidden("pods", "", attrs.name, f'node "{node}" can only update pod '
                                                     "status for pods with their own node name")
    elif attrs.operation == "DELETE":
        if _pod_node(old) != node:
            raise _forbidden("pods", "", attrs.name, f'node "{node}" can only delete pods '
                                                     "with spec.nodeName set to itself")
    elif attrs.operation == "CREATE":
        raise _forbidden("pods", "", attrs.name, f'node "{node}" can only create mirror '
                                                 "pods, and this server has none")


async def _admit_lease(new: Obj | None, old: Obj | None, attrs: AdmissionAttributes) -> None:
    node = _node(attrs.user)
    if node is None:
        return
    if attrs.namespace != NODE_LEASE_NAMESPACE:
        raise _forbidden("leases", "coordination.k8s.io", attrs.name,
                         f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system '
                         "namespace")
    if attrs.name != node:
        raise _forbidden("leases", "coordination.k8s.io", attrs.name,
                         "can only access node lease with the same name as the requesting "
                         "node")


def install(nodes: Store, pods: Store, leases: Store) -> None:
    """Add the admission checks to the stores of Nodes, Pods and Leases."""
    hooks: tuple[tuple[Store, Admission], ...] = (
        (nodes, _admit_node), (pods, _admit_pod), (leases, _admit_lease))
    for store, hook in hooks:
        store.admission.append(hook)


def check_eviction(user: UserInfo, pod: Obj) -> None:
    """Raise 403 when a node evicts a pod that is not bound to it."""
    node = _node(user)
    if node is not None and _pod_node(pod) != node:
        name = str((pod.get("metadata") or {}).get("name") or "")
        raise _forbidden("pods", "", name, f'node "{node}" can only evict pods with '
                                           "spec.nodeName set to itself")


def check_token_request(user: UserInfo, account: str, body: Any,
                        pod_of: Any) -> None:
    """Raise 403 unless a node's TokenRequest is bound to a pod of the node.

    ``pod_of(name)`` is the pod of that name in the account's namespace, or None.
    """
    node = _node(user)
    if node is None:
        return
    spec = (body.get("spec") if isinstance(body, Mapping) else None) or {}
    ref = spec.get("boundObjectRef") if isinstance(spec, Mapping) else None
    if not isinstance(ref, Mapping) or ref.get("apiVersion") != "v1" \
            or ref.get("kind") != "Pod" or not ref.get("name"):
        raise _forbidden("serviceaccounts", "", account,
                         "node requested token not bound to a pod")
    if not ref.get("uid"):
        raise _forbidden("serviceaccounts", "", account,
                         "node requested token with a pod binding without a uid")
    pod = pod_of(str(ref["name"]))
    if pod is None:
        raise errors.not_found("pods", "", str(ref["name"]))
    if str((pod.get("metadata") or {}).get("uid") or "") != str(ref["uid"]):
        raise _forbidden("serviceaccounts", "", account,
                         f"the UID in the bound object reference ({ref['uid']}) does not "
                         "match the UID in record. The object might have been deleted and "
                         "then recreated")
    if _pod_node(pod) != node:
        raise _forbidden("serviceaccounts", "", account,
                         "node requested token bound to a pod scheduled on a different node")
