"""Objects every cluster starts with, created or completed at each start.

* the RBAC bootstrap policy (:mod:`setpoint.auth.rbac.bootstrap`): missing roles and bindings
  are created; existing ones marked ``rbac.authorization.kubernetes.io/autoupdate: "true"``
  get the rules and subjects they lack (nothing is ever removed, and an administrator who
  set the annotation to ``"false"`` keeps their changes), as kube-apiserver's
  ``rbac/bootstrap-roles`` start-up hook does;
* the ServiceAccounts the built-in controllers act as, in ``kube-system``.

Invariants: idempotent (a second run writes nothing); written as the server itself (no
escalation checks: it grants the policy the cluster is defined by).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from setpoint.apimachinery import errors
from setpoint.auth.rbac import aggregation
from setpoint.auth.rbac import bootstrap as policy
from setpoint.auth.user import NODES_GROUP
from setpoint.registry.catalog import Catalog
from setpoint.registry.options import WriteOptions
from setpoint.registry.store import Store

log = logging.getLogger(__name__)

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
MANAGER = "setpoint-bootstrap"


def _merged(current: Obj, wanted: Obj, key: str) -> list[Any] | None:
    """``current[key]`` with what ``wanted[key]`` has that it lacks; None when nothing lacks."""
    have = list(current.get(key) or [])
    missing = [item for item in wanted.get(key) or [] if item not in have]
    return have + missing if missing else None


async def _reconcile(store: Store, wanted: Obj, keys: tuple[str, ...]) -> str:
    name = wanted["metadata"]["name"]
    opts = WriteOptions(field_manager=MANAGER)
    try:
        current = await store.get(None, name, "v1")
    except errors.NotFound:
        try:
            await store.create(None, wanted, "v1", opts)
        except errors.AlreadyExists:
            return "kept"
        return "created"
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    if annotations.get(policy.AUTOUPDATE) == "false":
        return "kept"
    updated = dict(current)
    changed = False
    for key in keys:
        merged = _merged(current, wanted, key)
        if merged is not None:
            updated[key] = merged
            changed = True
    if "aggregationRule" in wanted and current.get("aggregationRule") is None:
        updated["aggregationRule"] = wanted["aggregationRule"]
        changed = True
    if not changed:
        return "kept"
    try:
        await store.update(None, name, updated, "v1", opts)
    except errors.Conflict:
        return "kept"  # someone else reconciled it meanwhile (another server)
    return "updated"


async def _unbind_nodes(bindings: Store) -> None:
    """Data directories of servers that bound ``system:node`` to every node
    (``system:nodes``) lose that subject: the Node authorizer now decides what each node
    may do, and the binding would let any node read every Secret. Other subjects stay."""
    try:
        current = await bindings.get(None, "system:node", "v1")
    except errors.NotFound:
        return
    subjects = current.get("subjects") or []
    kept = [s for s in subjects if not (s.get("kind") == "Group"
                                        and s.get("name") == NODES_GROUP)]
    if len(kept) == len(subjects):
        return
    updated = dict(current)
    updated["subjects"] = kept
    with contextlib.suppress(errors.Conflict):
        await bindings.update(None, "system:node", updated, "v1",
                              WriteOptions(field_manager=MANAGER))
        log.info("the system:node ClusterRoleBinding no longer binds every node")


def _aggregated(roles: list[Obj]) -> list[Obj]:
    """The bootstrap roles with aggregated rules filled in, so that ``admin``, ``edit`` and
    ``view`` grant from the first request (the aggregation controller keeps them current
    afterwards, when other roles join them). Aggregation chains (view into edit into
    admin), so it is applied until nothing changes."""
    for _ in range(len(roles)):
        changed = False
        for role in roles:
            rules = aggregation.aggregated_rules(role, roles)
            if rules is not None and rules != role["rules"]:
                role["rules"] = rules
                changed = True
        if not changed:
            break
    return roles


async def ensure(catalog: Catalog) -> None:
    """Create or complete the bootstrap objects (see the module docstring)."""
    counts: dict[str, int] = {}
    roles = catalog.store(RBAC, "clusterroles")
    for role in _aggregated(policy.cluster_roles()):
        outcome = await _reconcile(roles, role, ("rules",))
        counts[outcome] = counts.get(outcome, 0) + 1
    bindings = catalog.store(RBAC, "clusterrolebindings")
    for binding in policy.cluster_role_bindings():
        outcome = await _reconcile(bindings, binding, ("subjects",))
        counts[outcome] = counts.get(outcome, 0) + 1
    await _unbind_nodes(bindings)
    accounts = catalog.store("", "serviceaccounts")
    for account in policy.CONTROLLER_ACCOUNTS.values():
        try:
            await accounts.create("kube-system", {
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": "kube-system"}}, "v1",
                WriteOptions(field_manager=MANAGER))
        except errors.AlreadyExists:
            pass
    if counts.get("created") or counts.get("updated"):
        log.info("RBAC bootstrap policy: %d created, %d updated", counts.get("created", 0),
                 counts.get("updated", 0))
