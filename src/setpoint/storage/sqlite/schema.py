"""The on-disk layout: one append-only ``log`` table, as in kine, plus a ``meta`` table.

Each row of ``log`` is one write; its ``id`` (``INTEGER PRIMARY KEY AUTOINCREMENT``) is the
revision. Columns:

* ``key``; ``created`` (1 on the write that creates the key); ``deleted`` (1 on a delete);
* ``create_revision``: the key's create revision, stored as 0 on the creating row itself (the
  id is not known before the insert; readers substitute ``id``);
* ``prev_revision``: the id of the key's previous row (0 when there is none);
* ``value``: the new value, or on a delete the value the key held before it.

``UNIQUE (key, prev_revision)`` means two writes can never both succeed from the same previous
row: a lost compare-and-swap becomes a constraint violation even if a check were skipped.
The index on ``key`` alone serves "newest row of a key" and key-range scans: every SQLite
index ends with the rowid, here the revision, so its rows of one key are in revision order
(the unique index orders them by ``prev_revision`` first, and a read of the newest row through
it would sort).

``AUTOINCREMENT`` keeps the highest id ever used in ``sqlite_sequence``, so the current revision
survives restarts and compactions that remove the newest row (a delete). ``meta`` holds the
compacted revision and the schema version.

Durability (``synchronous``): in WAL mode ``NORMAL`` syncs only at checkpoints, so a commit
survives the process being killed (``kill -9``) but the last commits may be lost on power loss
or an OS crash; ``FULL`` syncs the WAL at every commit and survives both. Group commit makes
the ``FULL`` sync cost per batch, not per write.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Literal, NamedTuple

from setpoint.storage.interface import Event, EventType, KeyValue, Unavailable

Synchronous = Literal["NORMAL", "FULL"]

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5000

_DDL = (
    """
    CREATE TABLE IF NOT EXISTS log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL,
        created INTEGER NOT NULL CHECK (created IN (0, 1)),
        deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
        create_revision INTEGER NOT NULL,
        prev_revision INTEGER NOT NULL,
        value BLOB NOT NULL
    )
    """,
    "CREATE UNIQUE INDEX IF NOT EXISTS log_key_prev ON log (key, prev_revision)",
    "CREATE INDEX IF NOT EXISTS log_key ON log (key)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
    " WITHOUT ROWID",
    "INSERT OR IGNORE INTO meta (name, value) VALUES ('compacted', 0)",
    f"INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', {SCHEMA_VERSION})",
)

COLUMNS = "id, key, created, deleted, create_revision, prev_revision, value"
"""The columns of :class:`Row`, in order, for ``SELECT`` statements."""


class Row(NamedTuple):
    """One ``log`` row, as selected with :data:`COLUMNS`."""

    revision: int
    key: str
    created: int
    deleted: int
    create_revision: int
    prev_revision: int
    value: bytes

    @property
    def kv(self) -> KeyValue:
        """The key's value as of this row (on a delete: the value it held before)."""
        created = self.revision if self.created else self.create_revision
        return KeyValue(self.key, self.value, created, self.revision)

    def event(self, prev_value: bytes | None) -> Event:
        """This row as a log event; ``prev_value`` is the value of row ``prev_revision``."""
        kv = self.kv
        prev: KeyValue | None = None
        if not self.created:
            if prev_value is None:
                raise Unavailable(f"log row {self.revision} lost its previous row "
                                  f"{self.prev_revision}")
            prev = KeyValue(self.key, prev_value, kv.create_revision, self.prev_revision)
        kind = EventType.DELETE if self.deleted else EventType.PUT
        return Event(kind, kv, prev)


def connect(path: Path, *, writer: bool, synchronous: Synchronous = "FULL") -> sqlite3.Connection:
    """Open a connection in autocommit mode (transactions are explicit ``BEGIN``s).

    The writer switches the file to WAL, sets ``synchronous`` and creates the schema; readers
    are ``query_only``. Raises :class:`Unavailable` when the file cannot be used.
    """
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as e:
        raise Unavailable(f"cannot open {path}: {e}") from e
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if writer:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise Unavailable(f"{path}: cannot use write-ahead logging (mode {mode})")
            if synchronous not in ("NORMAL", "FULL"):
                raise ValueError(f"synchronous must be NORMAL or FULL, got {synchronous!r}")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            _create_schema(conn, path)
        else:
            conn.execute("PRAGMA query_only = ON")
    except sqlite3.Error as e:
        conn.close()
        raise Unavailable(f"cannot use {path}: {e}") from e
    except BaseException:
        conn.close()
        raise
    return conn


def _create_schema(conn: sqlite3.Connection, path: Path) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _DDL:
            conn.execute(statement)
        (version,) = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
        if version != SCHEMA_VERSION:
            raise Unavailable(f"{path}: schema version {version}, expected {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def revisions(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(current, compacted)`` as stored; call inside a transaction for a consistent pair."""
    current, compacted = conn.execute(
        "SELECT (SELECT seq FROM sqlite_sequence WHERE name = 'log'),"
        " (SELECT value FROM meta WHERE name = 'compacted')").fetchone()
    return int(current or 0), int(compacted)
