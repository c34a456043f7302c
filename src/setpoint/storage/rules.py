"""Revision rules that every backend applies the same way.

They are pure functions, so the memory and sqlite backends cannot drift apart on the questions
the contract suite asks: which revision a read is served at, when a revision counts as
compacted, what a compaction request means, and which keys a prefix covers.

Compaction to ``c`` keeps every key's value *at* ``c`` and forgets the events *at or below*
``c``. Hence, as in etcd:

* a ``get`` or ``list`` at a revision below ``c`` raises :class:`Expired`; at ``c`` or above it
  is served (without a revision, or with ``0``, it always is: the newest value of every key
  survives compaction);
* a watch that starts at or below ``c`` raises :class:`Expired` (the event at ``c`` may have
  been a delete, and deletes at or below ``c`` are dropped).

So "list at ``r``, then watch from ``r + 1``" works for every ``r >= c``, and fails with
:class:`Expired` on both steps or neither.
"""

from __future__ import annotations

from setpoint.storage.interface import Expired, FutureRevision

DEFAULT_WATCH_BUFFER = 1000
"""Live events a watcher may have pending before it is ended with ``WatchLagged``."""

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def read_revision(requested: int | None, *, current: int, compacted: int) -> int:
    """The revision a ``get`` or ``list`` is served at.

    ``None`` and ``0`` mean the newest revision. Otherwise the revision must lie in
    ``[compacted, current]``: the state at the compacted revision itself is still known.

    >>> read_revision(None, current=7, compacted=3)
    7
    >>> read_revision(5, current=7, compacted=3)
    5
    """
    if requested is None or requested == 0:
        return current
    if requested < 0:
        raise ValueError(f"revision must not be negative, got {requested}")
    if requested < compacted:
        raise Expired(requested, compacted)
    if requested > current:
        raise FutureRevision(requested, current)
    return requested


def watch_start(start_revision: int) -> int:
    """The first revision a watch delivers: ``0`` means ``1``, i.e. the whole kept log.

    >>> watch_start(0), watch_start(9)
    (1, 9)
    """
    if start_revision < 0:
        raise ValueError(f"start revision must not be negative, got {start_revision}")
    return max(start_revision, 1)


def check_watch_start(start: int, *, compacted: int) -> None:
    """Raise :class:`Expired` when the event at ``start`` may already be forgotten."""
    if start <= compacted:
        raise Expired(start, compacted)


def compact_target(requested: int, *, current: int, compacted: int) -> int | None:
    """The revision to compact up to, or ``None`` when there is nothing to do.

    Compacting to or below the compacted revision is a no-op (compaction is idempotent);
    beyond the current revision it raises :class:`FutureRevision`.

    >>> compact_target(5, current=9, compacted=2), compact_target(2, current=9, compacted=2)
    (5, None)
    """
    if requested < 0:
        raise ValueError(f"revision must not be negative, got {requested}")
    if requested > current:
        raise FutureRevision(requested, current)
    if requested <= compacted:
        return None
    return requested


def check_limit(limit: int | None) -> None:
    """A page limit is ``None`` (everything) or positive; ``0`` is not a synonym for ``None``."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be positive or None, got {limit}")


def check_write(key: str, value: bytes | None = None) -> None:
    """Reject what no backend can store: empty keys and values that are not bytes."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string, got {key!r}")
    if value is not None and not isinstance(value, bytes):
        raise TypeError(f"value must be bytes, got {type(value).__name__}")


def prefix_end(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with ``prefix``.

    ``None`` means there is no such bound (the prefix is empty or all maximal code points), so
    a range scan ``prefix <= key < prefix_end(prefix)`` covers exactly the keys under the
    prefix. Code-point order equals UTF-8 byte order, so the bound also works in SQL.

    >>> prefix_end("/registry/pods/")
    '/registry/pods0'
    >>> prefix_end("") is None
    True
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < _MAX_CODE_POINT:
            successor = last + 1
            if successor in _SURROGATES:
                successor = _SURROGATES.stop
            return "".join(chars) + chr(successor)
    return None
