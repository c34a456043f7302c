"""The watch cache's history: its newest events, bounded by count and by bytes.

Each event is kept as an :class:`Entry`. While an entry is the newest event of its key it is
*hot*: it holds the decoded object, which is the very object the cache serves as the key's
current state, and ``prev``, the object that was current before (the previous entry's
object: the same one, never a copy). When a newer event of the key arrives the entry turns
*cold*: it drops the decoded objects and keeps the stored bytes only (its own, and the
previous version's, which it shares with the entry before it), and a watcher that still
has to send it decodes it then. So a key's newest version is decoded
once however many watchers there are, and older versions cost their stored size.

An entry also keeps the **frames** of its event: the bytes a watch stream sends for it, one
per :data:`FrameKey` (the event type as a watcher reports it, the request version, the output
form), made by the first watcher that needs one and sent as they are by every other
(Kubernetes' watch cache keeps one serialisation per event and encoder too). Frames are
charged with the entry; one is kept only while the charge stays within ``max_bytes``, at most
:data:`MAX_FRAMES` per entry, and goes with its entry. Whoever asks for a frame supplies the
function that makes it; the key must name everything the bytes depend on. Likewise an entry
keeps the **verdicts** of the watches' selectors on its event (how a watch with given
selectors reports it, or that it does not), at most :data:`MAX_VERDICTS`, so that watches
with the same selectors match an event once.

Invariants:

* Entries are in strictly increasing revision order, and every event with a revision above
  :attr:`History.window_start` is kept: a watch from ``N >= window_start`` replays exactly.
* After :meth:`History.record` returns, at most ``capacity`` entries are kept, and their
  charge (:attr:`History.bytes`: the stored bytes that the kept entries alone keep alive,
  each counted once, plus their frames, plus :data:`ENTRY_OVERHEAD` per entry) is at most
  ``max_bytes`` or only the newest entry is left. Oldest entries go first. A frame is added
  only if the charge stays within ``max_bytes``.

Non-guarantees: the charge is of stored (JSON) bytes; a hot entry's decoded ``prev`` (one
older version of a recently changed key) is charged at its stored size although Python
objects take more; events handed out and still held elsewhere (by a watcher that is
sending one) are not the history's to count.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Final

import orjson

Obj = dict[str, Any]

#: what one kept entry costs besides its bytes: the entry, its key and its slot, roughly
ENTRY_OVERHEAD: Final = 160

#: frames one entry keeps at most (event types x request versions x output forms in use)
MAX_FRAMES: Final = 16
#: selector verdicts one entry keeps at most (distinct selectors of the watches on a resource)
MAX_VERDICTS: Final = 64
#: what a kept frame costs besides its bytes
FRAME_OVERHEAD: Final = 100

#: what a frame's bytes depend on besides the event: (event type as reported, version, form)
FrameKey = Hashable

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"


def decode(value: bytes, revision: int) -> Obj:
    """A stored value as an object whose ``metadata.resourceVersion`` is ``revision``."""
    obj: Obj = orjson.loads(value)
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    meta["resourceVersion"] = str(revision)
    return obj


def with_revision(obj: Obj, revision: int) -> Obj:
    """A shallow copy of ``obj`` whose metadata says ``revision``."""
    copy = dict(obj)
    meta = dict(copy.get("metadata") or {})
    meta["resourceVersion"] = str(revision)
    copy["metadata"] = meta
    return copy


class CacheEvent:
    """An event as the API reports it: ``ADDED``, ``MODIFIED`` or ``DELETED``.

    ``object`` carries ``metadata.resourceVersion == str(revision)``; for ``DELETED`` it is
    the last state of the object. ``prev`` is the state before the event (``None`` on add).
    Both are shared and must be treated as immutable. An event made from a cold entry
    decodes each of them on first access.
    """

    __slots__ = ("_object", "_prev", "_source", "key", "origin", "revision", "type")

    def __init__(self, type: str, key: str, object: Obj, prev: Obj | None,
                 revision: int, origin: Entry | None = None) -> None:
        self.type = type
        self.key = key
        self.revision = revision
        self._object: Obj | None = object
        self._prev = prev
        self._source: Entry | None = None
        #: the history entry the event was made from (its frames are shared), if any
        self.origin = origin

    @classmethod
    def decoding(cls, entry: Entry) -> CacheEvent:
        """The event of a cold entry, decoded lazily from its bytes."""
        event = cls.__new__(cls)
        event.type = entry.type
        event.key = entry.key
        event.revision = entry.revision
        event._object = None
        event._prev = None
        event._source = entry
        event.origin = entry
        return event

    @property
    def object(self) -> Obj:
        if self._object is None:
            source = self._source
            assert source is not None
            assert source.value is not None
            self._object = decode(source.value, self.revision)
        return self._object

    @property
    def prev(self) -> Obj | None:
        source = self._source
        if self._prev is None and source is not None and source.prev_value is not None \
                and self.type != ADDED:
            self._prev = decode(source.prev_value, source.prev_revision)
        return self._prev

    def __repr__(self) -> str:
        return f"CacheEvent({self.type} {self.key} @{self.revision})"


class Entry:
    """One kept event; see the module docstring for hot and cold.

    While hot, ``obj`` and ``prev_obj`` are the decoded objects of its event (``obj`` is
    the cache's current state of the key). ``value`` is the stored form of the event's
    object (``None`` while hot and a PUT); ``prev_value``/``prev_revision`` the version
    before it. ``shares_prev``: ``prev_value`` is the ``value`` of the previous entry of
    the key, which is still kept (and charged) there.
    """

    __slots__ = ("charge", "frames", "kept", "key", "obj", "prev_obj", "prev_revision",
                 "prev_value", "revision", "shares_prev", "successor", "type", "value",
                 "verdicts")

    def __init__(self, type: str, key: str, revision: int, *, obj: Obj, prev_obj: Obj | None,
                 value: bytes | None, prev_value: bytes | None, prev_revision: int,
                 shares_prev: bool) -> None:
        self.type = type
        self.key = key
        self.revision = revision
        self.obj: Obj | None = obj
        self.prev_obj = prev_obj
        self.value = value
        self.prev_value = prev_value
        self.prev_revision = prev_revision
        self.shares_prev = shares_prev
        #: the next entry of the key, when it shares this entry's value as its prev_value
        self.successor: Entry | None = None
        self.charge = 0
        #: the frames of the event, by :data:`FrameKey` (None: none yet)
        self.frames: dict[FrameKey, bytes] | None = None
        #: how watches report the event, by their selectors (None: none yet)
        self.verdicts: dict[Hashable, str | None] | None = None
        #: still in the history (frames are kept only then)
        self.kept = True

    def event(self) -> CacheEvent:
        """The event to hand out: with the shared decoded objects while hot, else decoded
        on demand from the bytes."""
        if self.obj is not None:
            return CacheEvent(self.type, self.key, self.obj, self.prev_obj, self.revision,
                              self)
        return CacheEvent.decoding(self)

    def own_bytes(self) -> int:
        """The bytes this entry alone keeps alive (shared ones are charged once)."""
        seen: list[bytes] = []
        for part in (self.value, self.prev_value):
            if part is None or any(part is s for s in seen):
                continue
            if self.shares_prev and part is self.prev_value:
                continue
            seen.append(part)
        frames = sum(FRAME_OVERHEAD + len(f) for f in self.frames.values()) \
            if self.frames else 0
        return ENTRY_OVERHEAD + len(self.key) + sum(len(p) for p in seen) + frames


class History:
    """The kept events, their window and their charge; see the module docstring."""

    def __init__(self, *, capacity: int, max_bytes: int, window_start: int = 0) -> None:
        if capacity < 1 or max_bytes < 1:
            raise ValueError("history capacity and max_bytes must be positive")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: collections.deque[Entry] = collections.deque()
        #: the kept entry that is the newest event of its key
        self._newest: dict[str, Entry] = {}
        self.window_start = window_start
        self.bytes = 0
        #: entries dropped so far to stay within max_bytes (not counting capacity)
        self.evicted_for_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def reset(self, window_start: int) -> None:
        """Forget every entry; watches may start at ``window_start`` or later."""
        for entry in self._entries:
            entry.frames = entry.verdicts = None
            entry.kept = False
        self._entries.clear()
        self._newest.clear()
        self.bytes = 0
        self.window_start = window_start

    def record(self, type: str, key: str, revision: int, obj: Obj, prev_obj: Obj | None, *,
               value: bytes | None, prev_value: bytes | None, prev_revision: int) -> Entry:
        """Keep a new event, newest of its key; evict the oldest ones beyond the bounds.

        ``obj`` and ``prev_obj`` are the event's decoded objects (shared: the caller keeps
        ``obj`` as the key's current state). ``value`` is the stored form of the object for
        a DELETE (the last state) and None for a PUT; ``prev_value`` is the value before
        the event as storage reported it. Returns the new entry, which is kept even when it
        alone exceeds ``max_bytes`` (see the invariants).
        """
        shares_prev = False
        before = self._newest.get(key)
        if before is not None and prev_value is not None:
            self._cool(before, prev_value)
            assert before.value is not None
            prev_value = before.value  # one copy of those bytes, charged to ``before``
            shares_prev = True
        elif before is not None:
            self._cool(before, None)
        if type == DELETED and prev_value is not None:
            value = prev_value
        entry = Entry(type, key, revision, obj=obj, prev_obj=prev_obj, value=value,
                      prev_value=prev_value, prev_revision=prev_revision,
                      shares_prev=shares_prev)
        if shares_prev:
            assert before is not None
            before.successor = entry
        entry.charge = entry.own_bytes()
        self.bytes += entry.charge
        self._entries.append(entry)
        self._newest[key] = entry
        self._evict()
        return entry

    def _cool(self, entry: Entry, value: bytes | None) -> None:
        """``entry`` is no longer the newest of its key: keep its bytes, drop the objects."""
        obj = entry.obj
        if obj is None:
            return
        if entry.value is None:
            # storage always reports the previous value; re-encoding is a fallback only
            entry.value = value if value is not None else orjson.dumps(obj)
        entry.obj = entry.prev_obj = None
        self._recharge(entry)

    def frame(self, entry: Entry, key: FrameKey, make: Callable[[], bytes]) -> bytes:
        """The frame ``key`` of ``entry``'s event: the kept one, or ``make()``, kept for the
        next watcher when the entry is still in the history, has fewer than
        :data:`MAX_FRAMES` and the charge stays within ``max_bytes``."""
        frames = entry.frames
        if frames is not None:
            found = frames.get(key)
            if found is not None:
                return found
        made = make()
        if entry.kept and (frames is None or len(frames) < MAX_FRAMES) and \
                self.bytes + FRAME_OVERHEAD + len(made) <= self.max_bytes:
            if frames is None:
                frames = entry.frames = {}
            frames[key] = made
            self._recharge(entry)
        return made

    def verdict(self, entry: Entry, key: Hashable, decide: Callable[[], str | None]
                ) -> str | None:
        """``decide()`` for ``entry``'s event, kept for the next watch with the same ``key``
        (its selectors, version and strategy) while the entry is in the history and has
        fewer than :data:`MAX_VERDICTS`."""
        verdicts = entry.verdicts
        if verdicts is not None and key in verdicts:
            return verdicts[key]
        made = decide()
        if entry.kept and (verdicts is None or len(verdicts) < MAX_VERDICTS):
            if verdicts is None:
                verdicts = entry.verdicts = {}
            verdicts[key] = made
        return made

    def _recharge(self, entry: Entry) -> None:
        charge = entry.own_bytes()
        self.bytes += charge - entry.charge
        entry.charge = charge

    def _evict(self) -> None:
        entries = self._entries
        while len(entries) > self.capacity or (self.bytes > self.max_bytes
                                              and len(entries) > 1):
            if len(entries) <= self.capacity:
                self.evicted_for_bytes += 1
            oldest = entries.popleft()
            self.bytes -= oldest.charge
            self.window_start = oldest.revision
            if self._newest.get(oldest.key) is oldest:
                del self._newest[oldest.key]
            oldest.obj = oldest.prev_obj = None
            oldest.frames = oldest.verdicts = None
            oldest.kept = False
            successor = oldest.successor
            if successor is not None:
                # the successor now alone keeps the bytes they shared
                oldest.successor = None
                successor.shares_prev = False
                self._recharge(successor)

    def oldest_revision(self) -> int | None:
        return self._entries[0].revision if self._entries else None

    def after(self, revision: int) -> list[Entry]:
        """The kept entries with a revision above ``revision``, oldest first."""
        entries = self._entries
        if not entries or revision >= entries[-1].revision:
            return []
        lo, hi = 0, len(entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if entries[mid].revision <= revision:
                lo = mid + 1
            else:
                hi = mid
        return [entries[i] for i in range(lo, len(entries))]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries)
