"""The RBAC bootstrap policy: created at start, completed at every start, never clobbered."""

from __future__ import annotations

from setpoint.auth.rbac import bootstrap as policy
from setpoint.registry import bootstrap
from setpoint.registry.options import ListOptions, WriteOptions
from setpoint.server.server import Server

RBAC = "rbac.authorization.k8s.io"


async def versions(server: Server) -> dict[str, str]:
    assert server.catalog is not None
    out = {}
    for resource in ("clusterroles", "clusterrolebindings"):
        page = await server.catalog.store(RBAC, resource).list(None, "v1", ListOptions())
        out.update({f"{resource}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                    for o in page.items})
    return out


async def test_a_second_start_writes_nothing(server: Server) -> None:
    assert server.catalog is not None
    before = await versions(server)
    assert {f"clusterroles/{r['metadata']['name']}" for r in policy.cluster_roles()} <= set(before)
    await bootstrap.ensure(server.catalog)
    assert await versions(server) == before


async def test_removed_rules_come_back_unless_autoupdate_is_off(server: Server) -> None:
    assert server.catalog is not None
    store = server.catalog.store(RBAC, "clusterroles")
    view = await store.get(None, "system:basic-user", "v1")
    await store.update(None, "system:basic-user", {**view, "rules": []}, "v1", WriteOptions())
    await bootstrap.ensure(server.catalog)
    restored = await store.get(None, "system:basic-user", "v1")
    assert restored["rules"] == view["rules"]
    annotations = {**restored["metadata"]["annotations"], policy.AUTOUPDATE: "false"}
    await store.update(None, "system:basic-user", {
        **restored, "rules": [], "metadata": {**restored["metadata"],
                                              "annotations": annotations}}, "v1", WriteOptions())
    await bootstrap.ensure(server.catalog)
    assert (await store.get(None, "system:basic-user", "v1"))["rules"] == []


async def test_admin_edit_and_view_are_aggregated_from_the_start(server: Server) -> None:
    assert server.catalog is not None
    store = server.catalog.store(RBAC, "clusterroles")
    view = await store.get(None, "view", "v1")
    edit = await store.get(None, "edit", "v1")
    assert any("configmaps" in r.get("resources", []) for r in view["rules"])
    assert all(rule in edit["rules"] for rule in view["rules"])
