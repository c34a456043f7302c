"""Informers: a cache kept in sync with the server, shared by every controller that needs it.

:class:`ClientListWatcher` adapts :class:`setpoint.client.Client` to the two calls the watcher
makes (a list page, a watch stream of ``{"type", "object"}`` dicts). An :class:`Informer` runs
:func:`~setpoint.runtime.listwatch.run_watcher` into a
:class:`~setpoint.runtime.informercache.Cache` (list, watch, relist on 410, reconnect with
backoff) for one resource in one namespace (or all).
:class:`SharedInformers` keeps **one informer per (resource, namespace, metadata-only)**, so
controllers watching the same kind share one cache and one watch, and starts them in a task
group its owner provides.

Metadata-only informers (``metadata_only=True``) hold ``PartialObjectMetadata`` objects:
``apiVersion``, ``kind`` (the watched resource's, not ``PartialObjectMetadata``, so keys and
owner matching work as for full objects) and ``metadata``. Lists ask the server for
``application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io`` and watches for
``application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io``, so pages and events carry
only metadata; every object is still reduced to its metadata as it arrives, in case a server
ignores the media type.

Invariants:

- An informer's task is owned by the task group given to :meth:`SharedInformers.start` (no
  task is created anywhere else); :meth:`SharedInformers.stop` cancels and awaits them all.
- ``wait_synced`` returns once the first complete list is in the cache; from then on the
  cache only moves forward (atomic swaps on relist).
- The informer never stops by itself on errors: failures are retried by the watcher driver
  with backoff. Only an exception from the cache itself (an index function that raises)
  ends it, and then its task group sees the exception.

Non-guarantees: a server that does not honour the metadata media types sends whole objects
(memory is still saved, bandwidth is not). Requests for an informer created after
:meth:`SharedInformers.start` start it at once, but nothing waits for it to sync unless
asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint import client as sp_client
from setpoint.client import api as client_api
from setpoint.client import watch as client_watch
from setpoint.runtime import clock as rtclock
from setpoint.runtime import deadlines, listwatch
from setpoint.runtime import informercache as rtcache

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]

#: the media type of a metadata-only list
PARTIAL_LIST_ACCEPT: Final = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
#: the media type of metadata-only watch events
PARTIAL_ACCEPT: Final = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


def _params(**values: str | int | bool | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None or value is False or value == "":
            continue
        out[key] = "true" if value is True else str(value)
    return out


class ClientListWatcher:
    """A :class:`~setpoint.runtime.listwatch.ListWatcher` over one resource of a client."""

    def __init__(self, client: sp_client.Client, resource: sp_client.ResourceRef, *,
                 namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, metadata_only: bool = False) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace if resource.namespaced else None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.metadata_only = metadata_only

    @property
    def _namespace_arg(self) -> str:
        return self.namespace or sp_client.ALL_NAMESPACES

    def _to_metadata(self, obj: Obj) -> dict[str, Any]:
        return {"apiVersion": self.resource.api_version, "kind": self.resource.kind,
                "metadata": obj.get("metadata") or {}}

    async def list(self, *, resource_version: str, limit: int,
                   continue_token: str | None) -> Obj:
        if not self.metadata_only:
            return await self.client.list(
                self.resource, namespace=self._namespace_arg,
                label_selector=self.label_selector, field_selector=self.field_selector,
                limit=limit, continue_=continue_token,
                resource_version=resource_version or None)
        return await self._list_metadata(resource_version, limit, continue_token)

    async def _list_metadata(self, resource_version: str, limit: int,
                             continue_token: str | None) -> Obj:
        path = self.resource.path(namespace=self.namespace)
        params = _params(labelSelector=self.label_selector, fieldSelector=self.field_selector,
                         limit=limit, resourceVersion=resource_version,
                         **{"continue": continue_token})
        page: dict[str, Any] = await self.client.request("GET", path, params=params,
                                                         accept=PARTIAL_LIST_ACCEPT)
        page["items"] = [self._to_metadata(item) for item in page.get("items") or ()]
        return page

    def watch(self, *, resource_version: str, timeout_seconds: int) -> WatchStream:
        watch = self.client.watch(
            self.resource, namespace=self._namespace_arg,
            label_selector=self.label_selector, field_selector=self.field_selector,
            resource_version=resource_version or None, timeout_seconds=timeout_seconds,
            accept=PARTIAL_ACCEPT if self.metadata_only else None)
        return WatchStream(watch, self._to_metadata if self.metadata_only else None)


class WatchStream:
    """A client :class:`~setpoint.client.watch.Watch` as the watcher's stream of
    ``{"type", "object"}`` dicts (objects reduced to their metadata by ``reduce``, bookmarks
    excepted); the request is sent on the first read. Implements the driver's
    :class:`~setpoint.runtime.listwatch.Buffered` (events already received are handed out
    without awaiting)."""

    def __init__(self, watch: sp_client.Watch,
                 reduce: Callable[[Obj], dict[str, Any]] | None = None) -> None:
        self._watch = watch
        self._reduce = reduce

    def _dict(self, event: client_watch.WatchEvent) -> dict[str, Any]:
        obj: Obj = event.object
        if self._reduce is not None and event.type != client_watch.BOOKMARK:
            obj = self._reduce(obj)
        return {"type": event.type, "object": obj}

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        return self._dict(await anext(self._watch))

    def next_nowait(self) -> dict[str, Any] | None:
        event = self._watch.next_nowait()
        return self._dict(event) if event is not None else None

    async def aclose(self) -> None:
        await self._watch.aclose()


@dataclass(frozen=True, slots=True)
class InformerKey:
    """What makes two informers the same: the resource, the namespace, the object form."""

    group: str
    version: str
    resource: str
    namespace: str | None
    metadata_only: bool = False

    @classmethod
    def of(cls, ref: sp_client.ResourceRef, namespace: str | None,
           metadata_only: bool) -> InformerKey:
        return cls(ref.group, ref.version, ref.resource,
                   namespace if ref.namespaced else None, metadata_only)

    def __str__(self) -> str:
        gv = f"{self.group}/{self.version}" if self.group else self.version
        where = f" in {self.namespace}" if self.namespace else ""
        form = " (metadata)" if self.metadata_only else ""
        return f"{self.resource}.{gv}{where}{form}"


class Informer:
    """One cache kept in sync by a list-then-watch loop."""

    def __init__(self, lw: listwatch.ListWatcher, *, clock: rtclock.AsyncClock,
                 config: listwatch.WatcherConfig | None = None,
                 rng: random.Random | None = None, cache: rtcache.Cache | None = None,
                 name: str = "informer") -> None:
        self.lw = lw
        self.cache = cache if cache is not None else rtcache.Cache()
        self.name = name
        self._clock = clock
        self._config = config
        self._rng = rng

    async def run(self) -> None:
        """Keep the cache in sync until cancelled."""
        logger.debug("starting informer %s", self.name)
        events = listwatch.run_watcher(self.lw, clock=self._clock, config=self._config,
                                       rng=self._rng)
        async with contextlib.aclosing(events):
            await self.cache.feed(events)

    @property
    def synced(self) -> bool:
        return self.cache.synced

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the first list is in the cache; False if ``timeout`` passed first."""
        try:
            await deadlines.wait_for(self.cache.wait_synced(), self._clock, timeout)
        except TimeoutError:
            return False
        return True


class SharedInformers:
    """One informer per (resource, namespace, form), started in the owner's task group."""

    def __init__(self, client: sp_client.Client, *, clock: rtclock.AsyncClock | None = None,
                 config: listwatch.WatcherConfig | None = None,
                 rng: random.Random | None = None) -> None:
        self.client = client
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._config = config
        self._rng = rng or random.Random()
        self._informers: dict[InformerKey, Informer] = {}
        self._tasks: dict[InformerKey, asyncio.Task[None]] = {}
        self._group: asyncio.TaskGroup | None = None

    def informer(self, ref: sp_client.ResourceRef, *, namespace: str | None = None,
                 metadata_only: bool = False) -> Informer:
        """The shared informer for ``ref`` (created, and started if running, on first use)."""
        key = InformerKey.of(ref, namespace, metadata_only)
        informer = self._informers.get(key)
        if informer is None:
            lw = ClientListWatcher(self.client, ref, namespace=key.namespace,
                                   metadata_only=metadata_only)
            informer = Informer(lw, clock=self._clock, config=self._config,
                                rng=random.Random(self._rng.random()), name=str(key))
            self._informers[key] = informer
            if self._group is not None:
                self._start(key, informer)
        return informer

    async def informer_for(self, resource: client_api.ResourceLike, *,
                           namespace: str | None = None,
                           metadata_only: bool = False) -> Informer:
        """:meth:`informer` for a resource named as the client accepts it (via discovery)."""
        ref = await self.client.resolve(resource)
        return self.informer(ref, namespace=namespace, metadata_only=metadata_only)

    def start(self, group: asyncio.TaskGroup) -> None:
        """Run every informer, now and later created, as a task of ``group``."""
        if self._group is not None:
            raise RuntimeError("the informers are already started")
        self._group = group
        for key, informer in self._informers.items():
            self._start(key, informer)

    def _start(self, key: InformerKey, informer: Informer) -> None:
        assert self._group is not None
        self._tasks[key] = self._group.create_task(informer.run(), name=f"informer {key}")

    async def discard(self, ref: sp_client.ResourceRef, *, namespace: str | None = None,
                      metadata_only: bool = False) -> None:
        """Stop and forget the informer for ``ref`` (e.g. its resource is no longer served);
        a later :meth:`informer` call makes a new one. Its cache's subscribers hear nothing
        more. Nothing happens when there is no such informer."""
        key = InformerKey.of(ref, namespace, metadata_only)
        self._informers.pop(key, None)
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
            await asyncio.wait({task})

    async def stop(self) -> None:
        """Cancel every informer and wait for them to end; they may be started again."""
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self._group = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    @property
    def synced(self) -> bool:
        return all(i.synced for i in self._informers.values())

    async def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until every informer has listed; False if ``timeout`` passed first."""
        try:
            async with deadlines.deadline(self._clock, timeout):
                for informer in list(self._informers.values()):
                    await informer.cache.wait_synced()
        except TimeoutError:
            return False
        return True

    def unsynced(self) -> list[str]:
        """The informers that have not listed yet (for error messages)."""
        return sorted(str(k) for k, i in self._informers.items() if not i.synced)

    def __iter__(self) -> Iterator[tuple[InformerKey, Informer]]:
        return iter(list(self._informers.items()))

    def __len__(self) -> int:
        return len(self._informers)
