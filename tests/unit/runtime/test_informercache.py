"""The informer cache: keys, indexes, atomic relists and handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from setpoint.runtime import informercache as c
from setpoint.runtime import watcher as w


def obj(name: str, rv: str = "1", namespace: str | None = "default",
        owners: tuple[str, ...] = (), **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": labels}
    if namespace is not None:
        metadata["namespace"] = namespace
    if owners:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Thing", "name": f"owner-{uid}", "uid": uid}
            for uid in owners]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


@dataclass
class Recorder:
    log: list[tuple[str, ...]] = field(default_factory=list)

    def on_add(self, o: c.Obj) -> None:
        self.log.append(("add", o["metadata"]["name"], o["metadata"]["resourceVersion"]))

    def on_update(self, old: c.Obj, new: c.Obj) -> None:
        self.log.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"],
                         new["metadata"]["resourceVersion"]))

    def on_delete(self, o: c.Obj) -> None:
        self.log.append(("delete", o["metadata"]["name"]))


def listed(cache: c.Cache, *objs: dict[str, Any]) -> None:
    cache.apply(w.Init())
    for o in objs:
        cache.apply(w.InitApply(o))
    cache.apply(w.InitDone())


def names(objs: list[c.Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


# --- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(("o", "key"), [
    (obj("a"), "default/a"), (obj("a", namespace="kube-system"), "kube-system/a"),
    (obj("node-1", namespace=None), "node-1"), (obj("x", namespace=""), "x"),
])
def test_object_key(o: dict[str, Any], key: str) -> None:
    assert c.object_key(o) == key


def test_an_object_without_a_name_has_no_key() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        c.object_key({"metadata": {"namespace": "default"}})


def test_builtin_index_functions() -> None:
    assert c.index_by_namespace(obj("a", namespace="ns")) == ["ns"]
    assert c.index_by_namespace(obj("a", namespace=None)) == [""]
    assert c.index_by_owner_uid(obj("a", owners=("u1", "u2"))) == ["u1", "u2"]
    assert c.index_by_owner_uid(obj("a")) == []
    odd = obj("a")
    odd["metadata"]["ownerReferences"] = [{"name": "no-uid"}, "junk"]
    assert c.index_by_owner_uid(odd) == []


# --- reads and indexes -----------------------------------------------------------------


def test_get_list_and_indexes_after_a_list() -> None:
    cache = c.Cache()
    a, b, d = obj("a", owners=("u1",)), obj("b", namespace="other", owners=("u1", "u2")), \
        obj("d", namespace=None)
    listed(cache, b, a, d)
    assert cache.synced
    assert cache.get("default/a") is a  # shared, not copied
    assert cache.get("default/missing") is None
    assert "other/b" in cache
    assert len(cache) == 3
    assert cache.keys() == ["d", "default/a", "other/b"]
    assert names(cache.list()) == ["d", "a", "b"]
    assert names(cache.by_index(c.NAMESPACE_INDEX, "default")) == ["a"]
    assert names(cache.by_index(c.NAMESPACE_INDEX, "")) == ["d"]
    assert cache.index_keys(c.OWNER_INDEX, "u1") == ["default/a", "other/b"]
    assert names(cache.by_index(c.OWNER_INDEX, "u2")) == ["b"]
    assert cache.by_index(c.OWNER_INDEX, "nobody") == []
    assert cache.index_values(c.OWNER_INDEX) == ["u1", "u2"]


def test_an_unknown_index_is_an_error() -> None:
    with pytest.raises(KeyError, match="no index named 'nope'"):
        c.Cache().by_index("nope", "x")


def test_custom_indexers_follow_changes() -> None:
    def by_app(o: c.Obj) -> list[str]:
        app = o["metadata"]["labels"].get("app")
        return [app] if app else []

    cache = c.Cache(indexers={"app": by_app})
    listed(cache, obj("a", app="web"), obj("b", app="db"))
    assert names(cache.by_index("app", "web")) == ["a"]
    cache.apply(w.Apply(obj("b", "2", app="web")))
    assert names(cache.by_index("app", "web")) == ["a", "b"]
    assert cache.by_index("app", "db") == []
    assert cache.index_values("app") == ["web"]  # empty entries are dropped
    cache.apply(w.Apply(obj("a", "3")))  # label removed
    assert names(cache.by_index("app", "web")) == ["b"]
    cache.apply(w.Delete(obj("b", "4", app="web")))
    assert cache.index_values("app") == []


def test_an_index_function_listing_a_value_twice_counts_it_once() -> None:
    cache = c.Cache(indexers={"dup": lambda o: ["x", "x"]})
    listed(cache, obj("a"))
    assert cache.index_keys("dup", "x") == ["default/a"]
    cache.apply(w.Delete(obj("a")))
    assert cache.index_values("dup") == []


def test_an_indexer_added_later_indexes_what_is_there() -> None:
    cache = c.Cache()
    listed(cache, obj("a", app="web"), obj("b"))
    cache.add_indexer("app", lambda o: [o["metadata"]["labels"].get("app", "none")])
    assert names(cache.by_index("app", "none")) == ["b"]
    with pytest.raises(ValueError, match="exists"):
        cache.add_indexer("app", lambda o: [])


def test_a_failing_index_function_leaves_the_cache_unchanged() -> None:
    def picky(o: c.Obj) -> list[str]:
        if o["metadata"]["name"] == "bad":
            raise RuntimeError("cannot index")
        return ["ok"]

    cache = c.Cache(indexers={"picky": picky})
    listed(cache, obj("a"))
    with pytest.raises(RuntimeError, match="cannot index"):
        cache.apply(w.Apply(obj("bad")))
    assert cache.keys() == ["default/a"]
    with pytest.raises(RuntimeError, match="cannot index"):
        listed(cache, obj("a", "2"), obj("bad"))
    assert cache.get("default/a") == obj("a")
    assert cache.index_keys("picky", "ok") == ["default/a"]


# --- atomic relist -----------------------------------------------------------------------


def test_a_relist_replaces_atomically_and_reports_what_vanished() -> None:
    cache = c.Cache()
    recorder = Recorder()
    listed(cache, obj("a"), obj("b"), obj("c"))
    cache.subscribe(recorder, replay=False)
    cache.apply(w.Init())
    cache.apply(w.InitApply(obj("b", "5")))
    cache.apply(w.InitApply(obj("new", "6")))
    # until InitDone readers see the old contents, and handlers hear nothing
    assert cache.keys() == ["default/a", "default/b", "default/c"]
    assert cache.get("default/b") == obj("b", "1")
    assert recorder.log == []
    cache.apply(w.InitDone())
    assert cache.keys() == ["default/b", "default/new"]
    assert names(cache.by_index(c.NAMESPACE_INDEX, "default")) == ["b", "new"]
    assert recorder.log == [("delete", "a"), ("delete", "c"), ("update", "b", "1", "5"),
                            ("add", "new", "6")]


def test_a_relist_started_over_discards_the_partial_list() -> None:
    cache = c.Cache()
    cache.apply(w.Init())
    cache.apply(w.InitApply(obj("partial")))
    cache.apply(w.Init())  # the list failed midway and started again
    cache.apply(w.InitApply(obj("a")))
    cache.apply(w.InitDone())
    assert cache.keys() == ["default/a"]


def test_an_unchanged_object_is_still_updated_on_relist() -> None:
    cache = c.Cache()
    recorder = Recorder()
    listed(cache, obj("a"))
    cache.subscribe(recorder, replay=False)
    listed(cache, obj("a"))
    assert recorder.log == [("update", "a", "1", "1")]


async def test_wait_synced() -> None:
    cache = c.Cache()
    waiter = asyncio.ensure_future(cache.wait_synced())
    await asyncio.sleep(0)
    assert not waiter.done()
    assert not cache.synced
    cache.apply(w.Init())
    cache.apply(w.InitApply(obj("a")))
    await asyncio.sleep(0)
    assert not waiter.done()
    cache.apply(w.InitDone())
    await asyncio.sleep(0)
    assert waiter.done()


# --- handlers ----------------------------------------------------------------------------


def test_handlers_hear_adds_updates_and_deletes() -> None:
    cache = c.Cache()
    recorder = Recorder()
    cache.subscribe(recorder)
    listed(cache, obj("a"))
    cache.apply(w.Apply(obj("b", "2")))
    cache.apply(w.Apply(obj("a", "3")))
    cache.apply(w.Delete(obj("b", "4")))
    cache.apply(w.Delete(obj("never-seen", "5")))
    assert recorder.log == [("add", "a", "1"), ("add", "b", "2"), ("update", "a", "1", "3"),
                            ("delete", "b"), ("delete", "never-seen")]
    assert cache.keys() == ["default/a"]


def test_a_handler_subscribing_late_hears_what_is_there() -> None:
    cache = c.Cache()
    listed(cache, obj("b"), obj("a"))
    recorder = Recorder()
    cache.subscribe(recorder)
    assert recorder.log == [("add", "a", "1"), ("add", "b", "1")]
    quiet = Recorder()
    cache.subscribe(quiet, replay=False)
    assert quiet.log == []


def test_a_handler_subscribing_before_sync_hears_the_list_once() -> None:
    cache = c.Cache()
    recorder = Recorder()
    cache.subscribe(recorder)
    assert recorder.log == []
    listed(cache, obj("a"))
    assert recorder.log == [("add", "a", "1")]


def test_handlers_see_the_new_state_and_can_unsubscribe() -> None:
    cache = c.Cache()
    seen: list[bool] = []
    sub = cache.subscribe(c.Handlers(add=lambda o: seen.append("default/a" in cache)))
    cache.apply(w.Apply(obj("a")))
    sub.cancel()
    sub.cancel()  # idempotent
    cache.apply(w.Apply(obj("b")))
    assert seen == [True]


def test_a_failing_handler_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    cache = c.Cache()

    def boom(o: c.Obj) -> None:
        raise RuntimeError("handler bug")

    cache.subscribe(c.Handlers(add=boom))
    recorder = Recorder()
    cache.subscribe(recorder)
    with caplog.at_level(logging.ERROR, logger="setpoint.runtime.informercache"):
        cache.apply(w.Apply(obj("a")))
    assert recorder.log == [("add", "a", "1")]
    assert "handler failed" in caplog.text
    assert cache.keys() == ["default/a"]


def test_handlers_helper_defaults_ignore_events() -> None:
    cache = c.Cache()
    updates: list[str] = []
    cache.subscribe(c.Handlers(update=lambda old, new: updates.append(new["metadata"]["name"])))
    listed(cache, obj("a"))
    cache.apply(w.Apply(obj("a", "2")))
    cache.apply(w.Delete(obj("a", "3")))
    assert updates == ["a"]


def test_resync_replays_every_object_as_an_update() -> None:
    cache = c.Cache()
    listed(cache, obj("b"), obj("a"))
    recorder = Recorder()
    cache.subscribe(recorder, replay=False)
    cache.apply(w.Resync())
    assert recorder.log == [("update", "a", "1", "1"), ("update", "b", "1", "1")]


def test_one_cache_serves_several_subscribers() -> None:
    cache = c.Cache()
    first, second = Recorder(), Recorder()
    cache.subscribe(first)
    cache.subscribe(second)
    listed(cache, obj("a"))
    assert first.log == second.log == [("add", "a", "1")]


async def test_feed_applies_a_stream() -> None:
    async def events() -> AsyncIterator[w.WatcherEvent]:
        for event in (w.Init(), w.InitApply(obj("a")), w.InitDone(), w.Apply(obj("b"))):
            yield event

    cache = c.Cache()
    await cache.feed(events())
    assert cache.keys() == ["default/a", "default/b"]


async def test_resource_version_moves_forward_with_lists_adds_and_deletes() -> None:
    cache = c.Cache()
    assert cache.resource_version is None
    cache.apply(w.Init())
    cache.apply(w.InitApply(obj("a", "5")))
    cache.apply(w.InitDone("9"))  # the list's own resourceVersion is newer than its items
    assert cache.resource_version == "9"
    cache.apply(w.Apply(obj("b", "12")))
    assert cache.resource_version == "12"
    cache.apply(w.Apply(obj("a", "11")))  # never backwards
    assert cache.resource_version == "12"
    cache.apply(w.Delete(obj("b", "15")))
    assert cache.resource_version == "15"
    assert cache.has_seen("15")
    assert not cache.has_seen("16")
    cache.apply(w.Apply(obj("c", "not-a-number")))  # ignored by the tracking
    assert cache.resource_version == "15"


async def test_wait_for_resource_version_wakes_on_the_event_that_reaches_it() -> None:
    cache = c.Cache()
    listed(cache, obj("a", "3"))
    early = asyncio.ensure_future(cache.wait_for_resource_version("4"))
    late = asyncio.ensure_future(cache.wait_for_resource_version("6"))
    await asyncio.sleep(0)
    assert not early.done()
    assert not late.done()
    cache.apply(w.Apply(obj("a", "4")))
    await early  # it must be done now: the cache shows the write
    assert cache.get("default/a")["metadata"]["resourceVersion"] == "4"  # type: ignore[index]
    assert not late.done()
    cache.apply(w.Apply(obj("b", "7")))  # a later write covers an earlier one
    await late
    await cache.wait_for_resource_version("2")  # already reached: returns at once


async def test_a_cancelled_wait_leaves_no_waiter_behind() -> None:
    cache = c.Cache()
    waiter = asyncio.ensure_future(cache.wait_for_resource_version("10"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert cache._rv_waiters == []


@pytest.mark.parametrize("rv", ["", "abc", "-1", "1.5", "²", "9" * 21])
async def test_only_integer_resource_versions_can_be_waited_for(rv: str) -> None:
    with pytest.raises(ValueError, match="not an integer resourceVersion"):
        await c.Cache().wait_for_resource_version(rv)
