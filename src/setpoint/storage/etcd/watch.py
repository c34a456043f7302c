"""One interface watch on one etcd watch: replay in pages, then live, bounded, in-band errors.

Each :class:`EtcdWatch` owns at most one etcd watch at a time, on its own gRPC stream, read
by a reader task that the backend's task group runs. The etcd watch asks for previous values
and for etcd's progress notifications. Its states::

    IDLE ──first step──▶ FOLLOWING ──replay page full──▶ IDLE (resumes when drained)
                             │──live buffer overflows──▶ LAGGED
                             │──compacted / etcd gone──▶ FAILED
    any ──aclose() / backend closed──▶ CLOSED

Invariants:

* **Exactly once, in order.** Every event under the prefix with revision ``>= start`` is
  yielded once, in revision order. An etcd watch starts at the revision after the last
  event buffered, and events below that start are dropped.
* **Expired is decided by etcd, atomically.** etcd refuses a watch that starts *below* its
  compacted revision, while the contract refuses one that starts *at or below* it (the
  event at the compacted revision may have been a delete that compaction dropped). Asking
  etcd to start one revision early and dropping that revision makes the two agree, with no
  separate check that a compaction could slip past.
* **Bounded.** Events at or below the revision etcd had when the watch was created are
  replay; at most ``page`` of them are held. When a page fills, the etcd watch is cancelled
  and re-created from the next revision once the consumer has drained the page (so a
  compaction that overtakes a replay ends it with :class:`Expired`, as with the other
  backends). Later events are live; when ``buffer`` of them are pending the stream is
  ended: its buffered events are dropped and its next step raises :class:`WatchLagged`.
* **Errors in-band.** Buffered events are yielded first, then the error
  (:class:`Expired`, :class:`Unavailable`), then ``StopAsyncIteration``.
* **Cancelling a step loses nothing:** the stream only advances when it hands an event out.

Non-guarantees: an etcd outage ends the stream with :class:`Unavailable` and nothing resumes
by itself (the caller watches again from its last revision + 1). Events that share a
revision (a foreign multi-key transaction) are never split across pages, so a page may
exceed ``page`` by them. Progress markers (``progress=True``) come as often as etcd sends
progress notifications (its ``--experimental-watch-progress-notify-interval``, 10 minutes by
default), not on demand.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from setpoint.storage.etcd import keys, wire
from setpoint.storage.interface import (
    Event,
    EventType,
    Expired,
    KeyValue,
    Progress,
    StorageError,
    Unavailable,
    WatchLagged,
)


@dataclass(frozen=True, slots=True)
class Host:
    """What a stream needs from its backend."""

    keyspace: keys.Keyspace
    open_call: Callable[[], wire.WatchCall]
    spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]
    current_revision: Callable[[], Awaitable[int]]
    compacted_revision: Callable[[], Awaitable[int]]
    forget: Callable[[EtcdWatch], None]
    timeout: float
    buffer: int
    page: int


class _State(enum.Enum):
    IDLE = "idle"
    FOLLOWING = "following"
    LAGGED = "lagged"
    FAILED = "failed"
    CLOSED = "closed"


class EtcdWatch(AsyncIterator[Event | Progress]):
    """A stream of events under ``prefix`` from ``start`` (and, with ``progress``,
    :class:`Progress` markers); see the module docstring."""

    def __init__(self, host: Host, prefix: str, start: int, *, progress: bool) -> None:
        self._host = host
        self._prefix = prefix
        self._progress = progress
        self._state = _State.IDLE
        self._next = start  # where the next etcd watch starts
        self._last = start - 1  # revision of the last event handed out
        self._buffer: deque[Event] = deque()
        self._replay = 0  # replay events at the head of the buffer; live ones follow
        self._known = 0  # progress: every event up to it has been buffered
        self._reported = 0  # the last progress marker handed out
        self._error: StorageError | None = None
        self._task: asyncio.Task[None] | None = None
        self._call: wire.WatchCall | None = None  # the reader's, while it runs
        self._wakeup = asyncio.Event()

    @property
    def last_revision(self) -> int:
        """The revision of the last event handed out (``start - 1`` before the first)."""
        return self._last

    async def __anext__(self) -> Event | Progress:
        while True:
            if self._state is _State.CLOSED:
                raise StopAsyncIteration
            if self._buffer:
                return self._hand_out()
            if self._state is _State.LAGGED:
                self._finish()
                raise WatchLagged(self._last)
            if self._state is _State.FAILED:
                error = self._error
                self._finish()
                assert error is not None
                raise error
            if self._progress and self._known > max(self._last, self._reported):
                self._reported = self._known
                return Progress(self._known)
            if self._state is _State.IDLE:
                self._task = self._host.spawn(self._follow(self._next))
                self._state = _State.FOLLOWING
            self._wakeup.clear()
            await self._wakeup.wait()

    async def aclose(self) -> None:
        """Stop watching; later steps raise ``StopAsyncIteration``. Idempotent."""
        task = self.end()
        if task is not None:
            await asyncio.wait({task})

    def end(self) -> asyncio.Task[None] | None:
        """Close without waiting; returns the reader task if one is still running. Its gRPC
        stream is cancelled, so that the reader's pending read completes and the reader
        returns by itself (cancelling the task instead would leave the read's completion to
        arrive later)."""
        task, self._task = self._task, None
        self._finish()
        if task is None or task.done():
            return None
        if self._call is not None:
            self._call.cancel()
        else:
            task.cancel()
        return task

    # -- consumer side -------------------------------------------------------------------

    def _hand_out(self) -> Event:
        event = self._buffer.popleft()
        if self._replay:
            self._replay -= 1
        self._last = event.revision
        return event

    def _finish(self) -> None:
        if self._state is not _State.CLOSED:
            self._state = _State.CLOSED
            self._buffer.clear()
            self._error = None
            self._host.forget(self)
        self._wakeup.set()

    # -- reader side ---------------------------------------------------------------------

    async def _follow(self, first: int) -> None:
        """The reader task: follow one etcd watch from ``first`` until it pauses or ends."""
        try:
            call = self._host.open_call()
        except StorageError as e:
            self._fail(e)
            return
        self._call = call
        try:
            await self._read(call, first)
        except asyncio.CancelledError:
            raise
        except StorageError as e:
            self._fail(e)
        except Exception as e:  # a defect must reach the consumer, not vanish in a task
            error = StorageError(f"etcd watch failed: {e!r}")
            error.__cause__ = e
            self._fail(error)
        finally:
            if self._call is call:
                self._call = None
            call.cancel()
            await call.finished()

    async def _read(self, call: wire.WatchCall, first: int) -> None:
        start, end = self._host.keyspace.range(self._prefix)
        # Replaying history: start one revision early so that etcd's own compaction check is
        # the contract's. Watching from now: start exactly, so that etcd registers the watch
        # as caught up and sends each write as it happens (an early start would leave it
        # waiting for etcd's next catch-up pass, which batches events).
        early = first <= await self._host.current_revision()
        await call.create(start, end, keys.to_etcd_revision(first) - (1 if early else 0))
        async with asyncio.timeout(self._host.timeout):
            reply = await call.read()
        horizon: int | None = None
        while True:
            if reply is None:
                raise Unavailable("etcd ended the watch stream")
            if reply.compact_revision:
                raise Expired(first, keys.from_etcd_revision(reply.compact_revision))
            if reply.canceled:
                raise Unavailable(f"etcd cancelled the watch: "
                                  f"{reply.cancel_reason or 'no reason given'}")
            if reply.created:
                horizon = keys.from_etcd_revision(reply.revision)
                if not early and horizon >= first:
                    # Writes came between the two requests, so this watch replays after all;
                    # check the one case etcd does not refuse (a start at the compacted
                    # revision itself).
                    compacted = await self._host.compacted_revision()
                    if first <= compacted:
                        raise Expired(first, compacted)
            elif horizon is None:
                raise Unavailable("etcd sent a watch response before creating the watch")
            elif not reply.events:
                self._progressed(keys.from_etcd_revision(reply.revision))
            else:
                horizon = await self._accept(reply, first, horizon)
                if horizon is None:
                    return
            reply = await call.read()

    async def _accept(self, reply: wire.WatchReply, first: int, horizon: int) -> int | None:
        """Buffer the events of one reply. Returns the replay horizon, or ``None`` when the
        etcd watch must stop (page full, lagged, closed).

        A reply that carries replay events is one of etcd's catch-up batches, which hold
        every event up to the reply's revision: all of them count as replay.
        """
        if self._state is not _State.FOLLOWING:
            return None
        if any(keys.from_etcd_revision(raw.kv.mod_revision) <= horizon for raw in reply.events):
            horizon = max(horizon, keys.from_etcd_revision(reply.revision))
        tail = self._buffer[-1].revision if self._buffer else self._last
        for raw in reply.events:
            if keys.from_etcd_revision(raw.kv.mod_revision) < first:
                continue  # the revision asked for early; its previous value may be gone
            event = await self._convert(raw)
            if event.revision > horizon:
                if len(self._buffer) - self._replay >= self._host.buffer:
                    self._lag()
                    return None
            elif self._replay >= self._host.page and event.revision != tail:
                self._next = event.revision
                self._state = _State.IDLE  # resumes from here once the page is drained
                self._wakeup.set()
                return None
            else:
                self._replay += 1
            self._buffer.append(event)
            tail = event.revision
        self._wakeup.set()
        return horizon

    async def _convert(self, raw: wire.RawEvent) -> Event:
        name = self._host.keyspace.name(raw.kv.key)
        prev = _key_value(name, raw.prev) if raw.prev is not None else None
        revision = keys.from_etcd_revision(raw.kv.mod_revision)
        if raw.deleted:
            if prev is None:
                raise await self._history_gone(revision)
            return Event(EventType.DELETE,
                         KeyValue(name, prev.value, prev.create_revision, revision), prev)
        if prev is None and raw.kv.create_revision != raw.kv.mod_revision:
            raise await self._history_gone(revision)
        return Event(EventType.PUT, _key_value(name, raw.kv), prev)

    async def _history_gone(self, revision: int) -> Expired:
        """etcd sends no previous value when it has been compacted away under the watch."""
        return Expired(revision, await self._host.compacted_revision())

    def _progressed(self, revision: int) -> None:
        if revision > self._known:
            self._known = revision
            if self._progress:
                self._wakeup.set()

    def _lag(self) -> None:
        self._state = _State.LAGGED
        self._buffer.clear()
        self._replay = 0
        self._wakeup.set()

    def _fail(self, error: StorageError) -> None:
        if self._state is _State.FOLLOWING:
            self._state = _State.FAILED
            self._error = error
            self._wakeup.set()


def _key_value(name: str, raw: wire.RawKV) -> KeyValue:
    return KeyValue(name, raw.value, keys.from_etcd_revision(raw.create_revision),
                    keys.from_etcd_revision(raw.mod_revision))
