"""The watch cache: every object under ``/registry/`` in memory, fed by one storage watch.

One reflector reads the whole keyspace once and then follows a single storage watch, so the
cache sees every write of the store in revision order. The watch asks for progress markers
(see :mod:`setpoint.storage.interface`), so the cache's revision also moves past revisions
that hold nothing under ``/registry/`` (another cluster's keys in a shared etcd). That gives:

* **Consistent reads without storage round trips.** :meth:`WatchCache.wait_fresh` asks the
  backend for its current revision and waits until the cache has applied it (by an event or
  a progress marker); a read after that observes every write acknowledged before the read
  began (Kubernetes' consistent reads from cache). Gets and lists are then served from memory.
* **Watch from any revision in the window.** The newest ``capacity`` events are kept; a watch
  from ``N`` replays events ``> N`` from that log and continues live. ``N`` older than the
  window is :class:`~setpoint.apimachinery.errors.Expired` (410), as the real watch cache.
  On start the cache lists the store at an older revision (at most ``capacity`` revisions
  back, never below the compacted one) and replays storage history from there before it is
  ready, so clients of a restarted server (or of another server on the same store) resume
  their watches from the resourceVersion they last saw instead of relisting.
* **Bounded fan-out.** Each :class:`Watcher` has a bounded queue for live events. A watcher that
  falls ``buffer`` events behind is closed (``lagged``); its client watches again from the last
  revision it saw. Nothing is buffered without limit.

Objects handed out are shared and must be treated as immutable; writers copy first.
Non-guarantees: the cache may lag storage by a few milliseconds (reads that need freshness
call :meth:`wait_fresh`); history that storage had compacted, or that is more than
``capacity`` revisions older than the start, is not in the log. When the newest
revision of the store is outside ``/registry/``, :meth:`wait_fresh` waits for the backend's
next progress marker (etcd: ``--experimental-watch-progress-notify-interval``); when storage
is unreachable it raises 503 while reads that name a resourceVersion the cache has are still
served from memory.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from setpoint.apimachinery import errors
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

ROOT = "/registry/"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CacheEvent:
    """An event as the API reports it: ``ADDED``, ``MODIFIED`` or ``DELETED``.

    ``object`` carries ``metadata.resourceVersion == str(revision)``; for ``DELETED`` it is
    the last state of the object. ``prev`` is the state before the event (``None`` on add).
    """

    type: str
    key: str
    object: Obj
    prev: Obj | None
    revision: int


def decode(value: bytes, revision: int) -> Obj:
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


def resource_prefix(key: str) -> str:
    """``/registry/<group>/<resource>/`` of a key."""
    parts = key.split("/", 4)
    return "/".join(parts[:4]) + "/"


class Watcher:
    """One subscriber: a replay list, then a bounded live queue.

    Iterate it with ``async for``; the iteration ends when the watcher is closed (by the
    consumer, by the cache on shutdown, or because it lagged — then ``lagged`` is true).
    """

    def __init__(self, cache: WatchCache, prefix: str, replay: list[CacheEvent], buffer: int):
        self._cache = cache
        self.prefix = prefix
        self._replay: collections.deque[CacheEvent] = collections.deque(replay)
        self._queue: asyncio.Queue[CacheEvent | None] = asyncio.Queue(maxsize=buffer)
        self.closed = False
        self.lagged = False

    def _offer(self, event: CacheEvent) -> None:
        if self.closed:
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.lagged = True
            self._end()

    def _end(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._cache._unsubscribe(self)
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    def close(self) -> None:
        """Stop receiving events; pending ones are dropped."""
        self._end()

    def pending_replay(self) -> int:
        return len(self._replay)

    def idle(self) -> bool:
        """Nothing is waiting to be read."""
        return not self._replay and self._queue.empty()

    async def next(self, timeout: float | None = None) -> CacheEvent | None:
        """The next event, or ``None`` when closed. ``TimeoutError`` after ``timeout``."""
        if self._replay:
            return self._replay.popleft()
        if self.closed and self._queue.empty():
            return None
        if timeout is None:
            event = await self._queue.get()
        else:
            async with asyncio.timeout(timeout):
                event = await self._queue.get()
        if event is None:
            self.closed = True
        return event

    def __aiter__(self) -> Watcher:
        return self

    async def __anext__(self) -> CacheEvent:
        event = await self.next()
        if event is None:
            raise StopAsyncIteration
        return event


class WatchCache:
    """All objects of the store, their recent history, and the watchers on them."""

    def __init__(self, backend: st.Backend, *, capacity: int = 20_000,
                 watcher_buffer: int = 4096) -> None:
        if capacity < 1 or watcher_buffer < 1:
            raise ValueError("capacity and watcher_buffer must be positive")
        self._backend = backend
        self._capacity = capacity
        self._watcher_buffer = watcher_buffer
        # per resource prefix: key -> object
        self._objects: dict[str, dict[str, Obj]] = {}
        self._log: collections.deque[CacheEvent] = collections.deque(maxlen=capacity)
        # events with revision > _window_start are all in the log
        self._window_start = 0
        self._watchers: dict[str, set[Watcher]] = {}
        self.revision = 0
        self._progress = asyncio.Condition()
        self._ready = asyncio.Event()
        self._ready_at = 0  # the store's revision at start: ready once it is applied
        self._listeners: list[Callable[[CacheEvent], None]] = []

    # --- lifecycle -----------------------------------------------------------------------

    async def run(self) -> None:
        """Fill the cache and follow the store until cancelled."""
        try:
            await self._initial_list()
            if self.revision >= self._ready_at:
                self._ready.set()
            while True:
                try:
                    await self._follow()
                except st.WatchLagged:
                    log.warning("watch cache fell behind storage at %d; resuming", self.revision)
                except st.Expired:
                    log.warning("watch cache history compacted past %d; relisting", self.revision)
                    await self._relist()
                except st.Unavailable:
                    log.warning("storage unavailable; watch cache retrying")
                    await asyncio.sleep(0.5)
        finally:
            for watchers in list(self._watchers.values()):
                for watcher in list(watchers):
                    watcher.close()

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
            objects = await self._list_all(base) if base else {}
        except st.Expired:  # compacted meanwhile: start without history
            base = current
            objects = await self._list_all(base)
        for key, obj in objects.items():
            self._objects.setdefault(resource_prefix(key), {})[key] = obj
        self.revision = base
        self._window_start = base
        self._ready_at = current

    async def _list_all(self, revision: int) -> dict[str, Obj]:
        found: dict[str, Obj] = {}
        start_after: str | None = None
        while True:
            page = await self._backend.list(ROOT, revision=revision, start_after=start_after,
                                            limit=10_000)
            for kv in page.kvs:
                found[kv.key] = decode(kv.value, kv.mod_revision)
            if not page.more or not page.kvs:
                return found
            start_after = page.kvs[-1].key

    async def _relist(self) -> None:
        """Replace the contents after the history we followed was compacted away."""
        revision = await self._backend.current_revision()
        fresh = await self._list_all(revision)
        # watchers cannot be told what they missed: end them all, they re-watch and get 410.
        for watchers in list(self._watchers.values()):
            for watcher in list(watchers):
                watcher.close()
        self._objects = {}
        for key, obj in fresh.items():
            self._objects.setdefault(resource_prefix(key), {})[key] = obj
        self._log.clear()
        self._window_start = revision
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
        prev = bucket.get(key)
        if event.type is st.EventType.PUT:
            obj = decode(event.kv.value, event.kv.mod_revision)
            bucket[key] = obj
            cache_event = CacheEvent("ADDED" if prev is None else "MODIFIED", key, obj, prev,
                                     event.revision)
        else:
            bucket.pop(key, None)
            if prev is None:
                prev = decode(event.kv.value, event.kv.create_revision)
            obj = with_revision(prev, event.revision)
            cache_event = CacheEvent("DELETED", key, obj, prev, event.revision)
        if len(self._log) == self._capacity:
            self._window_start = self._log[0].revision
        self._log.append(cache_event)
        for watcher in list(self._watchers.get(prefix, ())):
            if key.startswith(watcher.prefix):
                watcher._offer(cache_event)
        for listener in self._listeners:
            try:
                listener(cache_event)
            except Exception:
                log.exception("watch cache listener failed")

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
        except st.Unavailable as e:
            raise errors.ServiceUnavailable(f"storage is unavailable: {e}",
                                            retry_after=1) from e
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

    def count(self, prefix: str) -> int:
        bucket = self._objects.get(resource_prefix(prefix + "x"), {})
        if prefix == resource_prefix(prefix + "x"):
            return len(bucket)
        return sum(1 for k in bucket if k.startswith(prefix))

    # --- watch ---------------------------------------------------------------------------

    def oldest_watchable(self) -> int:
        """The lowest ``N`` a watch may start from (events ``> N`` are all kept)."""
        return self._window_start

    def watch(self, prefix: str, since: int | None) -> Watcher:
        """Subscribe to events under ``prefix``.

        ``since=None``: synthetic ADDED events for the current objects, then live.
        ``since=N``: the events with revision ``> N``, then live; 410 if they are gone.
        """
        if since is None:
            replay = [CacheEvent("ADDED", key, obj, None, self.revision)
                      for key, obj in self.items(prefix)]
        else:
            if since < self._window_start:
                raise errors.too_old_resource_version(since, self._window_start)
            replay = [e for e in self._events_after(since) if e.key.startswith(prefix)]
        watcher = Watcher(self, prefix, replay, self._watcher_buffer)
        self._watchers.setdefault(resource_prefix(prefix + "x"), set()).add(watcher)
        return watcher

    def _events_after(self, revision: int) -> list[CacheEvent]:
        if not self._log or revision >= self._log[-1].revision:
            return []
        # binary search on the log's revisions
        lo, hi = 0, len(self._log)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._log[mid].revision <= revision:
                lo = mid + 1
            else:
                hi = mid
        return [self._log[i] for i in range(lo, len(self._log))]

    def _unsubscribe(self, watcher: Watcher) -> None:
        watchers = self._watchers.get(resource_prefix(watcher.prefix + "x"))
        if watchers is not None:
            watchers.discard(watcher)

    def watcher_count(self) -> int:
        return sum(len(w) for w in self._watchers.values())
