"""Reconciles published as ``events.k8s.io/v1`` Events against a real in-process server: what
one Event says, repeats counted into a series written at most once per interval, failures as
Warnings, the per-object budget, and an expired Event replaced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, validation
from setpoint.client import Client, ClientConfig
from setpoint.runtime import ReconcileEvents, ReconcileEventsConfig, Trigger
from setpoint.runtime import history as rthistory
from setpoint.runtime import reconcile_events as rtpublish
from tests.integration.runtime.conftest import book, install_books

EVENTS = ("events.k8s.io/v1", "Event")


def entry(result: str = "success", *, cause: str = "add", obj: str = "default/dune",
          seconds: float = 0.012, error: str = "") -> rthistory.Entry:
    return rthistory.Entry("2026-01-01T00:00:00+00:00",
                           (Trigger(cause, watch="for Book", object=obj),), 1, result,
                           seconds, error)


async def reconcile_events_of(client: Client, name: str) -> list[dict[str, Any]]:
    found = await client.list(EVENTS, namespace="default")
    return sorted((e for e in found["items"]
                   if e["regarding"]["name"] == name and e.get("action") == "Reconcile"),
                  key=lambda e: e["metadata"]["name"])


async def a_book(client: Client, name: str) -> dict[str, Any]:
    await install_books(client)
    created: dict[str, Any] = await client.create(book(name))
    return created


async def test_a_reconcile_becomes_an_event_any_client_reads(client: Client) -> None:
    dune = await a_book(client, "dune")
    clock = base_clock.FakeClock(datetime(2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC))
    publisher = ReconcileEvents(client, "book", instance="replica-1", clock=clock)
    await publisher.publish(dune, entry())
    [event] = await reconcile_events_of(client, "dune")
    assert event["regarding"] == {
        "apiVersion": "example.com/v1", "kind": "Book", "namespace": "default",
        "name": "dune", "uid": dune["metadata"]["uid"],
        "resourceVersion": dune["metadata"]["resourceVersion"]}
    assert (event["reportingController"], event["reportingInstance"], event["action"],
            event["reason"], event["type"]) == ("book", "replica-1", "Reconcile",
                                                "Reconciled", "Normal")
    assert event["note"] == "success in 12.0 ms; triggered by add by for Book of default/dune"
    assert event["eventTime"] == "2026-05-01T10:00:00.123456Z"
    assert "series" not in event
    # the same Event through the core/v1 view, as kubectl describe and the UI read it
    core = await client.get(("v1", "Event"), event["metadata"]["name"], namespace="default")
    assert (core["involvedObject"]["uid"], core["reportingComponent"], core["message"]) == (
        dune["metadata"]["uid"], "book", event["note"])


async def test_repeats_count_into_one_series_written_at_most_once_per_interval(
        client: Client) -> None:
    dune = await a_book(client, "dune")
    clock = base_clock.FakeClock()
    publisher = ReconcileEvents(client, "book", clock=clock)
    for _ in range(5):
        await publisher.publish(dune, entry(cause="update", seconds=0.001))
    [event] = await reconcile_events_of(client, "dune")
    assert "series" not in event  # the repeats wait for the interval
    clock.advance(10.0)
    await publisher.publish(dune, entry(cause="update", seconds=0.002))
    [event] = await reconcile_events_of(client, "dune")
    assert event["series"]["count"] == 6
    assert event["series"]["lastObservedTime"].endswith("Z")
    assert event["note"].startswith("success in 1.0 ms")  # the series' first reconcile
    await publisher.publish(dune, entry(cause="update"))  # within the interval again
    [event] = await reconcile_events_of(client, "dune")
    assert event["series"]["count"] == 6
    # a repeat after the series window starts a new Event
    clock.advance(361.0)
    await publisher.publish(dune, entry(cause="update"))
    assert len(await reconcile_events_of(client, "dune")) == 2


async def test_a_failed_reconcile_is_a_warning_with_its_error(client: Client) -> None:
    dune = await a_book(client, "dune")
    publisher = ReconcileEvents(client, "book", clock=base_clock.FakeClock())
    await publisher.publish(dune, entry("error", cause="retry", error="ValueError: no pages"))
    [event] = await reconcile_events_of(client, "dune")
    assert (event["reason"], event["type"]) == ("ReconcileFailed", "Warning")
    assert event["note"].endswith("; error: ValueError: no pages")
    assert event["note"].startswith("error in 12.0 ms; triggered by retry")


async def test_an_objects_budget_bounds_the_events_it_starts(client: Client) -> None:
    dune = await a_book(client, "dune")
    clock = base_clock.FakeClock()
    publisher = ReconcileEvents(client, "book", clock=clock, config=ReconcileEventsConfig(
        burst=2, refill_seconds=10.0, series_interval=10.0))
    for i in range(5):  # five different reconciles: two Events, the rest counted in the last
        await publisher.publish(dune, entry(cause="update", obj=f"default/child-{i}"))
    events = await reconcile_events_of(client, "dune")
    assert len(events) == 2
    assert "child-1" in events[1]["note"]
    await publisher.publish(dune, entry("error", cause="retry", error="E"))
    assert publisher.dropped == 1  # a failure with no budget and no failure series to join
    clock.advance(10.0)  # one Event more; and the counted repeats are written
    await publisher.publish(dune, entry(cause="update", obj="default/child-1"))
    await publisher.publish(dune, entry(cause="update", obj="default/child-9"))
    events = await reconcile_events_of(client, "dune")
    assert len(events) == 3
    assert events[1]["series"]["count"] == 5
    assert "child-9" in events[2]["note"]


async def test_the_controllers_budget_bounds_all_its_writes(client: Client) -> None:
    await install_books(client)
    books = [await client.create(book(f"b{i}")) for i in range(5)]
    clock = base_clock.FakeClock()
    publisher = ReconcileEvents(client, "book", clock=clock, config=ReconcileEventsConfig(
        controller_burst=3, controller_rate=0.1, series_interval=1.0))
    for obj in books:
        await publisher.publish(obj, entry())
    published = [name for name in ("b0", "b1", "b2", "b3", "b4")
                 if await reconcile_events_of(client, name)]
    assert published == ["b0", "b1", "b2"]
    assert publisher.dropped == 2
    clock.advance(5.0)  # half a write: a repeat is counted, its series not written yet
    await publisher.publish(books[0], entry())
    assert "series" not in (await reconcile_events_of(client, "b0"))[0]
    clock.advance(5.0)  # one write more
    await publisher.publish(books[0], entry())
    assert (await reconcile_events_of(client, "b0"))[0]["series"]["count"] == 3


async def test_an_expired_event_is_replaced_by_a_new_one(client: Client) -> None:
    dune = await a_book(client, "dune")
    clock = base_clock.FakeClock()
    publisher = ReconcileEvents(client, "book", clock=clock)
    await publisher.publish(dune, entry())
    [first] = await reconcile_events_of(client, "dune")
    await client.delete(EVENTS, first["metadata"]["name"], namespace="default")
    clock.advance(10.0)
    await publisher.publish(dune, entry())
    [second] = await reconcile_events_of(client, "dune")
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert "series" not in second


async def test_publishing_never_raises(client: Client) -> None:
    dune = await a_book(client, "dune")
    async with Client(ClientConfig(server="http://127.0.0.1:1")) as nowhere:
        publisher = ReconcileEvents(nowhere, "book", clock=base_clock.FakeClock())
        await publisher.publish(dune, entry())  # the write fails: logged, not raised
        await publisher.publish({"metadata": {}}, entry())  # no name: nothing to publish
    assert await reconcile_events_of(client, "dune") == []


def test_the_note_is_bounded() -> None:
    note = rtpublish.describe(entry(error="x" * 5000))
    assert len(note) == 1024
    assert note.endswith("…")


@pytest.mark.parametrize("bad", [{"burst": 0}, {"refill_seconds": 0}, {"series_interval": -1},
                                 {"series_window": 1e9}, {"max_series": 0},
                                 {"max_objects": 10**7}, {"controller_burst": 0},
                                 {"controller_rate": 0}])
def test_the_config_is_bounded(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must be"):
        ReconcileEventsConfig(**bad)


async def test_an_object_whose_name_is_no_dns_subdomain_gets_a_valid_event_name(
        client: Client) -> None:
    role = await client.create({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "system:Example_Role"}, "rules": []})
    publisher = ReconcileEvents(client, "roles", clock=base_clock.FakeClock())
    await publisher.publish(role, entry())
    found = await client.list(EVENTS, namespace="default")
    [event] = [e for e in found["items"] if e["regarding"]["name"] == "system:Example_Role"]
    assert event["metadata"]["name"].startswith("system-example-role.")


@given(st.text(max_size=300))
def test_an_event_name_is_always_a_dns_subdomain(name: str) -> None:
    prefix = rtpublish.name_prefix(name)
    assert 1 <= len(prefix) <= rtpublish.MAX_NAME_PREFIX
    assert validation.is_dns1123_subdomain(f"{prefix}.{2**63 - 1:x}") == []


async def test_a_refused_writer_does_not_write_on_every_reconcile(client: Client) -> None:
    # an operator whose account may not create Events: its failed writes are bounded by
    # the controller's budget too, not repeated by every reconcile
    dune = await a_book(client, "dune")
    writes = 0

    class Refusing:
        async def create(self, body: Any, **kwargs: Any) -> Any:
            nonlocal writes
            writes += 1
            raise errors.Forbidden("events.events.k8s.io is forbidden")

    clock = base_clock.FakeClock()
    publisher = ReconcileEvents(Refusing(), "book", clock=clock,  # type: ignore[arg-type]
                                config=ReconcileEventsConfig(controller_burst=2,
                                                             controller_rate=0.1))
    for _ in range(20):
        await publisher.publish(dune, entry())
    assert writes == 2
    clock.advance(10.0)
    await publisher.publish(dune, entry())
    assert writes == 3
