"""The finalizer helper: add before apply, cleanup then remove, guarded patches."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from setpoint.apimachinery import errors, patch
from setpoint.client import PatchType
from setpoint.runtime import finalizers
from setpoint.runtime.reconcile import Result

NAME = "example.com/cleanup"


class FakeObjects:
    """One stored object; JSON patches applied as the server would (a failed test is 422)."""

    def __init__(self, obj: dict[str, Any] | None) -> None:
        self.obj = obj
        self.patches: list[list[dict[str, Any]]] = []

    async def patch(self, resource: Any, name: str, ops: list[dict[str, Any]], *,
                    namespace: str | None, patch_type: PatchType) -> dict[str, Any]:
        assert patch_type is PatchType.JSON
        assert resource == ("example.com/v1", "Book")
        self.patches.append(ops)
        if self.obj is None:
            raise errors.NotFound(f'books.example.com "{name}" not found')
        try:
            result = patch.json_patch(self.obj, ops)
        except patch.PatchError as e:
            raise errors.Invalid("the server rejected our request") from e
        result["metadata"]["resourceVersion"] = str(
            int(result["metadata"]["resourceVersion"]) + 1)
        self.obj = result
        return copy.deepcopy(result)


def book(*, finalizers_: list[str] | None = None, deleting: bool = False,
         rv: str = "5") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "dune", "namespace": "lib", "resourceVersion": rv}
    if finalizers_ is not None:
        meta["finalizers"] = finalizers_
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"apiVersion": "example.com/v1", "kind": "Book", "metadata": meta}


class Steps:
    def __init__(self, cleanup_result: Result | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.cleanup_result = cleanup_result

    async def apply(self, obj: Any) -> Result:
        self.calls.append(("apply", obj["metadata"]["resourceVersion"]))
        return Result.after(60)

    async def cleanup(self, obj: Any) -> Result | None:
        self.calls.append(("cleanup", obj["metadata"]["resourceVersion"]))
        return self.cleanup_result


async def run(api: FakeObjects, obj: dict[str, Any], steps: Steps) -> Result:
    return await finalizers.with_finalizer(obj, NAME, api, apply=steps.apply,  # type: ignore[arg-type]
                                           cleanup=steps.cleanup)


async def test_live_object_gets_the_finalizer_before_apply() -> None:
    api = FakeObjects(book())
    steps = Steps()
    assert await run(api, book(), steps) == Result.after(60)
    assert api.patches == [[
        {"op": "test", "path": "/metadata/resourceVersion", "value": "5"},
        {"op": "add", "path": "/metadata/finalizers", "value": [NAME]}]]
    assert steps.calls == [("apply", "6")]  # apply sees the object the patch returned
    assert await run(api, api.obj, steps) == Result.after(60)
    assert len(api.patches) == 1  # already present: no write


async def test_the_finalizer_is_appended_to_others() -> None:
    api = FakeObjects(book(finalizers_=["other.io/keep"]))
    await run(api, book(finalizers_=["other.io/keep"]), Steps())
    assert api.obj["metadata"]["finalizers"] == ["other.io/keep", NAME]


async def test_deletion_runs_cleanup_then_removes_only_ours() -> None:
    obj = book(finalizers_=["a.io/x", NAME, "b.io/y"], deleting=True)
    api = FakeObjects(copy.deepcopy(obj))
    steps = Steps()
    assert await run(api, obj, steps) == Result.done()
    assert steps.calls == [("cleanup", "5")]
    assert api.obj["metadata"]["finalizers"] == ["a.io/x", "b.io/y"]
    assert api.patches[0][1:] == [{"op": "test", "path": "/metadata/finalizers/1",
                                   "value": NAME},
                                  {"op": "remove", "path": "/metadata/finalizers/1"}]


async def test_cleanup_can_ask_to_wait() -> None:
    obj = book(finalizers_=[NAME], deleting=True)
    api = FakeObjects(copy.deepcopy(obj))
    steps = Steps(cleanup_result=Result.after(5))
    assert await run(api, obj, steps) == Result.after(5)
    assert api.patches == []


async def test_deleting_without_our_finalizer_does_nothing() -> None:
    api = FakeObjects(book(deleting=True))
    steps = Steps()
    assert await run(api, book(deleting=True), steps) == Result.done()
    assert (steps.calls, api.patches) == ([], [])


async def test_a_stale_object_is_a_conflict() -> None:
    api = FakeObjects(book(rv="9"))
    steps = Steps()
    with pytest.raises(errors.Conflict, match="changed"):
        await run(api, book(rv="5"), steps)
    assert steps.calls == []
    deleting = book(finalizers_=[NAME], deleting=True, rv="5")
    api = FakeObjects(book(finalizers_=[NAME], deleting=True, rv="9"))
    with pytest.raises(errors.Conflict):
        await run(api, deleting, steps)
    assert steps.calls == [("cleanup", "5")]  # cleanup ran; it runs again on the retry


async def test_a_stale_read_of_an_object_already_gone_is_done() -> None:
    # an earlier reconcile removed the last finalizer and the object went; the cache still
    # shows it terminating with ours
    api = FakeObjects(None)
    steps = Steps()
    assert await run(api, book(finalizers_=[NAME], deleting=True), steps) == Result.done()
    assert steps.calls == [("cleanup", "5")]  # cleanup is idempotent; it may run again
    assert len(api.patches) == 1


async def test_an_object_gone_before_the_finalizer_was_added_is_never_applied() -> None:
    api = FakeObjects(None)
    steps = Steps()
    assert await run(api, book(), steps) == Result.done()
    assert steps.calls == []


def test_finalizer_names_are_qualified() -> None:
    with pytest.raises(ValueError, match="qualified"):
        finalizers.Finalizer(None, "cleanup")  # type: ignore[arg-type]
