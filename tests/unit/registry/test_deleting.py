"""DELETE through a real store: the states an object goes through with finalizers, the
preconditions, dry runs, and the grace marks of graceful deletion."""

from __future__ import annotations

import datetime

import pytest

from setpoint.apimachinery import errors, selectors
from setpoint.registry.deleting import graceful_marks
from setpoint.registry.options import DeleteOptions, ListOptions, WriteOptions
from setpoint.storage import MemoryBackend

from .storefixture import configmap, configmap_store

NOW = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
KEY = "/registry/core/configmaps/ns/cm"


async def stored_revision(backend: MemoryBackend) -> int | None:
    kv = await backend.get(KEY)
    return None if kv is None else kv.mod_revision


async def test_finalizers_hold_a_deleted_object_until_the_last_one_goes() -> None:
    async with configmap_store() as (store, backend):
        await store.create("ns", configmap("cm", finalizers=["a.example.com/x",
                                                             "b.example.com/y"]),
                           "v1", WriteOptions())
        # marked: deletionTimestamp set, still there
        marked, finished = await store.delete("ns", "cm", "v1", DeleteOptions())
        assert finished is False
        assert marked["metadata"]["deletionTimestamp"] == "2024-01-01T00:00:00Z"
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
        revision = await stored_revision(backend)
        assert revision == int(marked["metadata"]["resourceVersion"])
        # a DELETE of a marked object that changes nothing writes nothing
        again, finished = await store.delete("ns", "cm", "v1", DeleteOptions())
        assert finished is False
        assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
        assert await stored_revision(backend) == revision
        # one finalizer removed: written, still there
        body = {**again, "metadata": {**again["metadata"], "finalizers": ["b.example.com/y"]}}
        kept = await store.update("ns", "cm", body, "v1", WriteOptions())
        assert kept.object["metadata"]["finalizers"] == ["b.example.com/y"]
        assert await stored_revision(backend) == int(kept.object["metadata"]["resourceVersion"])
        # the last one removed: written once more, then gone
        body = {**kept.object, "metadata": {**kept.object["metadata"], "finalizers": []}}
        last = await store.update("ns", "cm", body, "v1", WriteOptions())
        assert not last.object["metadata"].get("finalizers")
        assert await stored_revision(backend) is None
        with pytest.raises(errors.NotFound):
            await store.get("ns", "cm", "v1")


async def test_an_object_without_finalizers_goes_at_once() -> None:
    async with configmap_store() as (store, backend):
        created = await store.create("ns", configmap("cm"), "v1", WriteOptions())
        status, finished = await store.delete("ns", "cm", "v1", DeleteOptions())
        assert finished is True
        assert status["kind"] == "Status"
        assert status["status"] == "Success"
        assert status["details"] == {"name": "cm", "kind": "configmaps",
                                     "uid": created.object["metadata"]["uid"]}
        assert await stored_revision(backend) is None
        with pytest.raises(errors.NotFound):
            await store.delete("ns", "cm", "v1", DeleteOptions())


async def test_the_garbage_collectors_finalizer_holds_an_orphaning_delete() -> None:
    async with configmap_store(gc=True) as (store, backend):
        await store.create("ns", configmap("cm"), "v1", WriteOptions())
        marked, finished = await store.delete("ns", "cm", "v1",
                                              DeleteOptions(propagation_policy="Orphan"))
        assert finished is False
        assert marked["metadata"]["finalizers"] == ["orphan"]
        assert await stored_revision(backend) is not None
        # Background removes the garbage collector's finalizer again: gone at once
        _, finished = await store.delete("ns", "cm", "v1",
                                         DeleteOptions(propagation_policy="Background"))
        assert finished is True
        assert await stored_revision(backend) is None


async def test_preconditions_and_dry_runs_change_nothing() -> None:
    async with configmap_store() as (store, backend):
        created = await store.create("ns", configmap("cm"), "v1", WriteOptions())
        meta = created.object["metadata"]
        with pytest.raises(errors.Conflict, match="Precondition failed: UID in precondition: "
                                                  "other, UID in object meta: "):
            await store.delete("ns", "cm", "v1", DeleteOptions(precondition_uid="other"))
        stale = str(int(meta["resourceVersion"]) + 100)
        with pytest.raises(errors.Conflict,
                           match=f"ResourceVersion in precondition: {stale}, ResourceVersion "
                                 f"in meta: {meta['resourceVersion']}"):
            await store.delete("ns", "cm", "v1",
                               DeleteOptions(precondition_resource_version=stale))
        _, finished = await store.delete("ns", "cm", "v1", DeleteOptions(dry_run=True))
        assert finished is True
        assert await stored_revision(backend) == int(meta["resourceVersion"])
        _, finished = await store.delete(
            "ns", "cm", "v1", DeleteOptions(precondition_uid=meta["uid"],
                                            precondition_resource_version=meta[
                                                "resourceVersion"]))
        assert finished is True
        assert await stored_revision(backend) is None


async def test_delete_collection_leaves_what_its_selector_does_not_name() -> None:
    async with configmap_store() as (store, _):
        for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
            await store.create("ns", configmap(name, labels={"tier": tier}), "v1",
                               WriteOptions())
        page = await store.delete_collection(
            "ns", "v1", ListOptions(label_selector=selectors.LabelSelector.parse("tier=web")),
            DeleteOptions())
        assert sorted(o["metadata"]["name"] for o in page.items) == ["a", "b"]
        left = await store.list("ns", "v1", ListOptions())
        assert [o["metadata"]["name"] for o in left.items] == ["c"]


@pytest.mark.parametrize(("meta", "grace", "marks"), [
    ({}, None, None),                                   # a kind without grace
    ({}, 0, None),                                      # no grace left: no marks
    ({}, 30, ("2024-01-01T00:00:30Z", 30)),             # first graceful DELETE
    # later DELETEs may only shorten the grace, moving the timestamp by as much
    ({"deletionTimestamp": "2024-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}, 30,
     None),
    ({"deletionTimestamp": "2024-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}, 60,
     None),
    ({"deletionTimestamp": "2024-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}, 10,
     ("2024-01-01T00:00:10Z", 10)),
    ({"deletionTimestamp": "2024-01-01T00:00:30Z", "deletionGracePeriodSeconds": 30}, 0,
     ("2024-01-01T00:00:00Z", 0)),
    # an unreadable timestamp counts from now
    ({"deletionTimestamp": "yesterday", "deletionGracePeriodSeconds": 30}, 10,
     ("2024-01-01T00:00:10Z", 10)),
    # marked without a grace period (finalizers): a grace does not mark it again
    ({"deletionTimestamp": "2024-01-01T00:00:00Z"}, 10, None),
    ("not an object", 30, ("2024-01-01T00:00:30Z", 30)),
])
def test_grace_marks(meta: object, grace: int | None, marks: tuple[str, int] | None) -> None:
    assert graceful_marks(meta, grace, NOW) == marks
