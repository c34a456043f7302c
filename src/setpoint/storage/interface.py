"""The storage contract: a revisioned key-value log with etcd semantics.

Every backend (memory, sqlite, etcd) implements :class:`Backend`. Invariants, which the
contract suite in ``tests/integration/storage`` checks against every backend:

* **One global revision.** Every successful write (create, update, delete) gets the next
  revision, strictly greater than every revision before it. Reads never change it.
* **Acknowledged means durable.** A write returns only after the backend has committed it;
  a crash after the return never loses it (memory: for the life of the process).
* **Compare-and-swap.** ``update`` and ``delete`` take the ``mod_revision`` the caller last
  saw; they succeed iff it still is the key's current ``mod_revision``.
* **Watch is the log.** ``watch(prefix, start)`` yields every event with revision ``>= start``
  on keys under ``prefix``, exactly once, in revision order: first the history still kept,
  then live events. A ``start`` at or below the compacted revision raises :class:`Expired`
  (on the iterator's first step, before any event); ``start`` 0 means 1 (everything kept).
* **Bounded.** A watcher that falls more than its buffer behind is ended with
  :class:`WatchLagged`; the caller watches again from the last revision it saw + 1.
* **Progress markers (opt-in).** ``watch(prefix, start, progress=True)`` also yields
  :class:`Progress` markers: ``Progress(r)`` comes only after every event under ``prefix``
  with revision ``<= r`` has been yielded, and only when ``r`` is above the last event or
  marker yielded, so a follower learns that revisions written outside its prefix hold nothing
  for it. Without ``progress`` a watch yields events only.

Non-guarantees: nothing about wall-clock time; a watch may end at any time (the caller
resumes from its last revision); ``list`` with ``limit`` pages may observe the revision of
the first page only if the caller passes it back as ``revision``. When markers come is the
backend's: memory and SQLite send one as soon as a write outside the prefix is published,
etcd as often as its ``--experimental-watch-progress-notify-interval`` says.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, overload, runtime_checkable


@dataclass(frozen=True, slots=True)
class KeyValue:
    """A key's value at one revision.

    ``create_revision`` is the revision that created the key (0 never appears: a key that
    does not exist is ``None``); ``mod_revision`` is the revision of its last write.
    ``stale`` says the value is stored in a form the store would no longer write (encrypted
    with an older key): an update should rewrite it even when nothing changed.
    """

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    stale: bool = False


class EventType(enum.Enum):
    PUT = "PUT"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the log.

    For ``PUT``, ``kv`` is the new value (``kv.create_revision == kv.mod_revision`` on create).
    For ``DELETE``, ``kv.value`` is the value the key held before the delete and
    ``kv.mod_revision`` is the revision of the delete itself. ``prev`` is the value before
    this event (``None`` on create), which watchers use for selector transitions.
    """

    type: EventType
    kv: KeyValue
    prev: KeyValue | None

    @property
    def revision(self) -> int:
        return self.kv.mod_revision

    @property
    def is_create(self) -> bool:
        return self.type is EventType.PUT and self.prev is None


@dataclass(frozen=True, slots=True)
class Progress:
    """A watch marker: every event under the watched prefix with revision ``<= revision``
    has been yielded, even if none of them was under the prefix."""

    revision: int


@dataclass(frozen=True, slots=True)
class ListResult:
    """A page of a prefix listing, in key order, taken at ``revision``.

    ``more`` is true when keys after the last one returned exist at that revision;
    ``remaining`` counts them when the backend knows it cheaply (else ``None``).
    """

    kvs: list[KeyValue]
    revision: int
    more: bool = False
    remaining: int | None = None


class StorageError(Exception):
    """Base of every storage failure. These carry etcd meanings, never HTTP ones."""


class KeyExists(StorageError):
    """``create`` found the key present."""

    def __init__(self, key: str, current: KeyValue | None = None) -> None:
        super().__init__(f"key exists: {key}")
        self.key = key
        self.current = current


class KeyNotFound(StorageError):
    """``update`` or ``delete`` found no such key."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key not found: {key}")
        self.key = key


class RevisionConflict(StorageError):
    """The compare of a compare-and-swap failed; ``current`` is what the key holds now."""

    def __init__(self, key: str, expected: int, current: KeyValue) -> None:
        super().__init__(f"revision conflict on {key}: expected {expected}, "
                         f"current {current.mod_revision}")
        self.key = key
        self.expected = expected
        self.current = current


class Expired(StorageError):
    """The requested revision has been compacted away."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(f"required revision {requested} has been compacted "
                         f"(compacted up to {compacted})")
        self.requested = requested
        self.compacted = compacted


class FutureRevision(StorageError):
    """A read asked for a revision the store has not reached."""

    def __init__(self, requested: int, current: int) -> None:
        super().__init__(f"required revision {requested} is a future revision "
                         f"(current {current})")
        self.requested = requested
        self.current = current


class WatchLagged(StorageError):
    """The watcher fell further behind than its buffer; it must watch again."""

    def __init__(self, last_revision: int) -> None:
        super().__init__(f"watcher fell behind after revision {last_revision}")
        self.last_revision = last_revision


class Unreadable(StorageError):
    """A stored value cannot be read back (for instance encrypted with a key no longer
    configured). For history (a watch or a read at an old revision) a caller may treat it
    like :class:`Expired`: that history is gone for it."""


class Unavailable(StorageError):
    """The backend cannot be reached now; the operation may be retried."""


@runtime_checkable
class ReportsHealth(Protocol):
    """A backend that can tell that it may no longer acknowledge writes (optional)."""

    def health(self) -> str | None:
        """None while writes can be acknowledged, else why not; cheap enough for every
        readiness probe."""


@runtime_checkable
class Backend(Protocol):
    """What the registry needs from storage. Keys are ``/``-separated strings."""

    async def start(self) -> None:
        """Open files or connections; after it returns, every method may be called."""

    async def close(self) -> None:
        """End all watches (their iterators stop) and release resources."""

    async def current_revision(self) -> int:
        """The revision of the newest write (0 for an empty store)."""

    async def compacted_revision(self) -> int:
        """Events at or below this revision are gone (0 when nothing was compacted); get
        and list *at* it still see every key's value there, as etcd's reads do."""

    async def create(self, key: str, value: bytes) -> KeyValue:
        """Store a new key; raises :class:`KeyExists` if present."""

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        """Replace the value iff its ``mod_revision == expected_revision``.

        Raises :class:`KeyNotFound` or :class:`RevisionConflict`.
        """

    async def delete(self, key: str, expected_revision: int | None = None) -> KeyValue:
        """Delete (optionally compare-and-swap); returns the deleted value with the
        revision of the delete as ``mod_revision``. Raises :class:`KeyNotFound` or
        :class:`RevisionConflict`."""

    async def get(self, key: str, revision: int | None = None) -> KeyValue | None:
        """The key's value now (``revision`` None or 0), or at ``revision`` (:class:`Expired`
        if below the compacted revision,
        :class:`FutureRevision` if not reached)."""

    async def list(self, prefix: str, *, revision: int | None = None,
                   start_after: str | None = None, limit: int | None = None) -> ListResult:
        """Keys under ``prefix`` in key order, strictly after ``start_after``."""

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
        """Events under ``prefix`` with revision ``>= start_revision`` (see module doc);
        with ``progress``, :class:`Progress` markers between them."""

    async def compact(self, revision: int) -> None:
        """Forget history at or below ``revision`` (keeping every key's newest value)."""
