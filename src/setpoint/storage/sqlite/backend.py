"""The SQLite backend: one database file in WAL mode, a kine-style log table, group commit.

Threads: a **writer** thread owns the only write connection. Writes queue up while it is busy;
it takes everything queued (up to ``max_batch``) and applies it in one transaction
(:mod:`setpoint.storage.sqlite.writes`), so concurrent writers share one ``COMMIT`` and one
sync. Each write still gets its own revision and its own compare-and-swap outcome, and its
awaitable resolves only after the ``COMMIT`` that contains it. A **reader** thread owns a
second connection for ``get``, ``list`` and watch replay; WAL lets it read while the writer
writes.

Invariants:

* Acknowledged means committed; with ``synchronous="FULL"`` (the default) also synced, so a
  write survives power loss, and with ``"NORMAL"`` it survives the process being killed.
* Events of a batch are published to watchers before any write of the batch is
  acknowledged, so a caller that watches from a revision it was handed misses nothing.
* ``current_revision()`` is the newest *published* revision. A ``list`` may be served at a
  newer, committed one; watching from its revision + 1 is still exact.

* Writes are committed only into the file that the path still names, and acknowledged only
  if it still does after the commit: once the file (or its WAL) was deleted or replaced
  under the process, every write and storage read fails with :class:`Unavailable` and
  :meth:`SQLiteBackend.health` says why (see :mod:`setpoint.storage.sqlite.datafile`).

Non-guarantees: one process owns the file (a second process writing it would not be seen by
this one's watchers; ``setpoint serve`` locks its data directory); a write whose caller was
cancelled may still commit.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, overload

from setpoint.storage import rules
from setpoint.storage.fanout import Fanout
from setpoint.storage.interface import (
    Event,
    KeyValue,
    ListResult,
    Progress,
    StorageError,
    Unavailable,
)
from setpoint.storage.sqlite import datafile, reads, schema, writes
from setpoint.storage.sqlite.worker import ConnectionThread, Outcomes

if TYPE_CHECKING:
    from setpoint.storage.interface import Backend

T = TypeVar("T")
_Read = Callable[[sqlite3.Connection], Any]

DEFAULT_MAX_BATCH = 512
DEFAULT_COMPACT_CHUNK = 10_000
_READ_BATCH = 32


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class SQLiteBackend:
    """A :class:`~setpoint.storage.interface.Backend` on the SQLite file at ``path``.

    Options: ``synchronous`` (``"FULL"`` or ``"NORMAL"``, see above); ``watch_buffer``, the
    live events a watcher may have pending; ``max_batch``, the most writes per transaction;
    ``compact_chunk``, the most revisions one compaction transaction covers (a long
    compaction is split so that writes interleave). The constructor touches nothing;
    :meth:`start` opens (and creates) the file, whose directory must exist.
    """

    def __init__(self, path: Path, *, synchronous: schema.Synchronous = "FULL",
                 watch_buffer: int = rules.DEFAULT_WATCH_BUFFER,
                 max_batch: int = DEFAULT_MAX_BATCH,
                 compact_chunk: int = DEFAULT_COMPACT_CHUNK) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, got {synchronous!r}")
        if watch_buffer < 1:
            raise ValueError(f"watch_buffer must be positive, got {watch_buffer}")
        if compact_chunk < 1:
            raise ValueError(f"compact_chunk must be positive, got {compact_chunk}")
        self._path = path
        self._watch_buffer = watch_buffer
        self._compact_chunk = compact_chunk
        self._group_commit = writes.GroupCommit()
        self._file = datafile.DataFile(path)
        self._writer: ConnectionThread[writes.WriteOp, writes.Outcome] = ConnectionThread(
            name=f"sqlite-writer:{path.name}",
            connect=lambda: schema.connect(path, writer=True, synchronous=synchronous),
            run_batch=self._commit, max_batch=max_batch, on_batch=self._on_commit)
        self._reader: ConnectionThread[_Read, Any] = ConnectionThread(
            name=f"sqlite-reader:{path.name}",
            connect=lambda: schema.connect(path, writer=False),
            run_batch=_run_reads, max_batch=_READ_BATCH)
        self._fanout: Fanout | None = None
        self._state = _State.NEW
        self._revision = 0
        self._compacted = 0

    @property
    def path(self) -> Path:
        return self._path

    @property
    def transactions(self) -> int:
        """Write transactions committed so far; below the number of writes when batching."""
        return self._group_commit.transactions

    async def __aenter__(self) -> SQLiteBackend:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        if self._state is not _State.NEW:
            raise Unavailable(f"sqlite backend is {self._state.value}")
        await self._writer.start()
        try:
            self._file.record()
            await self._reader.start()
            self._revision, self._compacted = await self._reader.submit(reads.revisions)
        except BaseException:
            await self._reader.stop()
            await self._writer.stop()
            self._state = _State.CLOSED
            raise
        self._fanout = Fanout(revision=self._revision, buffer=self._watch_buffer)
        self._state = _State.RUNNING

    async def close(self) -> None:
        """End watches, finish queued writes and reads, close both connections. Idempotent."""
        self._state = _State.CLOSED
        if self._fanout is not None:
            self._fanout.close()
        await self._writer.stop()
        await self._reader.stop()

    def health(self) -> str | None:
        """None while writes can be acknowledged; else why not (the database file was
        deleted or replaced under this process, see :mod:`.datafile`)."""
        if self._state is not _State.RUNNING:
            return f"sqlite backend is {self._state.value}"
        return self._file.check()

    async def current_revision(self) -> int:
        self._check_running()
        return self._revision

    async def compacted_revision(self) -> int:
        self._check_running()
        return self._compacted

    async def create(self, key: str, value: bytes) -> KeyValue:
        rules.check_write(key, value)
        return await self._write_event(writes.Create(key, value))

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        rules.check_write(key, value)
        return await self._write_event(writes.Update(key, value, expected_revision))

    async def delete(self, key: str, expected_revision: int | None = None) -> KeyValue:
        rules.check_write(key)
        return await self._write_event(writes.Delete(key, expected_revision))

    async def get(self, key: str, revision: int | None = None) -> KeyValue | None:
        _check_revision(revision)
        result: KeyValue | None = await self._read(lambda c: reads.get(c, key, revision))
        return result

    async def list(self, prefix: str, *, revision: int | None = None,
                   start_after: str | None = None, limit: int | None = None) -> ListResult:
        _check_revision(revision)
        rules.check_limit(limit)
        result: ListResult = await self._read(
            lambda c: reads.list_keys(c, prefix, revision, start_after, limit))
        return result

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[False] = False) -> AsyncIterator[Event]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: Literal[True]) -> AsyncIterator[Event | Progress]: ...

    @overload
    def watch(self, prefix: str, start_revision: int, *,
              progress: bool) -> AsyncIterator[Event] | AsyncIterator[Event | Progress]: ...

    def watch(self, prefix: str, start_revision: int, *,
              progress: bool = False) -> AsyncIterator[Event] | AsyncIterator[Event | Progress]:
        fanout = self._check_running()
        stream = fanout.watch(self._read_events, prefix, start_revision, progress=progress)
        return stream if progress else cast(AsyncIterator[Event], stream)

    async def compact(self, revision: int) -> None:
        self._check_running()
        target = rules.compact_target(revision, current=self._revision,
                                      compacted=self._compacted)
        low = self._compacted
        while target is not None and low < target:
            step = min(target, low + self._compact_chunk)
            outcome = await self._writer.submit(writes.Compact(step))
            if not isinstance(outcome, int):
                raise TypeError(f"compaction returned {outcome!r}")
            low = max(step, outcome)

    # -- internals -----------------------------------------------------------------------

    async def _write_event(self, op: writes.WriteOp) -> KeyValue:
        self._check_running()
        outcome = await self._writer.submit(op)
        if not isinstance(outcome, Event):
            raise TypeError(f"write returned {outcome!r}")
        return outcome.kv

    async def _read(self, query: _Read) -> Any:
        self._check_running()
        return await self._reader.submit(query)

    async def _read_events(self, prefix: str, start: int, end: int,
                           limit: int) -> Sequence[Event]:
        result: Sequence[Event] = await self._read(
            lambda c: reads.events(c, prefix, start, end, limit))
        return result

    def _commit(self, conn: sqlite3.Connection,
                ops: Sequence[writes.WriteOp]) -> Outcomes[writes.Outcome]:
        """On the writer thread: group commit, only into the file the path still names.

        Checked before (nothing is written into a deleted file) and after the commit (a
        batch that committed into one that was deleted meanwhile is not acknowledged)."""
        lost = self._file.check()
        if lost is None:
            outcomes = self._group_commit(conn, ops)
            lost = self._file.check()
            if lost is None:
                return outcomes
        return [Unavailable(lost) for _ in ops]

    def _on_commit(self, ops: Sequence[writes.WriteOp],
                   outcomes: Outcomes[writes.Outcome]) -> None:
        """On the loop, before the batch's writes are acknowledged: publish its events."""
        events = [outcome for outcome in outcomes if isinstance(outcome, Event)]
        for op, outcome in zip(ops, outcomes, strict=True):
            if isinstance(op, writes.Compact) and isinstance(outcome, int):
                self._compacted = max(self._compacted, outcome)
        if events:
            self._revision = events[-1].revision
            if self._fanout is not None:
                self._fanout.publish(events)

    def _check_running(self) -> Fanout:
        if self._state is not _State.RUNNING or self._fanout is None:
            raise Unavailable(f"sqlite backend is {self._state.value}")
        lost = self._file.lost
        if lost is not None:
            raise Unavailable(lost)
        return self._fanout


def _run_reads(conn: sqlite3.Connection, queries: Sequence[_Read]) -> Outcomes[Any]:
    outcomes: Outcomes[Any] = []
    for query in queries:
        try:
            outcomes.append(query(conn))
        except StorageError as e:
            outcomes.append(e)
        except sqlite3.Error as e:
            error = Unavailable(f"read failed: {e}")
            error.__cause__ = e
            outcomes.append(error)
            if conn.in_transaction:
                conn.execute("ROLLBACK")
    return outcomes


def _check_revision(revision: int | None) -> None:
    if revision is not None and revision < 0:
        raise ValueError(f"revision must not be negative, got {revision}")


if TYPE_CHECKING:
    _: Backend = SQLiteBackend(Path("typecheck.db"))
