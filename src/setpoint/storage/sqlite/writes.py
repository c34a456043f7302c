"""Write operations and the group-commit transaction that applies a batch of them.

Every operation is *check, then insert* inside the batch's ``BEGIN IMMEDIATE`` transaction: it
reads the key's newest row, decides the outcome (:class:`KeyExists`, :class:`KeyNotFound`,
:class:`RevisionConflict`), and only then inserts exactly one row. A failed check inserts
nothing, so it cannot disturb the other operations of the batch; and because an operation
modifies the database with a single statement, SQLite's statement atomicity undoes a failed
insert on its own, with no savepoint. The ``UNIQUE (key, prev_revision)`` constraint is the
backstop: a violation (which only another writer on the same file could cause) is reported as
the compare-and-swap failure it is.

Operations run in submission order, so revisions within a batch follow submission order too.
Either the whole batch commits or, if ``COMMIT`` fails, none of it does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from setpoint.storage import rules
from setpoint.storage.interface import (
    Event,
    EventType,
    KeyExists,
    KeyNotFound,
    KeyValue,
    RevisionConflict,
    StorageError,
)
from setpoint.storage.sqlite import schema


@dataclass(frozen=True, slots=True)
class Create:
    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class Update:
    key: str
    value: bytes
    expected_revision: int


@dataclass(frozen=True, slots=True)
class Delete:
    key: str
    expected_revision: int | None


@dataclass(frozen=True, slots=True)
class Compact:
    """Forget history up to ``revision``; its outcome is the compacted revision afterwards."""

    revision: int


WriteOp = Create | Update | Delete | Compact
Outcome = Event | int | StorageError


class GroupCommit:
    """Applies a batch of operations in one transaction; counts committed transactions.

    The count is written by the writer thread only and is informational (tests use it to see
    that batching happens).
    """

    def __init__(self) -> None:
        self.transactions = 0

    def __call__(self, conn: sqlite3.Connection, ops: Sequence[WriteOp]) -> list[Outcome]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            outcomes = [_apply(conn, op) for op in ops]
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.transactions += 1
        return outcomes


def _apply(conn: sqlite3.Connection, op: WriteOp) -> Outcome:
    try:
        match op:
            case Create(key, value):
                return _create(conn, key, value)
            case Update(key, value, expected):
                return _update(conn, key, value, expected)
            case Delete(key, expected):
                return _delete(conn, key, expected)
            case Compact(revision):
                return _compact(conn, revision)
    except StorageError as e:
        return e


def _create(conn: sqlite3.Connection, key: str, value: bytes) -> Event:
    latest = _newest(conn, key)
    if latest is not None and not latest.deleted:
        raise KeyExists(key, latest.kv)
    prev_revision = latest.revision if latest is not None else 0
    revision = _insert(conn, key, created=1, deleted=0, create_revision=0,
                       prev_revision=prev_revision, value=value)
    return Event(EventType.PUT, KeyValue(key, value, revision, revision), None)


def _update(conn: sqlite3.Connection, key: str, value: bytes, expected: int) -> Event:
    current = _current(conn, key, expected)
    revision = _insert(conn, key, created=0, deleted=0, create_revision=current.create_revision,
                       prev_revision=current.mod_revision, value=value)
    return Event(EventType.PUT, KeyValue(key, value, current.create_revision, revision), current)


def _delete(conn: sqlite3.Connection, key: str, expected: int | None) -> Event:
    current = _current(conn, key, expected)
    revision = _insert(conn, key, created=0, deleted=1, create_revision=current.create_revision,
                       prev_revision=current.mod_revision, value=current.value)
    kv = KeyValue(key, current.value, current.create_revision, revision)
    return Event(EventType.DELETE, kv, current)


def _compact(conn: sqlite3.Connection, revision: int) -> int:
    current, compacted = schema.revisions(conn)
    target = rules.compact_target(revision, current=current, compacted=compacted)
    if target is None:
        return compacted
    # A row at or below the target is superseded iff its successor (the row whose
    # prev_revision names it) is too; rows up to the old compacted revision were handled
    # before, so every successor still to consider lies in (compacted, target]. Delete those
    # first: the delete rows themselves are the successors of the values they remove.
    conn.execute(
        "DELETE FROM log WHERE id IN (SELECT prev_revision FROM log"
        " WHERE id > ? AND id <= ? AND prev_revision > 0)", (compacted, target))
    conn.execute("DELETE FROM log WHERE id > ? AND id <= ? AND deleted = 1",
                 (compacted, target))
    conn.execute("UPDATE meta SET value = ? WHERE name = 'compacted'", (target,))
    return target


def _newest(conn: sqlite3.Connection, key: str) -> schema.Row | None:
    row = conn.execute(f"SELECT {schema.COLUMNS} FROM log WHERE key = ? ORDER BY id DESC LIMIT 1",
                       (key,)).fetchone()
    return None if row is None else schema.Row._make(row)


def _current(conn: sqlite3.Connection, key: str, expected: int | None) -> KeyValue:
    """The key's live value, checked against ``expected`` (``None``: no compare)."""
    latest = _newest(conn, key)
    if latest is None or latest.deleted:
        raise KeyNotFound(key)
    current = latest.kv
    if expected is not None and current.mod_revision != expected:
        raise RevisionConflict(key, expected, current)
    return current


def _insert(conn: sqlite3.Connection, key: str, *, created: int, deleted: int,
            create_revision: int, prev_revision: int, value: bytes) -> int:
    try:
        cursor = conn.execute(
            "INSERT INTO log (key, created, deleted, create_revision, prev_revision, value)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (key, created, deleted, create_revision, prev_revision, value))
    except sqlite3.IntegrityError as e:
        raise _lost_race(conn, key, created=bool(created), prev_revision=prev_revision) from e
    revision = cursor.lastrowid
    if revision is None:
        raise RuntimeError("INSERT into log returned no rowid")
    return revision


def _lost_race(conn: sqlite3.Connection, key: str, *, created: bool,
               prev_revision: int) -> StorageError:
    """The error for an insert that lost to another writer from the same previous row."""
    latest = _newest(conn, key)
    live = None if latest is None or latest.deleted else latest.kv
    if created:
        return KeyExists(key, live)
    if live is None:
        return KeyNotFound(key)
    return RevisionConflict(key, prev_revision, live)
