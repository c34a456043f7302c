"""The garbage collector in an in-process control plane: the three propagation modes on a
three-level chain (Widget → ConfigMap → Gadget), dangling references, scopes, namespaces,
deletecollection, kinds that appear later, and a thousand dependents."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from setpoint.client import Client
from setpoint.controllers.garbagecollector import GarbageCollector
from setpoint.controlplane import ControlPlane
from tests.integration.controllers.conftest import (
    CLUSTER,
    CM,
    GADGET,
    HOLD,
    SECRET,
    WIDGET,
    DeletionLog,
    eventually,
    get_or_none,
    gone,
    install,
    make,
    owner_ref,
    remove_finalizer,
)
from tests.integration.controllers.test_malformed_owners import settled_on

pytestmark = pytest.mark.usefixtures("kinds")

Obj = dict[str, Any]


async def chain(client: Client, *, hold: bool = False, block: bool = True
                ) -> tuple[Obj, Obj, Obj]:
    """widget ← configmap ← gadget (the gadget held by a finalizer when ``hold``)."""
    widget = await client.create(make(WIDGET, "w", spec={"size": 1}))
    cm = await client.create(make(CM, "cm", owners=[owner_ref(widget, block=block)],
                                  data={"k": "v"}))
    gadget = await client.create(make(GADGET, "g", owners=[owner_ref(cm, block=block)],
                                      finalizers=[HOLD] if hold else None))
    return widget, cm, gadget


@contextlib.asynccontextmanager
async def deletions(client: Client, *kinds: tuple[str, str]) -> AsyncIterator[DeletionLog]:
    log = DeletionLog()
    async with asyncio.TaskGroup() as group:
        tasks = []
        for kind in kinds:
            ready = asyncio.Event()
            tasks.append(group.create_task(log.follow(client, kind, ready=ready)))
            await asyncio.wait_for(ready.wait(), 5)
        try:
            yield log
        finally:
            for task in tasks:
                task.cancel()


async def test_background_deletes_the_owner_then_its_dependents(client: Client) -> None:
    await chain(client)
    async with deletions(client, WIDGET, CM, GADGET) as log:
        await client.delete(WIDGET, "w", namespace="default", propagation_policy="Background")
        await gone(client, GADGET, "g")
        await gone(client, CM, "cm")
        await eventually(lambda: len(log.order) == 3)
    assert log.order == ["Widget/w", "ConfigMap/cm", "Gadget/g"]


async def test_foreground_deletes_blocking_dependents_first(plane: ControlPlane,
                                                            client: Client) -> None:
    await chain(client, hold=True)
    async with deletions(client, WIDGET, CM, GADGET) as log:
        stored = await client.delete(WIDGET, "w", namespace="default",
                                     propagation_policy="Foreground")
        assert stored["metadata"]["finalizers"] == ["foregroundDeletion"]

        async def gadget_terminating() -> bool:
            gadget = await get_or_none(client, GADGET, "g")
            return gadget is not None and bool(gadget["metadata"].get("deletionTimestamp"))

        await eventually(gadget_terminating, what="the gadget being deleted")
        # the held gadget blocks the config map, which blocks the widget: once the collector
        # has seen the config map's deletion and has nothing left to do, neither is gone
        await settled_on(plane, await client.get(CM, "cm", namespace="default"))
        widget = await client.get(WIDGET, "w", namespace="default")
        cm = await client.get(CM, "cm", namespace="default")
        assert widget["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert cm["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert cm["metadata"]["deletionTimestamp"]
        assert log.order == []
        await remove_finalizer(client, GADGET, "g", HOLD)
        await gone(client, WIDGET, "w")
        await eventually(lambda: len(log.order) == 3)
    assert log.order == ["Gadget/g", "ConfigMap/cm", "Widget/w"]


async def test_foreground_does_not_wait_for_non_blocking_dependents(client: Client) -> None:
    await chain(client, hold=True, block=False)
    await client.delete(WIDGET, "w", namespace="default", propagation_policy="Foreground")
    await gone(client, WIDGET, "w")
    await gone(client, CM, "cm")
    gadget = await client.get(GADGET, "g", namespace="default")
    assert gadget["metadata"]["deletionTimestamp"]  # collected, held by its own finalizer
    await remove_finalizer(client, GADGET, "g", HOLD)
    await gone(client, GADGET, "g")


async def test_orphan_removes_the_owner_reference_and_keeps_the_dependents(
        client: Client) -> None:
    _, cm, _ = await chain(client)
    stored = await client.delete(WIDGET, "w", namespace="default", propagation_policy="Orphan")
    assert stored["metadata"]["finalizers"] == ["orphan"]
    # the collector removes the owner references before the orphan finalizer, so once
    # the owner is gone its dependents are already orphaned
    await gone(client, WIDGET, "w")
    kept = await client.get(CM, "cm", namespace="default")
    assert "ownerReferences" not in kept["metadata"]
    gadget = await client.get(GADGET, "g", namespace="default")
    assert gadget["metadata"]["ownerReferences"] == [owner_ref(cm)]
    assert "deletionTimestamp" not in gadget["metadata"]


async def test_the_old_orphan_dependents_flag(client: Client) -> None:
    await chain(client)
    ref = await client.resolve(WIDGET)
    await client.request("DELETE", ref.path(namespace="default", name="w"),
                         body={"kind": "DeleteOptions", "apiVersion": "v1",
                               "orphanDependents": True})
    await gone(client, WIDGET, "w")  # orphaned before the orphan finalizer went
    assert "ownerReferences" not in (await client.get(CM, "cm", namespace="default"))[
        "metadata"]


async def test_dangling_references_are_collected(client: Client) -> None:
    widget = await client.create(make(WIDGET, "real"))
    ghost = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "ghost",
             "uid": "00000000-0000-4000-8000-000000000001"}
    wrong_uid = {**owner_ref(widget), "uid": "00000000-0000-4000-8000-000000000002"}
    missing_gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "name": "never",
                    "uid": "00000000-0000-4000-8000-000000000003"}
    await client.create(make(CM, "to-a-ghost", owners=[ghost]))
    await client.create(make(CM, "to-a-wrong-uid", owners=[wrong_uid]))
    await client.create(make(SECRET, "to-a-missing-gadget", owners=[missing_gadget]))
    both = await client.create(make(CM, "one-real-one-ghost", owners=[owner_ref(widget), ghost]))
    await gone(client, CM, "to-a-ghost")
    await gone(client, CM, "to-a-wrong-uid")
    await gone(client, SECRET, "to-a-missing-gadget")

    async def dangling_removed() -> bool:
        current = await client.get(CM, "one-real-one-ghost", namespace="default")
        return current["metadata"].get("ownerReferences") == [owner_ref(widget)]

    await eventually(dangling_removed, what="the dangling reference removed")
    assert (await client.get(CM, "one-real-one-ghost", namespace="default"))["metadata"][
        "uid"] == both["metadata"]["uid"]


async def test_a_cluster_scoped_owner_owns_namespaced_dependents(plane: ControlPlane,
                                                                 client: Client) -> None:
    owner = await client.create(make(CLUSTER, "big", namespace=None))
    dependent = await client.create(make(CM, "in-default", owners=[owner_ref(owner)]))
    await client.create(make(GADGET, "in-kube-public", namespace="kube-public",
                             owners=[owner_ref(owner)]))
    await settled_on(plane, dependent)
    assert await get_or_none(client, CM, "in-default") is not None  # its owner exists
    await client.delete(CLUSTER, "big")
    await gone(client, CM, "in-default")
    await gone(client, GADGET, "in-kube-public", namespace="kube-public")


async def events_for(client: Client, name: str, namespace: str) -> list[Obj]:
    listed = await client.list(("v1", "Event"), namespace=namespace,
                               field_selector=f"involvedObject.name={name}")
    return list(listed["items"])


async def test_a_reference_to_an_owner_in_another_namespace_is_not_an_owner(
        plane: ControlPlane, client: Client) -> None:
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "elsewhere"}})
    foreign = await client.create(make(WIDGET, "w", namespace="elsewhere"))
    # the collector must know the owner lives elsewhere to call the reference invalid (one
    # that has not seen it yet finds no owner and reports nothing, as Kubernetes' does)
    await settled_on(plane, foreign)
    await client.create(make(CM, "confused", owners=[owner_ref(foreign)]))
    await gone(client, CM, "confused")

    async def reported() -> bool:
        return any(e["reason"] == "OwnerRefInvalidNamespace"
                   for e in await events_for(client, "confused", "default"))

    await eventually(reported, what="an OwnerRefInvalidNamespace event")
    event = next(e for e in await events_for(client, "confused", "default")
                 if e["reason"] == "OwnerRefInvalidNamespace")
    assert event["type"] == "Warning"
    assert event["source"]["component"] == "garbagecollector"
    assert event["message"] == (
        f"ownerRef [example.com/v1/Widget, namespace: default, name: w, uid: "
        f"{foreign['metadata']['uid']}] does not exist in namespace \"default\"")
    # the widget in its own namespace is not touched
    assert await get_or_none(client, WIDGET, "w", namespace="elsewhere") is not None


async def test_a_cluster_scoped_dependent_of_a_namespaced_owner_is_left_alone(
        plane: ControlPlane, client: Client) -> None:
    widget = await client.create(make(WIDGET, "w"))
    await client.create(make(CLUSTER, "odd", namespace=None, owners=[owner_ref(widget)]))

    async def reported() -> bool:
        return any(e["reason"] == "OwnerRefInvalidNamespace"
                   for e in await events_for(client, "odd", "default"))

    await eventually(reported, what="an OwnerRefInvalidNamespace event")
    # a namespaced dependent beside it, collected with the widget: the positive signal
    await client.create(make(CM, "beside", owners=[owner_ref(widget)]))
    await client.delete(WIDGET, "w", namespace="default")
    await gone(client, CM, "beside")
    await settled_on(plane, await client.get(CLUSTER, "odd"))
    assert await get_or_none(client, CLUSTER, "odd", namespace=None) is not None


async def test_deletecollection_with_foreground_propagation(client: Client) -> None:
    owners = [await client.create(make(WIDGET, f"w{i}", labels={"set": "a"}))
              for i in range(3)]
    await client.create(make(WIDGET, "not-in-the-set"))
    for i, owner in enumerate(owners):
        await client.create(make(CM, f"dep{i}", owners=[owner_ref(owner)],
                                 finalizers=[HOLD]))
    await client.delete_collection(WIDGET, namespace="default", label_selector="set=a",
                                   propagation_policy="Foreground")

    async def dependents_deleted() -> bool:
        deps = [await client.get(CM, f"dep{i}", namespace="default") for i in range(3)]
        return all(d["metadata"].get("deletionTimestamp") for d in deps)

    await eventually(dependents_deleted, what="the held dependents being deleted")
    for i in range(3):
        widget = await client.get(WIDGET, f"w{i}", namespace="default")
        assert widget["metadata"]["finalizers"] == ["foregroundDeletion"]
        await remove_finalizer(client, CM, f"dep{i}", HOLD)
    for i in range(3):
        await gone(client, WIDGET, f"w{i}")
        await gone(client, CM, f"dep{i}")
    assert await get_or_none(client, WIDGET, "not-in-the-set") is not None


async def test_kinds_defined_later_are_collected(plane: ControlPlane, client: Client) -> None:
    from tests.integration.controllers.conftest import crd

    await install(client, crd("sprockets", "Sprocket"))
    sprocket_kind = ("example.com/v1", "Sprocket")
    owner = await client.create(make(sprocket_kind, "s"))
    await client.create(make(sprocket_kind, "s-child", owners=[owner_ref(owner)]))
    await client.create(make(CM, "s-cm", owners=[owner_ref(owner)]))
    await client.delete(sprocket_kind, "s", namespace="default", propagation_policy="Foreground")
    await gone(client, sprocket_kind, "s")
    await gone(client, sprocket_kind, "s-child")
    await gone(client, CM, "s-cm")
    assert plane.manager is not None
    gc = next(r for r in plane.manager.runnables if isinstance(r, GarbageCollector))
    assert gc.current is not None
    assert ("example.com", "sprockets") in gc.current.monitors


async def test_a_thousand_dependents_go_in_the_background(client: Client) -> None:
    owner = await client.create(make(CM, "owner"))
    limit = asyncio.Semaphore(16)

    async def dependent(i: int) -> None:
        async with limit:
            await client.create(make(CM, f"dep-{i:04}", owners=[owner_ref(owner, block=None)]))

    async with asyncio.TaskGroup() as group:
        for i in range(1000):
            group.create_task(dependent(i))
    started = time.perf_counter()
    await client.delete(CM, "owner", namespace="default")

    async def all_gone() -> bool:
        listed = await client.list(CM, namespace="default")
        return not any(i["metadata"]["name"].startswith("dep-") for i in listed["items"])

    await eventually(all_gone, timeout=60, interval=0.05, what="1,000 dependents gone")
    print(f"1,000 dependents collected in {time.perf_counter() - started:.2f}s")


async def test_a_foreground_cycle_is_broken(plane: ControlPlane, client: Client) -> None:
    first = await client.create(make(CM, "first"))
    second = await client.create(make(CM, "second", owners=[owner_ref(first)]))
    await settled_on(plane, await client.patch(
        CM, "first", {"metadata": {"ownerReferences": [owner_ref(second)]}},
        namespace="default"))
    await client.delete(CM, "first", namespace="default", propagation_policy="Foreground")
    await gone(client, CM, "first")
    await gone(client, CM, "second")


@pytest.mark.slow
async def test_an_object_of_thousands_of_absent_owners_is_collected(client: Client) -> None:
    # each owner found absent scanned every reference of its dependents: for one object of
    # 16,000 owner references that was 256 million reads (9.6 s of the collector's loop);
    # they are looked up by UID now. Here 3,000, and an ordinary chain collected meanwhile
    widget = await client.create(make(WIDGET, "present", spec={"size": 1}))
    refs = [{"apiVersion": "example.com/v1", "kind": "Widget", "name": f"absent-{i}",
             "uid": f"00000000-0000-0000-0000-{i:012}"} for i in range(3000)]
    await client.create(make(CM, "many", owners=[*refs, owner_ref(widget, block=None)]))
    await client.create(make(CM, "one", owners=[owner_ref(widget, block=None)]))
    await client.delete(WIDGET, "present", namespace="default")
    await gone(client, CM, "one")
    await gone(client, CM, "many", timeout=60)
