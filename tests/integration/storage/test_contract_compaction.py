"""Contract: compaction forgets history at or below a revision, keeping every newest value."""

from __future__ import annotations

import pytest

from setpoint.storage import Backend, Expired, FutureRevision, KeyValue
from tests.integration.storage.storage_testkit import Opener, brief, take


async def _history(backend: Backend) -> None:
    a = await backend.create("/a", b"a1")             # 1
    await backend.create("/b", b"b1")                 # 2
    a = await backend.update("/a", b"a2", a.mod_revision)  # 3
    await backend.delete("/b")                        # 4
    await backend.create("/c", b"c1")                 # 5
    await backend.update("/a", b"a3", a.mod_revision)  # 6
    await backend.create("/d", b"d1")                 # 7
    await backend.delete("/d")                        # 8


async def test_compaction_keeps_the_newest_values(backend: Backend) -> None:
    await _history(backend)
    before = await backend.list("/")

    await backend.compact(6)

    assert await backend.compacted_revision() == 6
    assert await backend.current_revision() == 8
    after = await backend.list("/")
    assert after == before
    assert [kv.key for kv in after.kvs] == ["/a", "/c"]
    assert await backend.get("/a") == KeyValue("/a", b"a3", 1, 6)
    assert await backend.get("/b") is None
    assert await backend.get("/c", revision=7) == KeyValue("/c", b"c1", 5, 5)


@pytest.mark.parametrize("revision", [1, 3])
async def test_reads_below_the_compacted_revision_raise_expired(backend: Backend,
                                                          revision: int) -> None:
    await _history(backend)
    await backend.compact(4)

    with pytest.raises(Expired) as caught:
        await backend.get("/a", revision=revision)
    assert (caught.value.requested, caught.value.compacted) == (revision, 4)
    with pytest.raises(Expired):
        await backend.list("/", revision=revision)


@pytest.mark.parametrize(("revision", "keys"), [(4, ["/a"]), (5, ["/a", "/c"])])
async def test_reads_at_and_above_the_compacted_revision_still_work(
        backend: Backend, revision: int, keys: list[str]) -> None:
    await _history(backend)
    await backend.compact(4)

    assert (await backend.get("/a", revision=revision)).value == b"a2"  # type: ignore[union-attr]
    assert await backend.get("/b", revision=revision) is None
    assert [kv.key for kv in (await backend.list("/", revision=revision)).kvs] == keys


@pytest.mark.parametrize("start", [0, 1, 4])
async def test_watch_from_a_compacted_revision_raises_expired_on_first_step(
        backend: Backend, start: int) -> None:
    await _history(backend)
    await backend.compact(4)
    stream = backend.watch("/", start)

    with pytest.raises(Expired) as caught:
        await anext(stream)

    assert caught.value.compacted == 4
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_watch_after_the_compacted_revision_replays_with_previous_values(
        backend: Backend) -> None:
    await _history(backend)
    await backend.compact(4)

    events = await take(backend.watch("/", 5), 4)

    assert brief(events) == [
        ("PUT", "/c", b"c1", 5),
        ("PUT", "/a", b"a3", 6),
        ("PUT", "/d", b"d1", 7),
        ("DELETE", "/d", b"d1", 8),
    ]
    assert events[1].prev == KeyValue("/a", b"a2", 1, 3)
    assert events[3].prev == KeyValue("/d", b"d1", 7, 7)


async def test_compaction_is_idempotent_and_never_moves_back(backend: Backend) -> None:
    await _history(backend)

    await backend.compact(5)
    await backend.compact(5)
    await backend.compact(2)
    await backend.compact(0)

    assert await backend.compacted_revision() == 5


async def test_compaction_beyond_the_current_revision_raises(backend: Backend) -> None:
    await _history(backend)

    with pytest.raises(FutureRevision):
        await backend.compact(9)
    assert await backend.compacted_revision() == 0


async def test_compacting_everything_keeps_the_store_usable(backend: Backend) -> None:
    await _history(backend)

    await backend.compact(8)

    assert await backend.current_revision() == 8
    assert [kv.key for kv in (await backend.list("/", revision=8)).kvs] == ["/a", "/c"]
    with pytest.raises(Expired):
        await backend.get("/a", revision=7)
    with pytest.raises(Expired):
        await anext(backend.watch("/", 8))
    assert (await backend.create("/d", b"d2")).mod_revision == 9
    assert (await backend.create("/b", b"b2")).mod_revision == 10
    assert (await backend.update("/a", b"a4", 6)).mod_revision == 11
    assert brief(await take(backend.watch("/", 9), 3)) == [
        ("PUT", "/d", b"d2", 9), ("PUT", "/b", b"b2", 10), ("PUT", "/a", b"a4", 11)]


async def test_repeated_compactions_follow_the_log(backend: Backend) -> None:
    kv = await backend.create("/k", b"0")
    for i in range(1, 30):
        kv = await backend.update("/k", str(i).encode(), kv.mod_revision)
        if i % 7 == 0:
            await backend.compact(kv.mod_revision - 2)
            assert await backend.get("/k") == kv
            events = await take(backend.watch("/k", kv.mod_revision - 1), 2)
            assert [e.revision for e in events] == [kv.mod_revision - 1, kv.mod_revision]

    assert await backend.compacted_revision() == 27  # the last compaction, at i == 28
    assert (await backend.get("/k", revision=27)).value == b"26"  # type: ignore[union-attr]
    with pytest.raises(Expired):
        await backend.get("/k", revision=26)


async def test_compaction_overtaking_a_replay_ends_it_with_expired(
        open_backend: Opener) -> None:
    backend = await open_backend(watch_buffer=4)  # replay pages of at most 4 events
    for i in range(20):
        await backend.create(f"/k/{i}", b"x")
    stream = backend.watch("/", 1)
    first_page = await take(stream, 4)

    await backend.compact(10)

    assert [e.revision for e in first_page] == [1, 2, 3, 4]
    with pytest.raises(Expired) as caught:
        await anext(stream)
    assert caught.value.requested == 5
