"""An in-process backend: the whole log in memory, for tests and throwaway servers.

Invariants (beyond the contract in :mod:`setpoint.storage.interface`):

* Revisions are contiguous: every successful write takes ``current + 1``. Failed writes and
  reads take none.
* Every method runs without awaiting, so each call is atomic with respect to every other.
* History is kept until :meth:`MemoryBackend.compact`; compaction keeps, for every key, its
  newest version at or below the compacted revision unless that version is a delete.

Non-guarantees: nothing survives the process, and memory grows with history until the
caller compacts.
"""

from __future__ import annotations

import bisect
import builtins
import enum
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Literal, cast, overload

from setpoint.storage import rules
from setpoint.storage.fanout import Fanout
from setpoint.storage.interface import (
    Event,
    EventType,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    Progress,
    RevisionConflict,
    Unavailable,
)

if TYPE_CHECKING:
    from setpoint.storage.interface import Backend

_Version = tuple[int, KeyValue | None]
"""``(revision, value)`` of one write to a key; ``None`` marks a delete."""


class _State(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"


class MemoryBackend:
    """The log as Python lists and dicts. ``watch_buffer`` bounds each watcher's live queue.

    >>> import asyncio
    >>> async def demo() -> int:
    ...     async with MemoryBackend() as store:
    ...         kv = await store.create("/a", b"1")
    ...         return (await store.update("/a", b"2", kv.mod_revision)).mod_revision
    >>> asyncio.run(demo())
    2
    """

    def __init__(self, *, watch_buffer: int = rules.DEFAULT_WATCH_BUFFER) -> None:
        self._fanout = Fanout(revision=0, buffer=watch_buffer)
        self._state = _State.NEW
        self._revision = 0
        self._compacted = 0
        self._log: list[Event] = []  # revisions compacted + 1 .. revision, one event each
        self._keys: list[str] = []  # sorted; every key in _versions
        self._versions: dict[str, list[_Version]] = {}

    async def __aenter__(self) -> MemoryBackend:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def start(self) -> None:
        if self._state is _State.CLOSED:
            raise Unavailable("memory backend is closed")
        self._state = _State.RUNNING

    async def close(self) -> None:
        self._state = _State.CLOSED
        self._fanout.close()
        self._log.clear()
        self._keys.clear()
        self._versions.clear()

    async def current_revision(self) -> int:
        self._check_running()
        return self._revision

    async def compacted_revision(self) -> int:
        self._check_running()
        return self._compacted

    async def create(self, key: str, value: bytes) -> KeyValue:
        self._check_running()
        rules.check_write(key, value)
        current = self._latest(key)
        if current is not None:
            raise KeyExists(key, current)
        revision = self._revision + 1
        kv = KeyValue(key, value, revision, revision)
        self._commit(Event(EventType.PUT, kv, None))
        return kv

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        self._check_running()
        rules.check_write(key, value)
        current = self._checked_current(key, expected_revision)
        kv = KeyValue(key, value, current.create_revision, self._revision + 1)
        self._commit(Event(EventType.PUT, kv, current))
        return kv

    async def delete(self, key: str, expected_revision: int | None = None) -> KeyValue:
        self._check_running()
        rules.check_write(key)
        current = self._checked_current(key, expected_revision)
        kv = KeyValue(key, current.value, current.create_revision, self._revision + 1)
        self._commit(Event(EventType.DELETE, kv, current))
        return kv

    async def get(self, key: str, revision: int | None = None) -> KeyValue | None:
        self._check_running()
        at = rules.read_revision(revision, current=self._revision, compacted=self._compacted)
        return self._value_at(key, at)

    async def list(self, prefix: str, *, revision: int | None = None,
                   start_after: str | None = None, limit: int | None = None) -> ListResult:
        self._check_running()
        rules.check_limit(limit)
        at = rules.read_revision(revision, current=self._revision, compacted=self._compacted)
        if start_after is not None and start_after >= prefix:
            index = bisect.bisect_right(self._keys, start_after)
        else:
            index = bisect.bisect_left(self._keys, prefix)
        kvs: list[KeyValue] = []
        remaining = 0
        for key in self._keys[index:]:
            if not key.startswith(prefix):
                break
            kv = self._value_at(key, at)
            if kv is None:
                continue
            if limit is None or len(kvs) < limit:
                kvs.append(kv)
            else:
                remaining += 1
        return ListResult(kvs, at, more=remaining > 0, remaining=remaining)

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
        self._check_running()
        stream = self._fanout.watch(self._read_events, prefix, start_revision,
                                    progress=progress)
        return stream if progress else cast(AsyncIterator[Event], stream)

    async def compact(self, revision: int) -> None:
        self._check_running()
        target = rules.compact_target(revision, current=self._revision,
                                      compacted=self._compacted)
        if target is None:
            return
        del self._log[:target - self._compacted]
        for key in list(self._keys):
            versions = self._versions[key]
            # Keep the newest version at or below the target (the key's value there) and
            # everything after it; drop that version too if it is a delete.
            split = bisect.bisect_right(versions, target, key=lambda v: v[0])
            keep_from = split - 1 if split and versions[split - 1][1] is not None else split
            if keep_from > 0:
                del versions[:keep_from]
            if not versions:
                del self._versions[key]
        self._keys = [key for key in self._keys if key in self._versions]
        self._compacted = target

    async def _read_events(self, prefix: str, start: int, end: int,
                           limit: int) -> Sequence[Event]:
        if self._state is not _State.RUNNING:
            raise Unavailable("memory backend is closed")
        rules.check_watch_start(start, compacted=self._compacted)
        events: builtins.list[Event] = []
        for event in self._log[start - self._compacted - 1:]:
            if event.revision > end or len(events) >= limit:
                break
            if event.kv.key.startswith(prefix):
                events.append(event)
        return events

    def _check_running(self) -> None:
        if self._state is not _State.RUNNING:
            raise Unavailable(f"memory backend is {self._state.value}")

    def _latest(self, key: str) -> KeyValue | None:
        versions = self._versions.get(key)
        return versions[-1][1] if versions else None

    def _checked_current(self, key: str, expected_revision: int | None) -> KeyValue:
        current = self._latest(key)
        if current is None:
            raise KeyNotFound(key)
        if expected_revision is not None and current.mod_revision != expected_revision:
            raise RevisionConflict(key, expected_revision, current)
        return current

    def _value_at(self, key: str, revision: int) -> KeyValue | None:
        versions = self._versions.get(key)
        if not versions:
            return None
        index = bisect.bisect_right(versions, revision, key=lambda v: v[0])
        return versions[index - 1][1] if index else None

    def _commit(self, event: Event) -> None:
        key = event.kv.key
        self._revision = event.revision
        self._log.append(event)
        versions = self._versions.get(key)
        if versions is None:
            versions = self._versions[key] = []
            bisect.insort(self._keys, key)
        versions.append((event.revision, None if event.type is EventType.DELETE else event.kv))
        self._fanout.publish((event,))


if TYPE_CHECKING:
    _: Backend = MemoryBackend()
