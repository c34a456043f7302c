"""What only the SQLite backend promises: persistence, group commit, file handling."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from setpoint.storage import (
    Expired,
    KeyValue,
    RevisionConflict,
    SQLiteBackend,
    StorageConfig,
    Unavailable,
    create_backend,
)
from tests.integration.storage.storage_testkit import brief, take


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
async def store(path: Path) -> AsyncIterator[SQLiteBackend]:
    async with SQLiteBackend(path) as backend:
        yield backend


async def test_data_and_revision_survive_close_and_reopen(path: Path) -> None:
    async with SQLiteBackend(path) as first:
        a = await first.create("/a", b"1")
        await first.update("/a", b"2", a.mod_revision)
        await first.create("/b", b"1")
        await first.delete("/b")
        await first.compact(2)

    async with SQLiteBackend(path) as second:
        assert await second.current_revision() == 4
        assert await second.compacted_revision() == 2
        assert await second.get("/a") == KeyValue("/a", b"2", 1, 2)
        assert await second.get("/b") is None
        assert (await second.create("/c", b"1")).mod_revision == 5
        assert brief(await take(second.watch("/", 3), 3)) == [
            ("PUT", "/b", b"1", 3), ("DELETE", "/b", b"1", 4), ("PUT", "/c", b"1", 5)]
        with pytest.raises(Expired):
            await second.get("/a", revision=1)


async def test_revision_survives_compacting_away_a_trailing_delete(path: Path) -> None:
    async with SQLiteBackend(path) as first:
        await first.create("/a", b"1")
        await first.delete("/a")
        await first.compact(2)  # removes every row

    async with SQLiteBackend(path) as second:
        assert await second.current_revision() == 2
        assert (await second.create("/a", b"again")).mod_revision == 3


async def test_concurrent_writes_share_transactions(store: SQLiteBackend) -> None:
    before = store.transactions

    created = await asyncio.gather(*(store.create(f"/k/{i}", b"x") for i in range(200)))

    transactions = store.transactions - before
    assert 1 <= transactions < 200
    assert sorted(kv.mod_revision for kv in created) == list(range(1, 201))


async def test_a_failed_compare_in_a_batch_fails_only_itself(store: SQLiteBackend) -> None:
    kvs = [await store.create(f"/k/{i}", b"0") for i in range(50)]
    before = store.transactions

    results = await asyncio.gather(
        *(store.update(kv.key, b"1", kv.mod_revision + (i % 2)) for i, kv in enumerate(kvs)),
        return_exceptions=True)

    assert store.transactions - before < 50
    for i, result in enumerate(results):
        if i % 2:
            assert isinstance(result, RevisionConflict)
        else:
            assert isinstance(result, KeyValue)
            assert await store.get(result.key) == result


async def test_sequential_writes_commit_one_by_one(store: SQLiteBackend) -> None:
    before = store.transactions
    for i in range(5):
        await store.create(f"/k/{i}", b"x")
    assert store.transactions - before == 5


async def test_file_uses_the_log_schema_in_wal_mode(store: SQLiteBackend, path: Path) -> None:
    await store.create("/a", b"1")
    await store.update("/a", b"2", 1)
    await store.delete("/a")

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = conn.execute("SELECT id, key, created, deleted, prev_revision, value"
                            " FROM log ORDER BY id").fetchall()
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO log (key, created, deleted, create_revision,"
                         " prev_revision, value) VALUES ('/a', 0, 0, 1, 1, x'00')")
    conn.close()

    assert rows == [(1, "/a", 1, 0, 0, b"1"), (2, "/a", 0, 0, 1, b"2"),
                    (3, "/a", 0, 1, 2, b"2")]


async def test_long_compactions_run_in_chunks(path: Path) -> None:
    async with SQLiteBackend(path, compact_chunk=7) as store:
        kv = await store.create("/k", b"0")
        for i in range(1, 50):
            kv = await store.update("/k", str(i).encode(), kv.mod_revision)
        before = store.transactions

        await store.compact(45)

        assert store.transactions - before == 7
        assert await store.compacted_revision() == 45
        assert await store.get("/k") == kv
        assert (await store.get("/k", revision=46)).value == b"45"  # type: ignore[union-attr]


@pytest.mark.parametrize("synchronous", ["NORMAL", "FULL"])
async def test_synchronous_is_an_option(tmp_path: Path, synchronous: str) -> None:
    config = StorageConfig(kind="sqlite", path=tmp_path / "s.db",
                           synchronous=synchronous)  # type: ignore[arg-type]
    backend = create_backend(config)
    await backend.start()
    try:
        assert (await backend.create("/a", b"1")).mod_revision == 1
    finally:
        await backend.close()


async def test_start_fails_cleanly_without_the_directory(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "missing" / "store.db")  # constructing touches nothing

    with pytest.raises(Unavailable):
        await backend.start()

    assert not (tmp_path / "missing").exists()
    await backend.close()


async def test_close_waits_for_queued_writes(path: Path) -> None:
    backend = SQLiteBackend(path)
    await backend.start()
    writes = [asyncio.ensure_future(backend.create(f"/k/{i}", b"x")) for i in range(50)]
    await asyncio.sleep(0)

    await backend.close()

    assert all(isinstance(w.result(), KeyValue) for w in writes)
    async with SQLiteBackend(path) as reopened:
        assert len((await reopened.list("/k/")).kvs) == 50


def _replace(file: Path) -> None:
    """Put another file (a copy: same content, another inode) where ``file`` was."""
    copy = file.with_name(file.name + ".copy")
    copy.write_bytes(file.read_bytes())
    copy.replace(file)


@pytest.mark.parametrize(("name", "change"), [
    ("store.db", Path.unlink), ("store.db", _replace), ("store.db-wal", Path.unlink)])
async def test_writes_are_refused_once_the_file_is_deleted_or_replaced(
        store: SQLiteBackend, path: Path, name: str, change: object) -> None:
    kept = await store.create("/registry/a", b"1")
    assert store.health() is None
    assert callable(change)
    change(path.with_name(name))
    with pytest.raises(Unavailable,
                       match=re.escape(f"the database file {path.with_name(name)} was ")):
        await store.create("/registry/b", b"2")
    with pytest.raises(Unavailable, match="writes are refused"):
        await store.update("/registry/a", b"3", kept.mod_revision)
    with pytest.raises(Unavailable):
        await store.get("/registry/a")
    with pytest.raises(Unavailable):
        await store.current_revision()
    health = store.health()
    assert health is not None
    assert "restart the server" in health


async def test_a_batch_that_committed_into_a_deleted_file_is_not_acknowledged(
        path: Path) -> None:
    async with SQLiteBackend(path) as store:
        original = store._group_commit

        def commit_then_delete(conn: sqlite3.Connection,
                               ops: list[object]) -> list[object]:
            outcomes = original(conn, ops)  # type: ignore[arg-type]
            path.unlink()  # the file goes away between COMMIT and the answer
            return outcomes  # type: ignore[return-value]

        store._group_commit = commit_then_delete  # type: ignore[assignment]
        with pytest.raises(Unavailable, match="was deleted"):
            await store.create("/registry/a", b"1")
        assert original.transactions == 1  # it did commit, into the deleted file...
        fanout = store._fanout
        assert fanout is not None
        assert fanout.revision == 0  # ...but it was neither acknowledged nor published
        assert store.health() is not None
