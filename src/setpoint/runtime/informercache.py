"""The informer cache: the objects of one watched kind, with secondary indexes.

A :class:`Cache` is fed :mod:`~setpoint.runtime.watcher` events (:meth:`Cache.apply`, or
:meth:`Cache.feed` for a whole stream) and read by any number of controllers: ``get(key)``,
``list()``, ``by_index(index, value)``. Keys are client-go's ``namespace/name`` (``name``
for cluster-scoped objects). Every cache has the ``namespace`` index and the ``owner`` index
(the UIDs in ``metadata.ownerReferences``); :meth:`Cache.add_indexer` adds any function
``obj -> list[str]``. Handlers subscribe with :meth:`Cache.subscribe` and are told
``on_add(obj)``, ``on_update(old, new)`` and ``on_delete(obj)``.

Invariants:

- **Atomic relist**: between ``Init`` and ``InitDone`` readers keep seeing the previous
  contents; on ``InitDone`` the buffered list replaces them in one step (no ``await`` in
  between), then handlers hear ``on_delete`` for each object absent from the new list,
  ``on_add`` for each new one and ``on_update(old, new)`` for each one in both (as client-go's
  ``Replace``: a relist re-triggers every handler; filter with the resourceVersion if that is
  unwanted).
- Indexes always agree with the objects: an index function runs before the store changes, so
  one that raises leaves the cache as it was (the exception propagates from ``apply``).
- Handlers run synchronously, in subscription order, after the store changed: a handler that
  reads the cache sees the new state. A handler's exception is logged and does not reach the
  other handlers or the watcher. A handler subscribing to a synced cache first hears
  ``on_add`` for every object it holds.
- Lists and index lookups are sorted by key (deterministic).
- :attr:`Cache.resource_version` only moves forward: the highest resourceVersion of any
  object applied (added, updated or deleted) or of a complete list. Once it reaches a
  write's resourceVersion, the cache shows that write or something newer
  (:meth:`Cache.wait_for_resource_version`): the read-your-writes signal.

Non-guarantees: objects are **shared, not copied**: every reader and handler gets the very
dict the watcher decoded. Treat them as immutable; ``copy.deepcopy`` before changing one.
resourceVersions are compared as integers, which they are on setpoint and on every
Kubernetes cluster (etcd revisions) although the API calls them opaque; a non-integer one is
ignored by the tracking, and waiting for one raises ``ValueError``.
Handlers must be quick and must not block (enqueue a key and return): there is no buffer per
handler, so a slow handler slows the watcher, and nothing grows without bound. ``on_delete``
may name an object the cache never held (a delete seen without its create).

One cache serves every controller watching the same kind with the same selectors; keeping
one per kind is the manager's job.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from setpoint.runtime import watcher

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]
KeyFunc = Callable[[Obj], str]
IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"
OWNER_INDEX = "owner"


def object_key(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's key)."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not name:
        raise ValueError("an object without metadata.name has no key")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def index_by_namespace(obj: Obj) -> list[str]:
    """The object's namespace ("" for cluster-scoped objects)."""
    return [str((obj.get("metadata") or {}).get("namespace") or "")]


def index_by_owner_uid(obj: Obj) -> list[str]:
    """The UIDs of the object's owners (``metadata.ownerReferences[].uid``)."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [str(ref["uid"]) for ref in refs if isinstance(ref, Mapping) and ref.get("uid")]


def parse_resource_version(resource_version: object) -> int:
    """A resourceVersion as an integer; ``ValueError`` unless it is a non-negative integer
    (a string of digits, as setpoint and Kubernetes give them)."""
    if isinstance(resource_version, str) and resource_version.isascii() \
            and resource_version.isdigit() \
            and len(resource_version) <= 20:
        return int(resource_version)
    raise ValueError(f"not an integer resourceVersion: {resource_version!r}")


class EventHandler(Protocol):
    def on_add(self, obj: Obj) -> None:
        """An object appeared (or was there when the handler subscribed)."""

    def on_update(self, old: Obj, new: Obj) -> None:
        """An object changed (``old`` may equal ``new`` after a relist or resync)."""

    def on_delete(self, obj: Obj) -> None:
        """An object is gone; ``obj`` is its last known state."""


def _ignore(*_: Obj) -> None:
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Handlers:
    """An :class:`EventHandler` from plain functions; leave out the ones you do not need."""

    add: Callable[[Obj], None] = _ignore
    update: Callable[[Obj, Obj], None] = _ignore
    delete: Callable[[Obj], None] = _ignore

    def on_add(self, obj: Obj) -> None:
        self.add(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self.update(old, new)

    def on_delete(self, obj: Obj) -> None:
        self.delete(obj)


class Subscription:
    """A handler's registration; :meth:`cancel` stops its notifications."""

    def __init__(self, cache: Cache, handler: EventHandler) -> None:
        self._cache = cache
        self.handler = handler

    def cancel(self) -> None:
        self._cache._unsubscribe(self)


class _Index:
    """One secondary index: value -> keys, and key -> values to update it."""

    def __init__(self, func: IndexFunc) -> None:
        self.func = func
        self.keys_by_value: dict[str, set[str]] = {}
        self.values_by_key: dict[str, tuple[str, ...]] = {}

    def values_of(self, obj: Obj) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.func(obj)))  # dedup, keep order

    def put(self, key: str, values: tuple[str, ...]) -> None:
        self.remove(key)
        if values:
            self.values_by_key[key] = values
            for value in values:
                self.keys_by_value.setdefault(value, set()).add(key)

    def remove(self, key: str) -> None:
        for value in self.values_by_key.pop(key, ()):
            keys = self.keys_by_value[value]
            keys.discard(key)
            if not keys:
                del self.keys_by_value[value]


class Cache:
    """Objects of one kind by key, with indexes and change handlers.

    >>> from setpoint.runtime.watcher import Init, InitApply, InitDone
    >>> cache = Cache()
    >>> pod = {"metadata": {"namespace": "default", "name": "web", "resourceVersion": "7"}}
    >>> for event in (Init(), InitApply(pod), InitDone()):
    ...     cache.apply(event)
    >>> cache.get("default/web") is pod, [o["metadata"]["name"] for o in
    ...                                      cache.by_index("namespace", "default")]
    (True, ['web'])
    """

    def __init__(self, *, key_func: KeyFunc = object_key,
                 indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self._key = key_func
        self._objects: dict[str, Obj] = {}
        self._buffer: dict[str, Obj] | None = None  # the list being read, between Init and Done
        self._indexes: dict[str, _Index] = {}
        self._subscriptions: list[Subscription] = []
        self._synced = asyncio.Event()
        # the highest integer resourceVersion applied, and who waits for a higher one
        self._rv = -1
        self._rv_waiters: builtins.list[tuple[int, asyncio.Future[None]]] = []
        self.add_indexer(NAMESPACE_INDEX, index_by_namespace)
        self.add_indexer(OWNER_INDEX, index_by_owner_uid)
        for name, func in (indexers or {}).items():
            self.add_indexer(name, func)

    # --- reading ---------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def keys(self) -> builtins.list[str]:
        return sorted(self._objects)

    def list(self) -> builtins.list[Obj]:
        return [self._objects[k] for k in sorted(self._objects)]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        """Keys of the objects whose ``index`` function returned ``value``."""
        return sorted(self._index(index).keys_by_value.get(value, ()))

    def by_index(self, index: str, value: str) -> builtins.list[Obj]:
        """The objects whose ``index`` function returned ``value``."""
        return [self._objects[k] for k in self.index_keys(index, value)]

    def index_values(self, index: str) -> builtins.list[str]:
        """Every value ``index`` currently holds."""
        return sorted(self._index(index).keys_by_value)

    @property
    def synced(self) -> bool:
        """True once a first complete list has been applied."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    @property
    def resource_version(self) -> str | None:
        """The highest resourceVersion the cache has applied (None before any)."""
        return str(self._rv) if self._rv >= 0 else None

    def has_seen(self, resource_version: str) -> bool:
        """Whether the cache has applied ``resource_version`` or a later one."""
        return self._rv >= parse_resource_version(resource_version)

    async def wait_for_resource_version(self, resource_version: str) -> None:
        """Return once the cache has applied ``resource_version`` or a later one.

        Pass the ``metadata.resourceVersion`` a write returned: afterwards the cache shows
        that write (or a newer state of the object, or its deletion). Never returns if the
        write is not of this cache's kind and namespace; bound it with a timeout.
        """
        wanted = parse_resource_version(resource_version)
        if self._rv >= wanted:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (wanted, waiter)
        self._rv_waiters.append(entry)
        try:
            await waiter
        finally:
            if entry in self._rv_waiters:
                self._rv_waiters.remove(entry)

    def _advance(self, resource_version: object) -> None:
        try:
            rv = parse_resource_version(resource_version)
        except ValueError:
            return
        if rv <= self._rv:
            return
        self._rv = rv
        if self._rv_waiters:
            still: builtins.list[tuple[int, asyncio.Future[None]]] = []
            for wanted, waiter in self._rv_waiters:
                if wanted <= rv:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    still.append((wanted, waiter))
            self._rv_waiters = still

    def _index(self, name: str) -> _Index:
        try:
            return self._indexes[name]
        except KeyError:
            raise KeyError(f"no index named {name!r}") from None

    # --- indexes and handlers --------------------------------------------------------

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        """Add an index; the objects already held are indexed at once."""
        if name in self._indexes:
            raise ValueError(f"an index named {name!r} exists")
        index = _Index(func)
        values = {key: index.values_of(obj) for key, obj in self._objects.items()}
        for key, vals in values.items():
            index.put(key, vals)
        self._indexes[name] = index

    def subscribe(self, handler: EventHandler, *, replay: bool = True) -> Subscription:
        """Tell ``handler`` about every change from now on (and, if synced and ``replay``,
        ``on_add`` for every object held now)."""
        subscription = Subscription(self, handler)
        self._subscriptions.append(subscription)
        if replay and self.synced:
            for obj in self.list():
                self._call(handler.on_add, obj)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if subscription in self._subscriptions:
            self._subscriptions.remove(subscription)

    # --- writing ---------------------------------------------------------------------

    async def feed(self, events: AsyncIterable[watcher.WatcherEvent]) -> None:
        """Apply every event of a watcher (returns when the stream ends)."""
        async for event in events:
            self.apply(event)

    def apply(self, event: watcher.WatcherEvent) -> None:
        """Apply one watcher event, then notify the handlers."""
        match event:
            case watcher.Init():
                self._buffer = {}
            case watcher.InitApply(obj):
                if self._buffer is None:
                    self._buffer = {}
                self._buffer[self._key(obj)] = obj
            case watcher.InitDone():
                buffered = self._buffer or {}
                self._replace(buffered)
                self._advance_past(buffered.values())
                self._advance(event.resource_version)
            case watcher.Apply(obj):
                self._put(obj)
                self._advance_past((obj,))
            case watcher.Delete(obj):
                self._delete(obj)
                self._advance_past((obj,))
            case watcher.Resync():
                for obj in self.list():
                    self._notify_update(obj, obj)

    def _advance_past(self, objs: Iterable[Obj]) -> None:
        for obj in objs:
            self._advance((obj.get("metadata") or {}).get("resourceVersion"))

    def _put(self, obj: Obj) -> None:
        key = self._key(obj)
        values = {name: index.values_of(obj) for name, index in self._indexes.items()}
        old = self._objects.get(key)
        self._objects[key] = obj
        for name, index in self._indexes.items():
            index.put(key, values[name])
        if old is None:
            for s in list(self._subscriptions):
                self._call(s.handler.on_add, obj)
        else:
            self._notify_update(old, obj)

    def _delete(self, obj: Obj) -> None:
        key = self._key(obj)
        self._objects.pop(key, None)
        for index in self._indexes.values():
            index.remove(key)
        for s in list(self._subscriptions):
            self._call(s.handler.on_delete, obj)

    def _replace(self, new: dict[str, Obj]) -> None:
        indexes = {name: _Index(index.func) for name, index in self._indexes.items()}
        for index in indexes.values():
            for key, obj in new.items():
                index.put(key, index.values_of(obj))
        old = self._objects
        self._objects = new
        self._indexes = indexes
        self._buffer = None
        self._synced.set()
        subscriptions = list(self._subscriptions)
        for key, obj in old.items():
            if key not in new:
                for s in subscriptions:
                    self._call(s.handler.on_delete, obj)
        for key, obj in new.items():
            before = old.get(key)
            for s in subscriptions:
                if before is None:
                    self._call(s.handler.on_add, obj)
                else:
                    self._call(s.handler.on_update, before, obj)

    def _notify_update(self, old: Obj, new: Obj) -> None:
        for s in list(self._subscriptions):
            self._call(s.handler.on_update, old, new)

    @staticmethod
    def _call(method: Callable[..., None], *args: Obj) -> None:
        try:
            method(*args)
        except Exception:
            logger.exception("a cache event handler failed")
