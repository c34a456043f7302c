"""Contract: watches opened with ``progress=True`` also yield progress markers.

A marker ``Progress(r)`` says every event under the prefix up to ``r`` has been yielded; it
never overtakes an event, and each is above the last event or marker. Memory and SQLite send
one as soon as a write outside the prefix is published; the etcd fixture asks etcd for one
every 100 ms, so the tests wait for markers rather than expect them at a given step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.storage import Backend, Event, Progress
from tests.integration.storage.storage_testkit import TIMEOUT, brief

Item = Event | Progress


async def _until_progress(stream: AsyncIterator[Item], revision: int) -> list[Item]:
    """Everything the stream yields up to and including a marker at ``revision`` or above."""
    items: list[Item] = []
    async with asyncio.timeout(TIMEOUT):
        while True:
            item = await anext(stream)
            items.append(item)
            if isinstance(item, Progress) and item.revision >= revision:
                return items


def _check_order(items: list[Item], after: int) -> None:
    """Markers and events strictly increase, starting above ``after``."""
    last = after
    for item in items:
        assert item.revision > last, items
        last = item.revision


async def test_writes_outside_the_prefix_are_reported_as_progress(backend: Backend) -> None:
    await backend.create("/a/1", b"x")                  # 1
    stream = backend.watch("/a/", 2, progress=True)
    await backend.create("/b/1", b"x")                  # 2
    await backend.create("/b/2", b"x")                  # 3

    items = await _until_progress(stream, 3)

    assert all(isinstance(item, Progress) for item in items)
    assert items[-1] == Progress(3)
    _check_order(items, 1)


async def test_a_marker_never_overtakes_an_event(backend: Backend) -> None:
    stream = backend.watch("/a/", 1, progress=True)
    await backend.create("/b/1", b"x")                  # 1
    await backend.create("/a/1", b"x")                  # 2
    await backend.create("/b/2", b"x")                  # 3
    await backend.create("/a/2", b"x")                  # 4
    await backend.create("/b/3", b"x")                  # 5

    items = await _until_progress(stream, 5)

    events = [item for item in items if isinstance(item, Event)]
    assert brief(events) == [("PUT", "/a/1", b"x", 2), ("PUT", "/a/2", b"x", 4)]
    assert items[-1] == Progress(5)
    _check_order(items, 0)


async def test_replayed_history_then_progress_to_the_newest_revision(backend: Backend) -> None:
    for i in range(3):
        await backend.create(f"/a/{i}", b"x")           # 1, 3, 5
        await backend.create(f"/b/{i}", b"x")           # 2, 4, 6
    stream = backend.watch("/a/", 1, progress=True)

    items = await _until_progress(stream, 6)

    events = [item for item in items if isinstance(item, Event)]
    assert [e.revision for e in events] == [1, 3, 5]
    assert items[-1] == Progress(6)
    _check_order(items, 0)


async def test_an_event_after_a_marker_is_still_delivered(backend: Backend) -> None:
    stream = backend.watch("/a/", 1, progress=True)
    await backend.create("/b/1", b"x")                  # 1
    await _until_progress(stream, 1)

    await backend.create("/a/1", b"x")                  # 2

    async with asyncio.timeout(TIMEOUT):
        item = await anext(stream)
    assert isinstance(item, Event)
    assert brief([item]) == [("PUT", "/a/1", b"x", 2)]


async def test_watches_without_progress_yield_events_only(backend: Backend) -> None:
    stream = backend.watch("/a/", 1)
    await backend.create("/b/1", b"x")

    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await anext(stream)
    await backend.create("/a/1", b"x")

    async with asyncio.timeout(TIMEOUT):
        item = await anext(stream)
    assert isinstance(item, Event)
    assert item.revision == 2
