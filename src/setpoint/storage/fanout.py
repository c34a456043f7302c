"""Watch machinery shared by every backend: replay history from a revision, then go live.

A backend owns one :class:`Fanout`. After each commit it calls :meth:`Fanout.publish` with the
committed events, in revision order, from the event loop. :meth:`Fanout.watch` returns a
:class:`WatchStream`, which is a position in the log rather than a subscription:

1. **Replay.** While the stream's next revision is at or below the last published revision
   ``R``, it reads a page of history (at most ``page_size`` events in ``[next, R]``) from the
   backend's :data:`ReadEvents` function.
2. **Live.** Once past ``R``, it subscribes. Reading ``R`` and subscribing happen in one
   synchronous step, so no event can fall between the last page and the first live event.

Invariants:

* A stream yields each event under its prefix with revision ``>= start`` exactly once, in
  revision order.
* Memory per watcher is bounded: one replay page, plus at most ``buffer`` live events. Publishing
  never waits for a watcher. A watcher whose live buffer would overflow is dropped at once (its
  buffer is released) and its next step raises :class:`WatchLagged` carrying the revision of
  the last event it yielded; the caller watches again from that revision + 1.
* :meth:`Fanout.close` ends every stream: its next step (or the one it is blocked in) raises
  ``StopAsyncIteration``.
* A stream opened with ``progress`` yields ``Progress(r)`` when it is live, has nothing
  buffered and ``r``, the last published revision, is above the last event or marker it
  yielded: every event under its prefix up to ``r`` has then been handed out. Publishing wakes
  such a stream even when no event matched it.

Non-guarantees: a stream starts reading only on its first step, so creating one reserves
nothing. Replay reads history in pages, so a compaction that overtakes a replaying stream ends
it with :class:`Expired` (possibly after some events); the caller must re-list.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from setpoint.storage import rules
from setpoint.storage.interface import Event, Progress, StorageError, WatchLagged

ReadEvents = Callable[[str, int, int, int], Awaitable[Sequence[Event]]]
"""``read(prefix, start, end, limit)``: the kept events under ``prefix`` with
``start <= revision <= end`` in revision order, at most ``limit`` of them. It raises
:class:`Expired` when ``start`` is at or below the compacted revision."""

DEFAULT_PAGE_SIZE = 256


class _State(enum.Enum):
    LIVE = "live"
    LAGGED = "lagged"
    CLOSED = "closed"


class _Subscriber:
    """A live watcher's bounded buffer; only its :class:`WatchStream` reads it."""

    __slots__ = ("buffer", "min_revision", "prefix", "progress", "state", "wakeup")

    def __init__(self, prefix: str, min_revision: int, progress: bool) -> None:
        self.prefix = prefix
        self.min_revision = min_revision
        self.progress = progress
        self.buffer: deque[Event] = deque()
        self.state = _State.LIVE
        self.wakeup = asyncio.Event()

    def end(self, state: _State) -> None:
        self.state = state
        self.buffer.clear()
        self.wakeup.set()


class Fanout:
    """Delivers published events to live watchers; see the module docstring."""

    def __init__(self, *, revision: int, buffer: int = rules.DEFAULT_WATCH_BUFFER,
                 page_size: int = DEFAULT_PAGE_SIZE) -> None:
        if buffer < 1:
            raise ValueError(f"watch buffer must be positive, got {buffer}")
        if page_size < 1:
            raise ValueError(f"page size must be positive, got {page_size}")
        self._revision = revision
        self._buffer = buffer
        self._page_size = min(page_size, buffer)
        self._subscribers: set[_Subscriber] = set()
        self._closed = False

    @property
    def revision(self) -> int:
        """The revision of the last published event (or the initial revision)."""
        return self._revision

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def page_size(self) -> int:
        return self._page_size

    @property
    def watchers(self) -> int:
        """Live subscribers now (streams still replaying are not counted)."""
        return len(self._subscribers)

    def publish(self, events: Sequence[Event]) -> None:
        """Hand committed events to live watchers; never blocks, never awaits.

        ``events`` must be in strictly increasing revision order, above every revision
        published before.
        """
        if not events:
            return
        last = self._revision
        for event in events:
            if event.revision <= last:
                raise ValueError(f"event at revision {event.revision} published after {last}")
            last = event.revision
        self._revision = last
        for subscriber in list(self._subscribers):
            matching = [e for e in events
                        if e.revision >= subscriber.min_revision
                        and e.kv.key.startswith(subscriber.prefix)]
            if not matching:
                if subscriber.progress:
                    subscriber.wakeup.set()  # it may report progress
                continue
            if len(subscriber.buffer) + len(matching) > self._buffer:
                self._subscribers.discard(subscriber)
                subscriber.end(_State.LAGGED)
                continue
            subscriber.buffer.extend(matching)
            subscriber.wakeup.set()

    def watch(self, read: ReadEvents, prefix: str, start_revision: int, *,
              progress: bool = False) -> WatchStream:
        """A stream of events under ``prefix`` from ``start_revision`` (``0`` means ``1``);
        with ``progress``, :class:`Progress` markers too."""
        return WatchStream(self, read, prefix, rules.watch_start(start_revision),
                           progress=progress)

    def close(self) -> None:
        """End every stream. Idempotent."""
        self._closed = True
        subscribers, self._subscribers = self._subscribers, set()
        for subscriber in subscribers:
            subscriber.end(_State.CLOSED)

    def _subscribe(self, prefix: str, min_revision: int, progress: bool) -> _Subscriber:
        subscriber = _Subscriber(prefix, min_revision, progress)
        self._subscribers.add(subscriber)
        return subscriber

    def _unsubscribe(self, subscriber: _Subscriber) -> None:
        self._subscribers.discard(subscriber)


class WatchStream(AsyncIterator[Event | Progress]):
    """One watcher's position in the log. Cancelling a step loses nothing: the stream only
    advances when it hands out an event or marker."""

    def __init__(self, fanout: Fanout, read: ReadEvents, prefix: str, start: int, *,
                 progress: bool = False) -> None:
        self._fanout = fanout
        self._read = read
        self._prefix = prefix
        self._progress = progress
        self._next = start
        self._last = start - 1
        self._reported = start - 1  # the last marker (or event) handed out
        self._page: deque[Event] = deque()
        self._subscriber: _Subscriber | None = None
        self._finished = False

    @property
    def last_revision(self) -> int:
        """The revision of the last event handed out (``start - 1`` before the first)."""
        return self._last

    async def __anext__(self) -> Event | Progress:
        while True:
            if self._finished or self._fanout.closed:
                await self.aclose()
                raise StopAsyncIteration
            if self._page:
                return self._hand_out(self._page.popleft())
            subscriber = self._subscriber
            if subscriber is not None:
                if subscriber.buffer:
                    return self._hand_out(subscriber.buffer.popleft())
                if subscriber.state is _State.LAGGED:
                    await self.aclose()
                    raise WatchLagged(self._last)
                if subscriber.state is _State.CLOSED:
                    continue
                if self._progress and self._fanout.revision > max(self._last, self._reported):
                    self._reported = self._fanout.revision
                    return Progress(self._reported)
                subscriber.wakeup.clear()
                await subscriber.wakeup.wait()
                continue
            end = self._fanout.revision
            if self._next > end:
                # No await between reading ``end`` and subscribing: nothing can slip between.
                self._subscriber = self._fanout._subscribe(self._prefix, self._next,
                                                           self._progress)
                continue
            await self._replay_page(end)

    async def _replay_page(self, end: int) -> None:
        limit = self._fanout.page_size
        try:
            page = await self._read(self._prefix, self._next, end, limit)
        except StorageError:
            if self._fanout.closed:
                return  # the backend closed under the read; the loop ends the stream
            await self.aclose()
            raise
        self._page.extend(page)
        self._next = page[-1].revision + 1 if len(page) >= limit else end + 1

    def _hand_out(self, event: Event) -> Event:
        self._last = event.revision
        return event

    async def aclose(self) -> None:
        """Stop watching; later steps raise ``StopAsyncIteration``. Idempotent."""
        self._finished = True
        self._page.clear()
        if self._subscriber is not None:
            self._fanout._unsubscribe(self._subscriber)
            self._subscriber = None
