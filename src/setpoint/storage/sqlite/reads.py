"""Read queries. Each runs in one read transaction, so the revision checks and the rows it
returns come from the same snapshot (WAL readers never block the writer, nor it them)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from setpoint.storage import rules
from setpoint.storage.interface import Event, KeyValue, ListResult
from setpoint.storage.sqlite import schema


@contextmanager
def _snapshot(conn: sqlite3.Connection) -> Iterator[tuple[int, int]]:
    """A read transaction; yields ``(current, compacted)`` as of its snapshot."""
    conn.execute("BEGIN")
    try:
        yield schema.revisions(conn)
    finally:
        conn.execute("ROLLBACK")


def revisions(conn: sqlite3.Connection) -> tuple[int, int]:
    """``(current, compacted)``."""
    with _snapshot(conn) as pair:
        return pair


def get(conn: sqlite3.Connection, key: str, revision: int | None) -> KeyValue | None:
    with _snapshot(conn) as (current, compacted):
        at = rules.read_revision(revision, current=current, compacted=compacted)
        row = conn.execute(f"SELECT {schema.COLUMNS} FROM log WHERE key = ? AND id <= ?"
                           " ORDER BY id DESC LIMIT 1", (key, at)).fetchone()
    if row is None:
        return None
    found = schema.Row._make(row)
    return None if found.deleted else found.kv


def list_keys(conn: sqlite3.Connection, prefix: str, revision: int | None,
              start_after: str | None, limit: int | None) -> ListResult:
    """One page; ``remaining`` is left ``None`` because counting would scan the whole range."""
    where, params = _key_range(prefix, start_after, column="l.key")
    with _snapshot(conn) as (current, compacted):
        at = rules.read_revision(revision, current=current, compacted=compacted)
        # Walk the key index in key order and keep each key's newest row at or below ``at``
        # unless it is a delete. The walk stops after the page, so paging a large range costs
        # the page, not the range.
        sql = (f"SELECT {_prefixed('l')} FROM log AS l WHERE {where}"
               " AND l.id = (SELECT MAX(id) FROM log WHERE key = l.key AND id <= ?)"
               " AND l.deleted = 0 ORDER BY l.key")
        params.append(at)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit + 1)
        rows = conn.execute(sql, params).fetchall()
    kvs = [schema.Row._make(row).kv for row in rows]
    more = limit is not None and len(kvs) > limit
    return ListResult(kvs[:limit] if more else kvs, at, more=more)


def events(conn: sqlite3.Connection, prefix: str, start: int, end: int,
           limit: int) -> list[Event]:
    """Kept events under ``prefix`` in ``[start, end]``; :class:`Expired` if ``start`` is at
    or below the compacted revision.

    Each event's previous value is joined from the row it names. Compaction never removes the
    previous row of a kept event: it is that key's newest row at or below the compacted
    revision, and only deletes are dropped from those (a delete is never a previous row).
    """
    where, params = _key_range(prefix, None, column="+l.key")
    with _snapshot(conn) as (_, compacted):
        rules.check_watch_start(start, compacted=compacted)
        rows = conn.execute(
            f"SELECT {_prefixed('l')}, p.value FROM log AS l"
            " LEFT JOIN log AS p ON p.id = l.prev_revision AND l.created = 0"
            f" WHERE l.id >= ? AND l.id <= ? AND {where} ORDER BY l.id LIMIT ?",
            [start, end, *params, limit]).fetchall()
    return [schema.Row._make(row[:-1]).event(row[-1]) for row in rows]


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{column.strip()}" for column in schema.COLUMNS.split(","))


def _key_range(prefix: str, start_after: str | None, *,
               column: str = "key") -> tuple[str, list[str | int]]:
    """A ``WHERE`` fragment (never empty) and its parameters for keys under ``prefix`` and
    strictly after ``start_after``."""
    clauses = [f"{column} >= ?"]
    params: list[str | int] = [prefix]
    end = rules.prefix_end(prefix)
    if end is not None:
        clauses.append(f"{column} < ?")
        params.append(end)
    if start_after is not None:
        clauses.append(f"{column} > ?")
        params.append(start_after)
    return " AND ".join(clauses), params
