"""Conditions: transition times, order, and the status write with conflict retry."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.runtime import conditions as c
from setpoint.runtime.clock import FakeAsyncClock

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_transition_time_changes_only_with_status() -> None:
    first = c.set_condition([], c.Condition(type="Ready", status=False, reason="Pending"), now=T0)
    assert first == [{"type": "Ready", "status": "False", "reason": "Pending", "message": "",
                      "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    same = c.set_condition(first, c.Condition(type="Ready", status="False", reason="Waiting",
                                              message="still"), now=T1)
    assert same[0]["lastTransitionTime"] == "2024-01-01T00:00:00Z"
    assert (same[0]["reason"], same[0]["message"]) == ("Waiting", "still")
    flipped = c.set_condition(same, c.Condition(type="Ready", status=True, reason="Done"),
                              now=T1)
    assert flipped[0]["lastTransitionTime"] == "2024-01-01T00:05:00Z"
    assert first[0]["reason"] == "Pending"  # inputs are not mutated


def test_order_is_kept_and_new_types_appended() -> None:
    conds = [{"type": "A", "status": "True"}, {"type": "B", "status": "True"}]
    out = c.set_condition(conds, c.Condition(type="A", status=False, reason="X"), now=T0)
    out = c.set_condition(out, c.Condition(type="C", status=True, reason="Y",
                                           observed_generation=3), now=T0)
    assert [x["type"] for x in out] == ["A", "B", "C"]
    assert out[2]["observedGeneration"] == 3
    assert [x["type"] for x in c.remove_condition(out, "B")] == ["A", "C"]


@pytest.mark.parametrize("kwargs", [
    {"type": "Ready", "status": "yes", "reason": "X"},
    {"type": "", "status": True, "reason": "X"},
    {"type": "Ready", "status": True, "reason": "not camel"},
    {"type": "Ready", "status": True, "reason": ""},
], ids=["status", "type", "reason", "empty reason"])
def test_invalid_conditions(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each case has its own message
        c.Condition(**kwargs)


def test_reads() -> None:
    obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert c.is_true(obj, "Ready")
    assert not c.is_true(obj, "Synced")
    assert c.get_condition(obj, "Ready") == {"type": "Ready", "status": "True"}
    assert c.get_condition([{"type": "X"}], "X") == {"type": "X"}


class FakeStatus:
    """Stores one object; patch_status checks the resourceVersion like the server."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj = obj
        self.patches: list[dict[str, Any]] = []
        self.concurrent_writes = 0

    def _bump(self) -> None:
        meta = self.obj["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    async def patch_status(self, resource: Any, name: str, patch: dict[str, Any], *,
                           namespace: str | None, field_manager: str | None) -> dict[str, Any]:
        assert resource == ("example.com/v1", "Book")
        self.patches.append(patch)
        if self.concurrent_writes:
            self.concurrent_writes -= 1
            self._bump()
        if patch["metadata"]["resourceVersion"] != self.obj["metadata"]["resourceVersion"]:
            raise errors.Conflict("the object has been modified")
        self.obj.setdefault("status", {}).update(patch["status"])
        self._bump()
        return copy.deepcopy(self.obj)

    async def get(self, resource: Any, name: str, *, namespace: str | None) -> dict[str, Any]:
        return copy.deepcopy(self.obj)


def book() -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Book",
            "metadata": {"name": "dune", "namespace": "lib", "generation": 4,
                         "resourceVersion": "10"}}


async def test_set_conditions_writes_status_with_observed_generation(
        clock: FakeAsyncClock) -> None:
    api = FakeStatus(book())
    ready = c.Condition(type="Ready", status=True, reason="Synced")
    stored = await c.set_conditions(api, book(), ready, clock=clock)  # type: ignore[arg-type]
    assert stored["status"]["conditions"][0]["observedGeneration"] == 4
    assert api.patches[0]["metadata"] == {"resourceVersion": "10"}
    again = await c.set_conditions(api, stored, ready, clock=clock)  # type: ignore[arg-type]
    assert again == stored
    assert len(api.patches) == 1  # nothing changed: nothing written


async def test_set_conditions_retries_on_conflict(clock: FakeAsyncClock) -> None:
    api = FakeStatus(book())
    api.concurrent_writes = 2
    ready = c.Condition(type="Ready", status=True, reason="Synced")
    stored = await c.set_conditions(api, book(), ready, clock=clock)  # type: ignore[arg-type]
    assert c.is_true(stored, "Ready")
    assert len(api.patches) == 3
    api.concurrent_writes = 5
    with pytest.raises(errors.Conflict):
        await c.set_conditions(api, stored, c.Condition(type="Ready", status=False,  # type: ignore[arg-type]
                                                        reason="Broken"), clock=clock,
                               attempts=2)
