"""The watch cache: every object under ``/registry/`` in memory, fed by one storage watch.

One reflector reads the whole keyspace once and then follows a single storage watch, so the
cache sees every write of the store in revision order. The watch asks for progress markers
(see :mod:`setpoint.storage.interface`), so the cache's revision also moves past revisions
that hold nothing under ``/registry/`` (another cluster's keys in a shared etcd). That gives:

* **Consistent reads without storage round trips.** :meth:`WatchCache.wait_fresh` asks the
  backend for its current revision and waits until the cache has applied it (by an event or
  a progress marker); a read after that observes every write acknowledged before the read
  began (Kubernetes' consistent reads from cache). Gets and lists are then served from memory.
* **Watch from any revision in the window.** The newest events are kept, at most
  ``capacity`` of them and at most ``max_bytes`` of stored bytes (see
  :mod:`setpoint.registry.history`: a key's newest version is the decoded object the cache
  serves, older versions are kept as their stored bytes); a watch from ``N`` replays events
  ``> N`` from that history and continues live. ``N`` older than the window is
  :class:`~setpoint.apimachinery.errors.Expired` (410), as the real watch cache; the client
  relists. On start the cache lists the store at an older revision (at most ``capacity``
  revisions back, never below the compacted one) and replays storage history from there
  before it is ready, so clients of a restarted server (or of another server on the same
  store) resume their watches from the resourceVersion they last saw instead of relisting.
* **Survives storage.** No storage error ends :meth:`WatchCache.run`: a storage watch that
  fails is followed again from the last revision applied (after a pause that doubles up to
  :data:`MAX_RETRY_PAUSE` while storage keeps failing), history compacted past it is
  relisted; readers meanwhile get what the cache holds, or 503 when they need storage.
* **Bounded fan-out.** Each :class:`Watcher` has a bounded queue of references into the
  history. A watcher that falls ``buffer`` events behind, or that has still to send an event
  the history no longer keeps, is closed (``lagged``) and its pending events are dropped;
  its client watches again from the last revision it saw. Nothing is buffered without limit,
  and a client that stops reading holds no more than the history does.
* **Sizes without scans.** Per resource the cache knows how many objects it holds and their
  stored bytes (:meth:`WatchCache.resource_size`), which is what a LIST of it will cost.

Objects handed out are shared and must be treated as immutable; writers copy first.
Non-guarantees: the cache may lag storage by a few milliseconds (reads that need freshness
call :meth:`wait_fresh`); history that storage had compacted, or that is more than
``capacity`` revisions older than the start, is not in the history. When the newest
revision of the store is outside ``/registry/``, :meth:`wait_fresh` waits for the backend's
next progress marker (etcd: ``--experimental-watch-progress-notify-interval``); when storage
is unreachable it raises 503 while reads that name a resourceVersion the cache has are still
served from memory.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import weakref
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Final

from setpoint.apimachinery import errors
from setpoint.registry import history as hist
from setpoint.registry import storageerrors
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

ROOT = "/registry/"
#: the first pause after a storage error, in seconds; it doubles after each failed attempt
MIN_RETRY_PAUSE = 0.1
#: the longest pause between two attempts to follow storage again, in seconds
MAX_RETRY_PAUSE = 5.0

#: the default bound of the history's charge (see :mod:`setpoint.registry.history`)
DEFAULT_MAX_BYTES: Final = 256 * 1024 * 1024
DEFAULT_CAPACITY: Final = 20_000

Obj = dict[str, Any]
CacheEvent = hist.CacheEvent
decode = hist.decode
with_revision = hist.with_revision


def resource_prefix(key: str) -> str:
    """``/registry/<group>/<resource>/`` of a key."""
    parts = key.split("/", 4)
    return "/".join(parts[:4]) + "/"


class SharedKey:
    """A key that many watchers use for the same frame of an event, interned by the cache
    (:meth:`WatchCache.shared_key`): equal keys are one object, hashed and compared by
    identity, so a thousand watchers look their frame up without hashing or comparing their
    selectors. Held by the watchers that use it; forgotten when none does."""

    __slots__ = ("__weakref__", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"SharedKey({self.key!r})"


class Watcher:
    """One subscriber: a replay list, then a bounded live queue.

    Iterate it with ``async for``; the iteration ends when the watcher is closed (by the
    consumer, by the cache on shutdown, or because it lagged — then ``lagged`` is true).
    A watcher lags when ``buffer`` live events are waiting, or when an event it has still
    to send falls out of the cache's history (so that a stalled client cannot keep
    history alive past the cache's bounds); its pending events are then dropped and its
    client watches again from the last revision it saw (410 Expired if that is older than
    the history now kept).
    """

    def __init__(self, cache: WatchCache, prefix: str,
                 replay: list[CacheEvent] | list[hist.Entry], buffer: int):
        self._cache = cache
        self.prefix = prefix
        self._replay: collections.deque[CacheEvent | hist.Entry] = collections.deque(replay)
        self._live: collections.deque[hist.Entry] = collections.deque()
        self._buffer = buffer
        # the reader waiting for an event (None: nobody waits), and the one timer that ends
        # its wait: armed once for a deadline and moved only when a wait needs an earlier one
        # (an event per watcher costs no timer work, a thousand watchers no timer churn)
        self._waiter: asyncio.Future[None] | None = None
        self._alarm: asyncio.TimerHandle | None = None
        self._alarm_at = 0.0
        # where a caught-up watcher's events go without waking its reader (see set_sink)
        self._sink: Callable[[hist.Entry], bool] | None = None
        self.closed = False
        self.lagged = False

    def set_sink(self, sink: Callable[[hist.Entry], bool] | None) -> None:
        """Hand live events to ``sink`` instead of queueing them, while the reader is
        parked waiting in :meth:`next_until` with nothing queued or held back.

        ``sink(entry)`` returns whether it took the event (sent it, or decided not to send
        it); an event it does not take is queued and the reader woken, as without a sink,
        and the sink is not asked again until the reader has caught up and parked. So the
        reader and the sink together see every event once, in revision order, provided the
        reader has finished with each event it took before it waits for the next."""
        self._sink = sink

    def _offer(self, entry: hist.Entry) -> None:
        if self.closed:
            return
        sink = self._sink
        if sink is not None and not self._live and not self._replay:
            waiter = self._waiter
            if waiter is not None and not waiter.done() and sink(entry):
                return
        if len(self._live) >= self._buffer:
            self._lag()
            return
        self._live.append(entry)
        self._cache._backlogged.add(self)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _lag(self) -> None:
        self.lagged = True
        self._end()

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._sink = None
        self._replay.clear()
        self._live.clear()
        self._cache._unsubscribe(self)
        if self._alarm is not None:
            self._alarm.cancel()
            self._alarm = None
        self._wake()

    def close(self) -> None:
        """Stop receiving events; pending ones are dropped."""
        self._end()

    def oldest_pending(self) -> int | None:
        """The revision of the oldest history event still to send (None: none)."""
        if self._replay:
            first = self._replay[0]
            if isinstance(first, hist.Entry):
                return first.revision
        return self._live[0].revision if self._live else None

    def pending_replay(self) -> int:
        return len(self._replay)

    def idle(self) -> bool:
        """Nothing is waiting to be read."""
        return not self._replay and not self._live

    async def next(self, timeout: float | None = None) -> CacheEvent | None:
        """The next event, or ``None`` when closed. ``TimeoutError`` after ``timeout``."""
        deadline = None if timeout is None else \
            asyncio.get_running_loop().time() + timeout
        return await self.next_until(deadline)

    async def next_until(self, deadline: float | None) -> CacheEvent | None:
        """The next event, or ``None`` when closed. ``TimeoutError`` once the event loop's
        clock reaches ``deadline`` (None: wait as long as it takes)."""
        while True:
            if self._replay:
                item = self._replay.popleft()
                self._taken()
                return item if isinstance(item, CacheEvent) else item.event()
            if self._live:
                entry = self._live.popleft()
                self._taken()
                return entry.event()
            if self.closed:
                return None
            loop = asyncio.get_running_loop()
            if deadline is not None:
                if loop.time() >= deadline:
                    raise TimeoutError
                if self._alarm is None or self._alarm_at > deadline:
                    if self._alarm is not None:
                        self._alarm.cancel()
                    self._alarm_at = deadline
                    self._alarm = loop.call_at(deadline, self._ring)
            waiter = self._waiter = loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    def _ring(self) -> None:
        """The alarm: the waiting reader looks at the clock (its deadline may have moved
        later meanwhile: then it sets the alarm again)."""
        self._alarm = None
        self._wake()

    def frame(self, event: CacheEvent, key: hist.FrameKey, make: Callable[[], bytes]) -> bytes:
        """The bytes ``make`` returns for ``event`` as ``key`` says, shared with every other
        watcher that asks for the same ``key`` of the same event (see
        :meth:`~setpoint.registry.history.History.frame`); ``key`` must name everything the
        bytes depend on besides the event."""
        if event.origin is None:  # an initial ADDED of the current state: no shared entry
            return make()
        return self._cache._history.frame(event.origin, key, make)

    def shared_frame(self, entry: hist.Entry, key: Hashable, make: Callable[[], bytes]
                     ) -> bytes:
        """:meth:`frame` of a history entry, under a key from :meth:`shared_key`."""
        return self._cache._history.frame(entry, key, make)

    def shared_key(self, key: Hashable) -> SharedKey:
        """The one :class:`SharedKey` of ``key`` among the cache's watchers (see there)."""
        return self._cache.shared_key(key)

    def verdict(self, event: CacheEvent, key: Hashable, decide: Callable[[], str | None]
                ) -> str | None:
        """``decide()``, shared with the other watchers asking the same ``key`` of the same
        event (see :meth:`~setpoint.registry.history.History.verdict`)."""
        if event.origin is None:
            return decide()
        return self._cache._history.verdict(event.origin, key, decide)

    def _taken(self) -> None:
        if not self._live and not (self._replay and isinstance(self._replay[0], hist.Entry)):
            self._cache._backlogged.discard(self)

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> CacheEvent:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event


class WatchCache:
    """All objects of the store, their recent history, and the watchers on them."""

    def __init__(self, backend: st.Backend, *, capacity: int = DEFAULT_CAPACITY,
                 max_bytes: int = DEFAULT_MAX_BYTES, watcher_buffer: int = 4096) -> None:
        if capacity < 1 or watcher_buffer < 1 or max_bytes < 1:
            raise ValueError("capacity, max_bytes and watcher_buffer must be positive")
        self._backend = backend
        self._capacity = capacity
        self._watcher_buffer = watcher_buffer
        # per resource prefix: key -> object, and the stored bytes of them all
        self._objects: dict[str, dict[str, Obj]] = {}
        self._bytes: dict[str, int] = {}
        self._history = hist.History(capacity=capacity, max_bytes=max_bytes)
        self._watchers: dict[str, set[Watcher]] = {}
        # watchers with history entries still to send (checked when history is evicted)
        self._backlogged: set[Watcher] = set()
        self.revision = 0
        self._progress = asyncio.Condition()
        self._ready = asyncio.Event()
        self._ready_at = 0  # the store's revision at start: ready once it is applied
        self._listeners: list[Callable[[CacheEvent], None]] = []
        self._shared_keys: weakref.WeakValueDictionary[Hashable, SharedKey] = \
            weakref.WeakValueDictionary()

    # --- lifecycle -----------------------------------------------------------------------

    async def run(self) -> None:
        """Fill the cache and follow the store until cancelled.

        No storage error ends it: a watch that ends or fails is resumed from the last
        revision applied, history compacted past it is relisted, and a storage that cannot
        answer is asked again after a pause that doubles up to ``MAX_RETRY_PAUSE`` (and
        starts again from ``MIN_RETRY_PAUSE`` once a step succeeded)."""
        try:
            pause = MIN_RETRY_PAUSE
            while True:
                try:
                    await self._initial_list()
                    break
                except st.StorageError as e:
                    log.warning("storage error (%s) listing the store; watch cache retrying "
                                "in %.1f s", e, pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, MAX_RETRY_PAUSE)
            if self.revision >= self._ready_at:
                self._ready.set()
            await self._keep_following()
        finally:
            for watchers in list(self._watchers.values()):
                for watcher in list(watchers):
                    watcher.close()

    async def _keep_following(self) -> None:
        pause = MIN_RETRY_PAUSE
        relist = False
        while True:
            before = self.revision
            try:
                if relist:
                    await self._relist()
                    relist = False
                await self._follow()
            except st.WatchLagged:
                log.warning("watch cache fell behind storage at %d; resuming", self.revision)
                continue
            except st.Expired:
                log.warning("watch cache history compacted past %d; relisting", self.revision)
                relist = True
                continue
            except st.Unreadable as e:
                if not relist:  # history it cannot read is history it does not have
                    log.warning("watch cache cannot read history after %d (%s); relisting",
                                self.revision, e)
                    relist = True
                    continue
                # the current state itself is unreadable: wait as for any storage error
                log.warning("storage error (%s); watch cache retrying in %.1f s", e, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_PAUSE)
                continue
            except st.StorageError as e:
                if self.revision > before:
                    pause = MIN_RETRY_PAUSE  # it made progress before failing
                what = "storage unavailable" if isinstance(e, st.Unavailable) else \
                    "storage error"
                log.warning("%s (%s); watch cache retrying in %.1f s from %d", what, e, pause,
                            self.revision)
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_PAUSE)
                continue
            # the storage watch ended without an error (a backend may end it at any time)
            if self.revision > before:
                pause = MIN_RETRY_PAUSE
            else:
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_PAUSE)

    async def wait_ready(self) -> None:
        await self._ready.wait()

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def add_listener(self, listener: Callable[[CacheEvent], None]) -> None:
        """Call ``listener`` synchronously for every event after it is applied."""
        self._listeners.append(listener)

    async def _initial_list(self) -> None:
        """List the store at a revision up to ``capacity`` back; following the watch from
        there replays the history since into the log (see the module docstring)."""
        current = await self._backend.current_revision()
        base = max(await self._backend.compacted_revision(), current - self._capacity, 0)
        try:
            # revision 0 is the empty store (a read "at 0" would mean "now")
            if base:
                await self._list_all(base)
        except (st.Expired, st.Unreadable):
            # compacted meanwhile, or holding values no longer readable (encrypted with a key
            # since removed): start without history
            base = current
            await self._list_all(base)
        self.revision = base
        self._history.reset(base)
        self._ready_at = current

    async def _list_all(self, revision: int) -> None:
        """Replace the objects with the store's at ``revision``."""
        objects: dict[str, dict[str, Obj]] = {}
        sizes: dict[str, int] = {}
        start_after: str | None = None
        while True:
            page = await self._backend.list(ROOT, revision=revision, start_after=start_after,
                                            limit=10_000)
            for kv in page.kvs:
                prefix = resource_prefix(kv.key)
                objects.setdefault(prefix, {})[kv.key] = decode(kv.value, kv.mod_revision)
                sizes[prefix] = sizes.get(prefix, 0) + len(kv.value)
            if not page.more or not page.kvs:
                break
            start_after = page.kvs[-1].key
        self._objects = objects
        self._bytes = sizes

    async def _relist(self) -> None:
        """Replace the contents after the history we followed was compacted away."""
        revision = await self._backend.current_revision()
        await self._list_all(revision)
        # watchers cannot be told what they missed: end them all, they re-watch and get 410.
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher.close()
        self._history.reset(revision)
        await self._advance(revision)

    async def _follow(self) -> None:
        async for item in self._backend.watch(ROOT, self.revision + 1, progress=True):
            if isinstance(item, st.Progress):
                if item.revision > self.revision:
                    await self._advance(item.revision)
                continue
            self._apply(item)
            await self._advance(item.revision)

    async def _advance(self, revision: int) -> None:
        self.revision = revision
        if revision >= self._ready_at and not self._ready.is_set():
            self._ready.set()
        async with self._progress:
            self._progress.notify_all()

    def _apply(self, event: st.Event) -> None:
        key = event.kv.key
        prefix = resource_prefix(key)
        bucket = self._objects.setdefault(prefix, {})
        current = bucket.get(key)
        before = event.prev
        size = self._bytes.get(prefix, 0)
        if current is not None and before is not None:
            size -= len(before.value)
        history = self._history
        window = history.window_start
        if event.type is st.EventType.PUT:
            obj = decode(event.kv.value, event.kv.mod_revision)
            bucket[key] = obj
            size += len(event.kv.value)
            kind = hist.ADDED if current is None else hist.MODIFIED
            entry = history.record(
                kind, key, event.revision, obj, current, value=None,
                prev_value=before.value if before is not None and current is not None else None,
                prev_revision=before.mod_revision if before is not None else 0)
        else:
            bucket.pop(key, None)
            prev_revision = before.mod_revision if before is not None \
                else event.kv.create_revision
            if current is None:
                current = decode(event.kv.value, prev_revision)
            entry = history.record(hist.DELETED, key, event.revision,
                                   with_revision(current, event.revision), current,
                                   value=event.kv.value, prev_value=event.kv.value,
                                   prev_revision=prev_revision)
        self._bytes[prefix] = max(size, 0)
        if history.window_start != window:
            self._drop_lagging(history.window_start)
        for watcher in list(self._watchers.get(prefix, ())):
            if key.startswith(watcher.prefix):
                watcher._offer(entry)
        hot = entry.event()
        for listener in self._listeners:
            try:
                listener(hot)
            except Exception:
                log.exception("watch cache listener failed")

    def _drop_lagging(self, window_start: int) -> None:
        """End the watchers that still have to send an event the history no longer keeps."""
        for watcher in list(self._backlogged):
            oldest = watcher.oldest_pending()
            if oldest is None:
                self._backlogged.discard(watcher)
            elif oldest <= window_start:
                watcher._lag()

    # --- reads ---------------------------------------------------------------------------

    async def wait_for(self, revision: int, timeout: float = 10.0) -> None:
        """Wait until the cache has applied ``revision``; 504 after ``timeout``."""
        if self.revision >= revision:
            return
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self.revision >= revision)
        except TimeoutError:
            raise errors.Timeout(
                f"Too large resource version: {revision}, current: {self.revision}",
                details={"causes": [{"reason": "ResourceVersionTooLarge",
                                     "message": "Too large resource version"}],
                         "retryAfterSeconds": 1},
            ) from None

    async def wait_fresh(self) -> int:
        """Wait until every write acknowledged so far is in the cache; return that revision."""
        await self._ready.wait()
        try:
            revision = await self._backend.current_revision()
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        await self.wait_for(revision)
        return self.revision

    def get(self, key: str) -> Obj | None:
        return self._objects.get(resource_prefix(key), {}).get(key)

    def items(self, prefix: str) -> Iterator[tuple[str, Obj]]:
        """Objects under ``prefix`` (a resource prefix or a narrower one), in key order."""
        whole = resource_prefix(prefix + "x")
        bucket = self._objects.get(whole, {})
        if prefix == whole:
            keys = sorted(bucket)
        else:
            keys = sorted(k for k in bucket if k.startswith(prefix))
        for key in keys:
            yield key, bucket[key]

    def snapshot(self, prefix: str) -> tuple[list[str], list[Obj]]:
        """The keys and objects of :meth:`items`, as two lists taken in one step."""
        whole = resource_prefix(prefix + "x")
        bucket = self._objects.get(whole, {})
        keys = sorted(bucket) if prefix == whole else sorted(
            k for k in bucket if k.startswith(prefix))
        return keys, [bucket[k] for k in keys]

    def count(self, prefix: str) -> int:
        """Objects under ``prefix`` (a resource's, or a narrower one): without a scan when
        it is a whole resource's."""
        bucket = self._objects.get(prefix)
        if bucket is not None:
            return len(bucket)  # only a whole resource's prefix names a bucket
        if prefix.count("/") == 4 and prefix.endswith("/"):
            return 0  # a whole resource's prefix (/registry/<group>/<resource>/), no bucket
        whole = resource_prefix(prefix + "x")
        bucket = self._objects.get(whole, {})
        if prefix == whole:
            return len(bucket)
        return sum(1 for k in bucket if k.startswith(prefix))

    def resource_size(self, prefix: str) -> tuple[int, int]:
        """``(objects, stored bytes)`` of the whole resource that ``prefix`` is in.

        Both are known without a scan, for every resource; a narrower prefix (a namespace)
        gets its resource's figures, as an upper bound.
        """
        whole = resource_prefix(prefix + "x")
        return len(self._objects.get(whole, ())), self._bytes.get(whole, 0)

    # --- history -------------------------------------------------------------------------

    @property
    def history_events(self) -> int:
        """Events kept for watches (at most ``capacity``)."""
        return len(self._history)

    @property
    def history_bytes(self) -> int:
        """What the kept events are charged (at most ``max_bytes``, or a single event)."""
        return self._history.bytes

    # --- watch ---------------------------------------------------------------------------

    def oldest_watchable(self) -> int:
        """The lowest ``N`` a watch may start from (events ``> N`` are all kept)."""
        return self._history.window_start

    def watch(self, prefix: str, since: int | None) -> Watcher:
        """Subscribe to events under ``prefix``.

        ``since=None``: synthetic ADDED events for the current objects, then live.
        ``since=N``: the events with revision ``> N``, then live; 410 if they are gone.
        """
        watcher: Watcher
        if since is None:
            snapshot = [CacheEvent(hist.ADDED, key, obj, None, self.revision)
                        for key, obj in self.items(prefix)]
            watcher = Watcher(self, prefix, snapshot, self._watcher_buffer)
        else:
            window_start = self._history.window_start
            if since < window_start:
                raise errors.too_old_resource_version(since, window_start)
            replay = [e for e in self._history.after(since) if e.key.startswith(prefix)]
            watcher = Watcher(self, prefix, replay, self._watcher_buffer)
            if replay:
                self._backlogged.add(watcher)
        self._watchers.setdefault(resource_prefix(prefix + "x"), set()).add(watcher)
        return watcher

    def _unsubscribe(self, watcher: Watcher) -> None:
        self._backlogged.discard(watcher)
        watchers = self._watchers.get(resource_prefix(watcher.prefix + "x"))
        if watchers is not None:
            watchers.discard(watcher)

    def shared_key(self, key: Hashable) -> SharedKey:
        """The :class:`SharedKey` of ``key``: the same object for equal keys while any
        watcher holds it."""
        shared = self._shared_keys.get(key)
        if shared is None:
            shared = self._shared_keys[key] = SharedKey(key)
        return shared

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())
