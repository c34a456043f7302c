"""Events and conditions written to the real server."""

from __future__ import annotations

from setpoint.apimachinery.clock import FakeClock
from setpoint.client import Client
from setpoint.runtime import Condition, EventRecorder, get_condition, set_conditions

from .conftest import BOOK, book, install_books


async def test_events_aggregate_on_the_server(client: Client) -> None:
    await install_books(client)
    obj = await client.create(book("dune"))
    clock = FakeClock()
    recorder = EventRecorder(client, "library", clock=clock)
    await recorder.warning(obj, "Failed", "no shelf space")
    clock.advance(30)
    await recorder.warning(obj, "Failed", "no shelf space")
    await recorder.normal(obj, "Indexed", "done")
    events = (await client.list(("v1", "Event"), namespace="default"))["items"]
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"Failed", "Indexed"}
    failed = by_reason["Failed"]
    assert failed["count"] == 2
    assert failed["type"] == "Warning"
    assert failed["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert failed["firstTimestamp"] == "2024-01-01T00:00:00Z"
    assert failed["lastTimestamp"] == "2024-01-01T00:00:30Z"
    assert failed["reportingComponent"] == "library"
    # the events.k8s.io view of the same Event
    v1 = await client.get(("events.k8s.io/v1", "Event"), failed["metadata"]["name"])
    assert v1["regarding"]["name"] == "dune"


async def test_conditions_on_the_status_subresource(client: Client) -> None:
    await install_books(client)
    obj = await client.create(book("emma"))
    clock = FakeClock()
    stale = dict(obj)
    await client.patch_status(BOOK, "emma", {"status": {"other": "x"}})  # makes obj stale
    stored = await set_conditions(client, stale, Condition(type="Ready", status=False,
                                                           reason="Indexing"), clock=clock)
    ready = get_condition(stored, "Ready")
    assert ready is not None
    assert ready["observedGeneration"] == 1
    assert stored["status"]["other"] == "x"  # kept: the conflict made it re-read
    clock.advance(60)
    stored = await set_conditions(client, stored, Condition(type="Ready", status=True,
                                                            reason="Indexed"), clock=clock)
    assert get_condition(stored, "Ready")["lastTransitionTime"] == "2024-01-01T00:01:00Z"  # type: ignore[index]
