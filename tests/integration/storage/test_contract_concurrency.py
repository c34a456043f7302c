"""Contract under concurrency: many writers at once, each with its own revision and outcome."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.storage import Backend, KeyExists, KeyValue, RevisionConflict
from tests.integration.storage.storage_testkit import let_tasks_run, take

WRITERS = 200


async def test_concurrent_creates_and_updates_get_distinct_revisions(
        backend: Backend) -> None:
    watch = backend.watch("/c/", 1)
    watching = asyncio.ensure_future(take(watch, 2 * WRITERS))

    created = await asyncio.gather(*(backend.create(f"/c/{i:03d}", b"v0")
                                     for i in range(WRITERS)))
    updated = await asyncio.gather(*(backend.update(kv.key, b"v1", kv.mod_revision)
                                     for kv in created))

    revisions = [kv.mod_revision for kv in (*created, *updated)]
    assert len(set(revisions)) == 2 * WRITERS
    assert min(kv.mod_revision for kv in updated) > max(kv.mod_revision for kv in created)
    assert await backend.current_revision() == max(revisions)
    listed = await backend.list("/c/")
    assert listed.kvs == sorted(updated, key=lambda kv: kv.key)
    events = await watching
    assert [e.revision for e in events] == sorted(revisions)


async def test_concurrent_compare_and_swap_has_exactly_one_winner(backend: Backend) -> None:
    base = await backend.create("/k", b"base")

    results = await asyncio.gather(
        *(backend.update("/k", f"v{i}".encode(), base.mod_revision) for i in range(20)),
        *(backend.create(f"/other/{i}", b"x") for i in range(20)),
        return_exceptions=True)

    updates, others = results[:20], results[20:]
    winners = [r for r in updates if isinstance(r, KeyValue)]
    losers = [r for r in updates if isinstance(r, RevisionConflict)]
    assert len(winners) == 1
    assert len(losers) == 19
    assert all(e.current == winners[0] for e in losers)
    assert all(isinstance(r, KeyValue) for r in others)
    assert await backend.get("/k") == winners[0]


async def test_concurrent_creates_of_one_key_have_exactly_one_winner(backend: Backend) -> None:
    results = await asyncio.gather(*(backend.create("/k", f"v{i}".encode()) for i in range(20)),
                                   return_exceptions=True)

    winners = [r for r in results if isinstance(r, KeyValue)]
    assert len(winners) == 1
    assert all(isinstance(r, KeyExists) and r.current == winners[0]
               for r in results if r is not winners[0])


async def test_reads_interleave_with_writes(backend: Backend) -> None:
    async def write(i: int) -> None:
        kv = await backend.create(f"/r/{i}", b"0")
        await backend.update(kv.key, b"1", kv.mod_revision)

    async def read() -> None:
        for _ in range(10):
            result = await backend.list("/r/")
            assert all(kv.mod_revision <= result.revision for kv in result.kvs)
            await let_tasks_run()

    await asyncio.gather(*(write(i) for i in range(50)), *(read() for _ in range(5)))

    assert len((await backend.list("/r/")).kvs) == 50


@pytest.mark.parametrize("count", [WRITERS])
async def test_cancelled_writers_do_not_disturb_the_others(backend: Backend,
                                                           count: int) -> None:
    tasks = [asyncio.ensure_future(backend.create(f"/x/{i}", b"x")) for i in range(count)]
    for task in tasks[::3]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)

    done = [t.result() for t in tasks if not t.cancelled()]
    for kv in done:
        assert await backend.get(kv.key) == kv
    assert await backend.current_revision() >= len(done)
