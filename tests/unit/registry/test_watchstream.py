"""The watch stream: how a watch with selectors reports an event, decided from whether the
object matches before and after it; and a watch through a real store."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from setpoint.apimachinery import selectors
from setpoint.registry.options import DeleteOptions, ListOptions, WatchOptions, WriteOptions
from setpoint.registry.watchstream import no_selectors, reported_type

from .storefixture import configmap, configmap_store


@pytest.mark.parametrize(("event_type", "now", "was", "reported"), [
    ("ADDED", True, False, "ADDED"),
    ("ADDED", False, False, None),
    ("MODIFIED", True, True, "MODIFIED"),
    ("MODIFIED", True, False, "ADDED"),        # started matching
    ("MODIFIED", False, True, "DELETED"),      # stopped matching
    ("MODIFIED", False, False, None),
    ("DELETED", True, True, "DELETED"),
    ("DELETED", False, True, "DELETED"),
    ("DELETED", True, False, None),
    ("DELETED", False, False, None),
])
def test_how_an_event_is_reported(event_type: str, now: bool, was: bool,
                                  reported: str | None) -> None:
    assert reported_type(event_type, now, was) == reported


def test_a_report_never_invents_an_object() -> None:
    """Whatever the event, a watch reports ADDED only of a matching object, DELETED only of
    one that matched before."""
    for event_type, now, was in itertools.product(("ADDED", "MODIFIED", "DELETED"),
                                                  (False, True), (False, True)):
        reported = reported_type(event_type, now, was)
        if reported in ("ADDED", "MODIFIED"):
            assert now
        if reported in ("DELETED", "MODIFIED"):
            assert was or (event_type == "DELETED" and now)


def test_no_selectors() -> None:
    assert no_selectors(ListOptions())
    assert no_selectors(WatchOptions(label_selector=selectors.LabelSelector.parse("")))
    assert not no_selectors(WatchOptions(label_selector=selectors.LabelSelector.parse("a=b")))
    assert not no_selectors(ListOptions(field_selector=selectors.FieldSelector.parse(
        "metadata.name=x")))


async def test_a_selective_watch_sees_objects_enter_and_leave_its_selection() -> None:
    async with configmap_store() as (store, _):
        stream = await store.watch("ns", "v1", WatchOptions(
            resource_version=str(store.cache_revision),
            label_selector=selectors.LabelSelector.parse("tier=web")))
        try:
            await store.create("ns", configmap("db", labels={"tier": "db"}), "v1",
                               WriteOptions())
            web = await store.create("ns", configmap("cm", labels={"tier": "db"}), "v1",
                                     WriteOptions())
            obj = web.object
            for tier in ("web", "web2", "web"):
                obj = (await store.update("ns", "cm", {**obj, "metadata": {
                    **obj["metadata"], "labels": {"tier": tier}}}, "v1",
                    WriteOptions())).object
            obj = (await store.update("ns", "cm", {**obj, "data": {"k": "changed"}}, "v1",
                                      WriteOptions())).object
            await store.delete("ns", "cm", "v1", DeleteOptions())
            seen = []
            async with asyncio.timeout(10):
                for _ in range(5):
                    event = await stream.next_event()
                    assert event is not None
                    seen.append((event.type, event.object["metadata"]["labels"]["tier"]))
            assert seen == [("ADDED", "web"), ("DELETED", "web2"), ("ADDED", "web"),
                            ("MODIFIED", "web"), ("DELETED", "web")]
            assert stream.last_revision == store.cache_revision
        finally:
            stream.close()
