"""The event recorder: Event bodies and aggregation within the window, on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.runtime import events
from setpoint.runtime.clock import FakeAsyncClock

BOOK: dict[str, Any] = {"apiVersion": "example.com/v1", "kind": "Book",
        "metadata": {"name": "dune", "namespace": "lib", "uid": "u-1", "resourceVersion": "7"}}


class FakeEvents:
    """Just enough of the client: create and merge-patch Events, in memory."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: list[str] = []
        self.fail = False

    async def create(self, body: dict[str, Any], *, namespace: str) -> dict[str, Any]:
        self.calls.append("create")
        if self.fail:
            raise errors.ServiceUnavailable("down")
        key = (namespace, body["metadata"]["name"])
        if key in self.events:
            raise errors.AlreadyExists("exists")
        self.events[key] = body
        return body

    async def patch(self, resource: Any, name: str, patch: dict[str, Any], *,
                    namespace: str) -> dict[str, Any]:
        self.calls.append("patch")
        assert resource == ("v1", "Event")
        event = self.events.get((namespace, name))
        if event is None:
            raise errors.NotFound("gone")
        event.update(patch)
        return event


@pytest.fixture
def api() -> FakeEvents:
    return FakeEvents()


def recorder(api: FakeEvents, clock: FakeAsyncClock) -> events.EventRecorder:
    return events.EventRecorder(api, "book-controller", instance="pod-1", clock=clock)  # type: ignore[arg-type]


async def test_an_event_body(api: FakeEvents, clock: FakeAsyncClock) -> None:
    await recorder(api, clock).normal(BOOK, "Created", "made the index")
    [(namespace, name)] = api.events
    event = api.events[namespace, name]
    assert namespace == "lib"
    assert name.startswith("dune.")
    assert event == {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "lib"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Book", "name": "dune",
                           "namespace": "lib", "uid": "u-1", "resourceVersion": "7"},
        "reason": "Created", "message": "made the index", "type": "Normal",
        "source": {"component": "book-controller"}, "reportingComponent": "book-controller",
        "reportingInstance": "pod-1", "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z", "count": 1}


async def test_repeats_within_the_window_are_aggregated(api: FakeEvents,
                                                        clock: FakeAsyncClock) -> None:
    r = recorder(api, clock)
    await r.warning(BOOK, "Failed", "no space")
    clock.advance(60)
    await r.warning(BOOK, "Failed", "no space")
    clock.advance(599)
    await r.warning(BOOK, "Failed", "no space")
    assert api.calls == ["create", "patch", "patch"]
    [event] = api.events.values()
    assert event["count"] == 3
    assert event["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert event["lastTimestamp"] == "2024-01-01T00:10:59Z"
    clock.advance(601)  # the window is measured from the last repeat: now it has passed
    await r.warning(BOOK, "Failed", "no space")
    assert api.calls[-1] == "create"
    assert len(api.events) == 2


async def test_different_series_are_separate(api: FakeEvents, clock: FakeAsyncClock) -> None:
    r = recorder(api, clock)
    other = {**BOOK, "metadata": {**BOOK["metadata"], "uid": "u-2", "name": "emma"}}
    await r.normal(BOOK, "Synced", "ok")
    await r.normal(BOOK, "Synced", "different message")
    await r.warning(BOOK, "Synced", "ok")
    await r.normal(BOOK, "Other", "ok")
    await r.normal(other, "Synced", "ok")
    assert api.calls == ["create"] * 5
    assert len({name for _, name in api.events}) == 5  # unique names, even at one instant


async def test_a_deleted_event_starts_a_new_series(api: FakeEvents,
                                                   clock: FakeAsyncClock) -> None:
    r = recorder(api, clock)
    await r.normal(BOOK, "Synced", "ok")
    api.events.clear()
    await r.normal(BOOK, "Synced", "ok")
    assert api.calls == ["create", "patch", "create"]
    [event] = api.events.values()
    assert event["count"] == 1


async def test_recording_never_raises(api: FakeEvents, clock: FakeAsyncClock) -> None:
    api.fail = True
    await recorder(api, clock).normal(BOOK, "Synced", "ok")
    with pytest.raises(ValueError, match="Normal or Warning"):
        await recorder(api, clock).event(BOOK, "Info", "Synced", "ok")  # type: ignore[arg-type]


async def test_cluster_scoped_objects_report_in_default(api: FakeEvents,
                                                        clock: FakeAsyncClock) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u"}}
    await recorder(api, clock).normal(node, "Ready", "ok")
    [(namespace, _)] = api.events
    assert namespace == "default"


async def test_long_messages_are_cut(api: FakeEvents, clock: FakeAsyncClock) -> None:
    await recorder(api, clock).normal(BOOK, "Long", "x" * 5000)
    [event] = api.events.values()
    assert len(event["message"]) == events.MAX_MESSAGE
    assert event["message"].endswith("...")


async def test_the_series_cache_is_bounded(api: FakeEvents, clock: FakeAsyncClock) -> None:
    r = events.EventRecorder(api, "c", clock=clock, max_entries=2)  # type: ignore[arg-type]
    for reason in ("A", "B", "C", "A"):
        await r.normal(BOOK, reason, "m")
    assert api.calls == ["create"] * 4  # A was forgotten when C came
