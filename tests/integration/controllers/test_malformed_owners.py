"""The garbage collector on malformed owner graphs, in an in-process control plane: what it
collects, what it leaves alone (shown by the collector having seen the object's latest
version and having nothing left to do), and that it keeps collecting everything else."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from setpoint.client import Client
from setpoint.controllers.garbagecollector import Collector, GarbageCollector
from setpoint.controlplane import ControlPlane
from setpoint.runtime import Request
from tests.integration.controllers.conftest import (
    CLUSTER,
    CM,
    GADGET,
    WIDGET,
    crd,
    eventually,
    get_or_none,
    gone,
    install,
    make,
    owner_ref,
)

pytestmark = pytest.mark.usefixtures("kinds")

Obj = dict[str, Any]

GHOST_UID = "00000000-0000-4000-8000-0000000000aa"


def collector(plane: ControlPlane) -> Collector:
    assert plane.manager is not None
    gc = next(r for r in plane.manager.runnables if isinstance(r, GarbageCollector))
    assert gc.current is not None
    return gc.current


async def settled_on(plane: ControlPlane, obj: Obj) -> None:
    """The collector has seen ``obj`` (this resourceVersion) and has finished with it."""
    uid, rv = obj["metadata"]["uid"], obj["metadata"]["resourceVersion"]

    def seen() -> bool:
        gc = collector(plane)
        node = gc.graph.get(uid)
        return (node is not None and node.obj is not None
                and node.obj["metadata"].get("resourceVersion") == rv and gc.idle)

    await eventually(seen, what=f"the collector settled on {obj['metadata']['name']}")


async def still_collects(client: Client, name: str) -> None:
    owner = await client.create(make(CM, f"{name}-owner"))
    await client.create(make(CM, f"{name}-dep", owners=[owner_ref(owner)]))
    await client.delete(CM, f"{name}-owner", namespace="default")
    await gone(client, CM, f"{name}-dep")


def ghost(kind: tuple[str, str], name: str, uid: str = GHOST_UID) -> Obj:
    return {"apiVersion": kind[0], "kind": kind[1], "name": name, "uid": uid}


async def invalid_namespace_reported(client: Client, name: str) -> None:
    async def reported() -> bool:
        listed = await client.list(("v1", "Event"), namespace="default",
                                   field_selector=f"involvedObject.name={name}")
        return any(e["reason"] == "OwnerRefInvalidNamespace" for e in listed["items"])

    await eventually(reported, what=f"an OwnerRefInvalidNamespace event for {name}")


# --- one UID, several coordinates -----------------------------------------------------


async def test_one_uid_named_as_two_absent_owners_is_collected(client: Client) -> None:
    await client.create(make(CM, "two-names", owners=[ghost(WIDGET, "a"), ghost(WIDGET, "b")]))
    await client.create(make(CM, "two-kinds", owners=[
        ghost(WIDGET, "a", "00000000-0000-4000-8000-0000000000bb"),
        ghost(GADGET, "a", "00000000-0000-4000-8000-0000000000bb")]))
    await gone(client, CM, "two-names")
    await gone(client, CM, "two-kinds")
    await still_collects(client, "after")


async def test_one_uid_named_by_two_dependents_with_other_coordinates(
        plane: ControlPlane, client: Client) -> None:
    await client.create(make(CM, "as-widget", owners=[ghost(WIDGET, "x")]))
    await client.create(make(CM, "as-gadget", owners=[ghost(GADGET, "y")]))
    await gone(client, CM, "as-widget")
    await gone(client, CM, "as-gadget")

    def virtual_owner_dropped() -> bool:
        return collector(plane).graph.get(GHOST_UID) is None

    await eventually(virtual_owner_dropped, what="the virtual owner dropped")


async def test_a_uid_that_belongs_to_another_object_is_not_an_owner(
        plane: ControlPlane, client: Client) -> None:
    """The reference names the UID of an existing Gadget, but as a Widget (or as a
    ConfigMap of another name): the reference is dangling; the Gadget is not touched."""
    gadget = await client.create(make(GADGET, "real"))
    uid = gadget["metadata"]["uid"]
    await client.create(make(CM, "wrong-kind", owners=[ghost(WIDGET, "real", uid)]))
    await client.create(make(CM, "wrong-name", owners=[ghost(GADGET, "other", uid)]))
    both = await client.create(make(CM, "one-right", owners=[
        owner_ref(gadget), ghost(WIDGET, "real", uid)]))
    await gone(client, CM, "wrong-kind")
    await gone(client, CM, "wrong-name")

    async def wrong_one_removed() -> bool:
        current = await client.get(CM, "one-right", namespace="default")
        return current["metadata"].get("ownerReferences") == [owner_ref(gadget)]

    await eventually(wrong_one_removed, what="the mismatched reference removed")
    current = await client.get(CM, "one-right", namespace="default")
    assert current["metadata"]["uid"] == both["metadata"]["uid"]
    assert (await client.get(GADGET, "real", namespace="default"))["metadata"]["uid"] == uid


# --- scopes ---------------------------------------------------------------------------


async def test_a_cluster_scoped_object_naming_a_namespaced_uid_twice_is_left_alone(
        plane: ControlPlane, client: Client) -> None:
    confused = await client.create(make(CLUSTER, "confused", namespace=None, owners=[
        ghost(CM, "a"), ghost(CM, "b")]))
    await invalid_namespace_reported(client, "confused")
    await settled_on(plane, confused)
    kept = await client.get(CLUSTER, "confused")
    assert "deletionTimestamp" not in kept["metadata"]
    # the virtual owner stays unverified (it cannot be looked up), and is not retried
    gc = collector(plane)
    node = gc.graph.get(GHOST_UID)
    assert node is not None
    assert not node.observed
    assert gc.deleter.queue.num_requeues(Request("", GHOST_UID)) == 0
    await still_collects(client, "after")
    # deleting the object drops the virtual owner with it
    await client.delete(CLUSTER, "confused")
    await eventually(lambda: collector(plane).graph.get(GHOST_UID) is None,
                     what="the virtual owner dropped")


async def test_a_cluster_scoped_dependent_keeps_a_namespaced_owner_that_goes(
        plane: ControlPlane, client: Client) -> None:
    """Its reference can never be resolved: the owner's deletion does not make it go."""
    owner = await client.create(make(WIDGET, "w"))
    odd = await client.create(make(CLUSTER, "odd", namespace=None, owners=[owner_ref(owner)]))
    await invalid_namespace_reported(client, "odd")
    await client.delete(WIDGET, "w", namespace="default")
    await gone(client, WIDGET, "w")
    await settled_on(plane, odd)
    assert await get_or_none(client, CLUSTER, "odd", namespace=None) is not None


async def test_a_namespaced_owner_in_another_namespace_is_absent_for_the_dependent(
        plane: ControlPlane, client: Client) -> None:
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "other"}})
    foreign = await client.create(make(WIDGET, "w", namespace="other"))
    local = await client.create(make(WIDGET, "w"))
    # a reference is invalid only to a collector that knows the owner lives elsewhere; one
    # that has not seen it yet finds no owner, as Kubernetes' does
    await settled_on(plane, foreign)
    # one reference to the local widget, one to the foreign one: only the foreign one goes
    await client.create(make(CM, "mixed", owners=[owner_ref(local), owner_ref(foreign)]))

    async def foreign_removed() -> bool:
        current = await client.get(CM, "mixed", namespace="default")
        return current["metadata"].get("ownerReferences") == [owner_ref(local)]

    await eventually(foreign_removed, what="the cross-namespace reference removed")
    await invalid_namespace_reported(client, "mixed")
    assert await get_or_none(client, WIDGET, "w", namespace="other") is not None


# --- self-references and cycles -------------------------------------------------------


async def test_an_object_that_owns_itself(plane: ControlPlane, client: Client) -> None:
    me = await client.create(make(CM, "me"))
    me = await client.patch(CM, "me", {"metadata": {"ownerReferences": [owner_ref(me)]}},
                            namespace="default")
    await settled_on(plane, me)  # its owner exists (itself): kept
    assert await get_or_none(client, CM, "me") is not None
    # deleted in the foreground, it does not wait for itself
    await client.delete(CM, "me", namespace="default", propagation_policy="Foreground")
    await gone(client, CM, "me")


async def test_a_foreground_cycle_of_three_is_broken(client: Client) -> None:
    a = await client.create(make(CM, "a"))
    b = await client.create(make(CM, "b", owners=[owner_ref(a)]))
    c = await client.create(make(CM, "c", owners=[owner_ref(b)]))
    await client.patch(CM, "a", {"metadata": {"ownerReferences": [owner_ref(c)]}},
                       namespace="default")
    await client.delete(CM, "b", namespace="default", propagation_policy="Foreground")
    for name in ("a", "b", "c"):
        await gone(client, CM, name)


async def test_two_owners_in_the_foreground_that_own_each_other(client: Client) -> None:
    a = await client.create(make(WIDGET, "a"))
    b = await client.create(make(WIDGET, "b", owners=[owner_ref(a)]))
    await client.patch(WIDGET, "a", {"metadata": {"ownerReferences": [owner_ref(b)]}},
                       namespace="default")
    dep = await client.create(make(CM, "dep", owners=[owner_ref(a), owner_ref(b)]))
    assert dep["metadata"]["ownerReferences"]
    await client.delete(WIDGET, "a", namespace="default", propagation_policy="Foreground")
    await client.delete(WIDGET, "b", namespace="default", propagation_policy="Foreground")
    for kind, name in ((WIDGET, "a"), (WIDGET, "b"), (CM, "dep")):
        await gone(client, kind, name)


# --- kinds ----------------------------------------------------------------------------


async def test_an_owner_of_a_kind_not_served_keeps_its_dependent_until_it_is_served(
        plane: ControlPlane, client: Client) -> None:
    sprocket = ("example.com/v1", "Sprocket")
    await client.create(make(CM, "waiting", owners=[ghost(sprocket, "s")]))
    await client.create(make(CM, "never", owners=[
        ghost(("nowhere.example.com/v1", "Thing"), "t", "00000000-0000-4000-8000-0000000000cc")]))
    gc = collector(plane)
    # the collector tried, found the kind unserved, and retries later (with backoff)
    await eventually(lambda: gc.deleter.queue.num_requeues(Request("", GHOST_UID)) > 0,
                     what="the unserved owner retried")
    assert await get_or_none(client, CM, "waiting") is not None
    assert await get_or_none(client, CM, "never") is not None
    await install(client, crd("sprockets", "Sprocket"))
    # once served, the owner is found absent, and the dependent goes
    await gone(client, CM, "waiting", timeout=20)
    assert await get_or_none(client, CM, "never") is not None


# --- size -----------------------------------------------------------------------------


async def test_fan_in_one_dependent_naming_five_hundred_absent_owners(
        plane: ControlPlane, client: Client) -> None:
    owners = [ghost(WIDGET, f"w{i}", f"00000000-0000-4000-8000-{i:012d}") for i in range(500)]
    await client.create(make(CM, "many", owners=owners))
    await gone(client, CM, "many", timeout=30)

    def no_virtual_owner_left() -> bool:
        graph = collector(plane).graph
        return all(graph.get(ref["uid"]) is None for ref in owners)

    await eventually(no_virtual_owner_left, what="no virtual owner left in the graph")


async def test_many_malformed_objects_at_once_leave_the_server_answering(
        plane: ControlPlane, client: Client) -> None:
    limit = asyncio.Semaphore(16)

    async def confused(i: int) -> None:
        uid = f"00000000-0000-4000-9000-{i:012d}"
        async with limit:
            await client.create(make(CLUSTER, f"c{i}", namespace=None, owners=[
                ghost(CM, "a", uid), ghost(CM, "b", uid)]))
            await client.create(make(CM, f"d{i}", owners=[
                ghost(WIDGET, "a", uid), ghost(GADGET, "b", uid)]))

    async with asyncio.TaskGroup() as group:
        for i in range(200):
            group.create_task(confused(i))
    await still_collects(client, "after")
    for i in range(200):
        await gone(client, CM, f"d{i}")
    assert len((await client.list(CLUSTER))["items"]) == 200
