"""The namespace lifecycle and CRD cleanup in an in-process control plane."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, NoMatchError
from tests.integration.controllers.conftest import (
    CM,
    GADGET,
    HOLD,
    NAMESPACE,
    SECRET,
    WIDGET,
    crd,
    eventually,
    get_or_none,
    gone,
    install,
    make,
    owner_ref,
    remove_finalizer,
)

pytestmark = pytest.mark.usefixtures("kinds")

Obj = dict[str, Any]
CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")


def conditions(obj: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def test_a_deleted_namespace_is_emptied_then_goes(client: Client) -> None:
    await client.create(make(NAMESPACE, "work", namespace=None))
    owner = await client.create(make(WIDGET, "w", namespace="work"))
    await client.create(make(CM, "c1", namespace="work", owners=[owner_ref(owner)]))
    await client.create(make(CM, "c2", namespace="work", finalizers=[HOLD]))
    await client.create(make(SECRET, "s", namespace="work", stringData={"a": "b"}))
    await client.create(make(GADGET, "g", namespace="work", finalizers=[HOLD]))
    await client.create(make(CM, "bystander"))
    stored = await client.delete(NAMESPACE, "work")
    assert stored["status"]["phase"] == "Terminating"

    async def only_held_left() -> bool:
        ns = await client.get(NAMESPACE, "work")
        found = conditions(ns)
        remaining = found.get("NamespaceContentRemaining", {})
        return remaining.get("status") == "True" and "widgets" not in remaining["message"] \
            and "secrets" not in remaining["message"]

    await eventually(only_held_left, what="only the held objects left")
    ns = await client.get(NAMESPACE, "work")
    found = conditions(ns)
    assert found["NamespaceContentRemaining"]["reason"] == "SomeResourcesRemain"
    assert found["NamespaceContentRemaining"]["message"] == (
        "Some resources are remaining: configmaps. has 1 resource instances, "
        "gadgets.example.com has 1 resource instances")
    assert found["NamespaceFinalizersRemaining"] == {
        **found["NamespaceFinalizersRemaining"], "status": "True",
        "reason": "SomeFinalizersRemain",
        "message": "Some content in the namespace has finalizers remaining: example.com/hold "
                   "in 2 resource instances"}
    assert found["NamespaceDeletionContentFailure"]["status"] == "False"
    assert found["NamespaceDeletionContentFailure"]["reason"] == "ContentDeleted"
    assert found["NamespaceDeletionDiscoveryFailure"]["reason"] == "ResourcesDiscovered"
    assert ns["spec"]["finalizers"] == ["kubernetes"]
    # nothing new may be created meanwhile
    with pytest.raises(errors.Forbidden, match="because it is being terminated"):
        await client.create(make(CM, "late", namespace="work"))
    with pytest.raises(errors.Forbidden):
        await client.create(make(WIDGET, "late", namespace="work"))
    await remove_finalizer(client, CM, "c2", HOLD, namespace="work")
    await remove_finalizer(client, GADGET, "g", HOLD, namespace="work")
    await gone(client, NAMESPACE, "work", namespace=None)
    assert await get_or_none(client, CM, "bystander") is not None


async def test_a_namespace_finalizer_of_someone_else_keeps_it(client: Client) -> None:
    ns = make(NAMESPACE, "shared", namespace=None)
    ns["spec"] = {"finalizers": ["example.com/other"]}
    await client.create(ns)
    await client.create(make(CM, "c", namespace="shared"))
    await client.delete(NAMESPACE, "shared")
    await gone(client, CM, "c", namespace="shared")

    async def finalized_by_us() -> bool:
        current = await client.get(NAMESPACE, "shared")
        return current["spec"].get("finalizers") == ["example.com/other"]

    await eventually(finalized_by_us, what="the kubernetes finalizer removed")
    current = await client.get(NAMESPACE, "shared")
    current["spec"]["finalizers"] = []
    await client.update(current, resource=NAMESPACE, subresource="finalize")
    await gone(client, NAMESPACE, "shared", namespace=None)


async def test_deleting_a_crd_deletes_its_resources_honouring_their_finalizers(
        client: Client) -> None:
    await install(client, crd("doodads", "Doodad"))
    doodad = ("example.com/v1", "Doodad")
    await client.create(make(NAMESPACE, "other", namespace=None))
    await client.create(make(doodad, "a"))
    await client.create(make(doodad, "b", namespace="other"))
    await client.create(make(doodad, "held", finalizers=[HOLD]))
    await client.delete(CRD, "doodads.example.com")

    async def only_held_left() -> bool:
        listed = await client.list(doodad, namespace="*")
        names = [i["metadata"]["name"] for i in listed["items"]]
        return names == ["held"]

    await eventually(only_held_left, what="the unheld doodads deleted")
    definition = await client.get(CRD, "doodads.example.com")
    terminating = conditions(definition)["Terminating"]
    assert terminating["status"] == "True"
    assert terminating["reason"] == "InstanceDeletionInProgress"
    assert terminating["message"] == "CustomResource deletion is in progress"
    assert definition["metadata"]["finalizers"] == ["customresourcecleanup.apiextensions.k8s.io"]
    with pytest.raises(errors.MethodNotAllowed, match="custom resource definition is "
                                                      "terminating"):
        await client.create(make(doodad, "late"))
    await remove_finalizer(client, doodad, "held", HOLD)
    await gone(client, CRD, "doodads.example.com", namespace=None)
    client.discovery.invalidate()
    with pytest.raises(NoMatchError):
        await client.resolve(doodad)
    # created again, it starts empty
    await install(client, crd("doodads", "Doodad"))
    assert (await client.list(doodad, namespace="*"))["items"] == []


async def test_a_crd_that_was_never_established_goes_at_once(client: Client) -> None:
    # a name conflict keeps it from being established
    clash = crd("widgets2", "Widget")
    clash["metadata"]["name"] = "widgets2.example.com"
    await client.create(clash)

    async def rejected() -> bool:
        found = conditions(await client.get(CRD, "widgets2.example.com"))
        return found.get("NamesAccepted", {}).get("status") == "False"

    await eventually(rejected, what="the name conflict reported")
    await client.delete(CRD, "widgets2.example.com")
    await gone(client, CRD, "widgets2.example.com", namespace=None)
    # the established Widget kind is untouched
    assert await client.resolve(WIDGET)


async def test_the_server_refuses_to_delete_protected_namespaces(client: Client) -> None:
    for name in ("default", "kube-system", "kube-public"):
        with pytest.raises(errors.Forbidden):
            await client.delete(NAMESPACE, name)
    await asyncio.sleep(0)
