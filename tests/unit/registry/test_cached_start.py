"""Updates and patches start from the watch cache's copy of the object, and from storage
whenever that copy turns out to be out of date: a write computed from a stale copy is never
stored, never answered as a no-op, and never refused for what the copy said."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.registry.options import WriteOptions
from setpoint.registry.patching import PATCH_JSON, PATCH_MERGE
from setpoint.registry.store import Store
from setpoint.storage import MemoryBackend

from .storefixture import configmap, configmap_store_with_cache

KEY = "/registry/core/configmaps/default/cm"


async def stale(stack: contextlib.AsyncExitStack, data: dict[str, str]
                ) -> tuple[Store, MemoryBackend, int]:
    """A store whose cache holds ``cm`` with ``{"k": "v"}`` while storage has moved on to
    ``data`` (the cache stopped following storage in between)."""
    store, backend, cache, task = await stack.enter_async_context(configmap_store_with_cache())
    created = await store.create("default", configmap("cm"), "v1", WriteOptions())
    await cache.wait_for(int(created.object["metadata"]["resourceVersion"]))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    current = await backend.get(KEY)
    assert current is not None
    stored = orjson.loads(current.value)
    stored["data"] = data
    moved = await backend.update(KEY, orjson.dumps(stored), current.mod_revision)
    cached = cache.get(KEY)
    assert cached is not None
    assert cached["data"] == {"k": "v"}
    return store, backend, moved.mod_revision


@pytest.fixture
async def stack() -> AsyncIterator[contextlib.AsyncExitStack]:
    async with contextlib.AsyncExitStack() as exits:
        yield exits


async def stored_data(backend: MemoryBackend) -> tuple[Any, int]:
    kv = await backend.get(KEY)
    assert kv is not None
    return orjson.loads(kv.value)["data"], kv.mod_revision


async def test_a_patch_from_a_stale_copy_lands_on_the_stored_object(
        stack: contextlib.AsyncExitStack) -> None:
    store, backend, revision = await stale(stack, {"k": "w", "other": "kept"})
    result = await store.patch("default", "cm", PATCH_MERGE, {"data": {"added": "x"}}, "v1",
                               WriteOptions())
    assert result.object["data"] == {"k": "w", "other": "kept", "added": "x"}
    data, now = await stored_data(backend)
    assert data == {"k": "w", "other": "kept", "added": "x"}
    assert now > revision
    assert result.object["metadata"]["resourceVersion"] == str(now)


async def test_a_patch_that_changes_nothing_in_the_stale_copy_is_still_written(
        stack: contextlib.AsyncExitStack) -> None:
    # from the cache's copy, {"k": "v"} is a no-op; storage holds {"k": "w"}
    store, backend, revision = await stale(stack, {"k": "w"})
    result = await store.patch("default", "cm", PATCH_MERGE, {"data": {"k": "v"}}, "v1",
                               WriteOptions())
    data, now = await stored_data(backend)
    assert data == {"k": "v"}
    assert now > revision
    assert result.object["metadata"]["resourceVersion"] == str(now)


async def test_a_json_patch_test_is_decided_on_the_stored_object(
        stack: contextlib.AsyncExitStack) -> None:
    store, backend, _ = await stale(stack, {"k": "w"})
    body = [{"op": "test", "path": "/data/k", "value": "w"},
            {"op": "replace", "path": "/data/k", "value": "z"}]
    result = await store.patch("default", "cm", PATCH_JSON, body, "v1", WriteOptions())
    assert result.object["data"] == {"k": "z"}
    assert (await stored_data(backend))[0] == {"k": "z"}
    # and one that fails on the stored object still fails
    body[0]["value"] = "v"
    with pytest.raises(errors.Invalid):
        await store.patch("default", "cm", PATCH_JSON, body, "v1", WriteOptions())


async def test_an_update_naming_the_stored_revision_is_no_conflict(
        stack: contextlib.AsyncExitStack) -> None:
    store, backend, revision = await stale(stack, {"k": "w"})
    body = {**configmap("cm", resourceVersion=str(revision)), "data": {"k": "put"}}
    result = await store.update("default", "cm", body, "v1", WriteOptions())
    assert result.object["data"] == {"k": "put"}
    assert (await stored_data(backend))[0] == {"k": "put"}
    # the revision the cache's copy has is the stale one: a conflict
    old = {**configmap("cm", resourceVersion=str(revision - 1)), "data": {"k": "late"}}
    with pytest.raises(errors.Conflict):
        await store.update("default", "cm", old, "v1", WriteOptions())
    assert (await stored_data(backend))[0] == {"k": "put"}


async def test_an_object_deleted_behind_the_cache_is_not_found(
        stack: contextlib.AsyncExitStack) -> None:
    store, backend, revision = await stale(stack, {"k": "w"})
    await backend.delete(KEY, revision)
    with pytest.raises(errors.NotFound):
        await store.patch("default", "cm", PATCH_MERGE, {"data": {"k": "x"}}, "v1",
                          WriteOptions())
    assert await backend.get(KEY) is None


async def test_a_current_copy_answers_a_no_op_without_a_write() -> None:
    async with configmap_store_with_cache() as (store, backend, cache, _):
        created = await store.create("default", configmap("cm"), "v1", WriteOptions())
        revision = int(created.object["metadata"]["resourceVersion"])
        await cache.wait_for(revision)
        result = await store.patch("default", "cm", PATCH_MERGE, {"data": {"k": "v"}}, "v1",
                                   WriteOptions())
        assert result.object["metadata"]["resourceVersion"] == str(revision)
        assert (await stored_data(backend))[1] == revision
        changed = await store.patch("default", "cm", PATCH_MERGE, {"data": {"k": "x"}}, "v1",
                                    WriteOptions())
        assert changed.object["data"] == {"k": "x"}
        assert (await stored_data(backend)) == ({"k": "x"}, revision + 1)
