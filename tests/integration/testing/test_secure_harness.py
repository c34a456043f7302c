"""``control_plane(secure=True)``: TLS and RBAC in the test harness, so an operator's own
permissions can be tested."""

from __future__ import annotations

from pathlib import Path

import pytest

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.testing import control_plane

ROLE = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
     "metadata": {"name": "cm-reader", "namespace": "shop"},
     "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
     "metadata": {"name": "operator-reads", "namespace": "shop"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
     "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "shop"}]},
]


async def test_a_service_account_gets_only_what_its_role_grants(tmp_path: Path) -> None:
    async with control_plane(tmp_path, secure=True, controllers=()) as cp:
        assert cp.url.startswith("https://")
        await cp.apply(ROLE)
        path = await cp.service_account_kubeconfig("shop/operator")
        async with sp_client.Client(sp_client.load_kubeconfig(path)) as client:
            async def can_list() -> bool:  # once the binding reached the authorizer's cache
                try:
                    listed = await client.list(("v1", "ConfigMap"), namespace="shop")
                except errors.Forbidden:
                    return False
                return listed["items"] == []

            await cp.eventually(can_list)
            with pytest.raises(errors.Forbidden, match="cannot create resource"):
                await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "x", "namespace": "shop"}})
            with pytest.raises(errors.Forbidden, match='in the namespace "default"'):
                await client.list(("v1", "ConfigMap"), namespace="default")


async def test_an_operator_runs_as_its_service_account(tmp_path: Path) -> None:
    refused: list[str] = []

    async def reconcile(request: runtime.Request, ctx: runtime.Context) -> None:
        if request.name.endswith("-copy"):
            return
        try:
            await ctx.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": f"{request.name}-copy",
                                                  "namespace": request.namespace}})
        except errors.Forbidden as e:
            refused.append(e.message)

    operator = runtime.Controller(for_=("v1", "ConfigMap"), reconcile=reconcile
                                  ).with_options(namespace="shop")
    async with control_plane(tmp_path, secure=True, controllers=()) as cp:
        await cp.apply(ROLE)
        manager = await cp.run_operator(operator, service_account="shop/operator")
        await cp.client.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "input", "namespace": "shop"}})
        await cp.eventually(lambda: bool(refused))
        assert refused[0] == ('configmaps is forbidden: User "system:serviceaccount:shop:'
                              'operator" cannot create resource "configmaps" in API group "" '
                              'in the namespace "shop"')
        await cp.stop_operator(manager)
