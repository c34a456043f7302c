"""The ConfigMaps and Secrets the pods of a node refer to, each followed by a watch of that one
object, as the kubelet's default ``configMapAndSecretChangeDetectionStrategy: Watch``.

A pod's sync declares what it refers to (:meth:`WatchedObjects.use`, by pod uid); the first
user of an object starts a list and watch of it alone (``fieldSelector=metadata.name=NAME``
in its namespace, which the Node authorizer allows for objects its pods reference); the last
one to let go (:meth:`WatchedObjects.release`, or a later :meth:`use` without it) stops it.
:meth:`WatchedObjects.get` answers from that watch once it has listed, so a node whose
10,000 pods mount one ConfigMap reads it once and follows its changes, instead of asking the
server for it at every sync of every pod. Each change seen (an update, a creation, a
deletion, after the first list) is told to ``on_change`` with the uids of the pods using
the object, so the agent can sync them at once rather than at their next resync.

Bounds: at most ``max_objects`` objects watched; an object beyond that, one whose watch has
not listed within ``sync_timeout`` seconds (the server slow, or not yet aware of the pod
that makes the object readable), and any read before :meth:`run` started are read with a
plain GET, as without this cache. Non-guarantees: an answer from the watch may lag the
server by the watch's delay (the kubelet's has the same); an object absent from the server
is answered ``None`` (as a GET's NotFound).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]

#: the kinds followed, by the name :class:`ObjectRef` uses
KINDS: Final = {"ConfigMap": ("v1", "ConfigMap"), "Secret": ("v1", "Secret")}


@dataclass(frozen=True, slots=True, order=True)
class ObjectRef:
    kind: str  # "ConfigMap" or "Secret"
    namespace: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchedObjectsConfig:
    max_objects: int = 4096
    sync_timeout: float = 10.0

    def __post_init__(self) -> None:
        if self.max_objects < 0:
            raise ValueError("max_objects must be >= 0")
        if self.sync_timeout <= 0:
            raise ValueError("sync_timeout must be positive")


def _version(obj: Obj) -> Any:
    return (obj.get("metadata") or {}).get("resourceVersion")


class _Watch:
    def __init__(self, informer: runtime.Informer, task: asyncio.Task[None]) -> None:
        self.informer = informer
        self.task = task
        self.users: set[str] = set()


class WatchedObjects:
    """See the module docstring. ``run()`` until cancelled; ``use``/``release``/``get``
    from the agent's pod loop (one event loop)."""

    def __init__(self, client: sp_client.Client, *,
                 config: WatchedObjectsConfig | None = None,
                 clock: runtime.AsyncClock | None = None,
                 on_change: Callable[[Iterable[str]], None] | None = None) -> None:
        self.client = client
        self.config = config or WatchedObjectsConfig()
        self.clock: runtime.AsyncClock = clock or runtime.SystemAsyncClock()
        self.on_change = on_change
        self._watches: dict[ObjectRef, _Watch] = {}
        self._used: dict[str, frozenset[ObjectRef]] = {}
        self._refs: dict[str, sp_client.ResourceRef] = {}
        self._group: asyncio.TaskGroup | None = None

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        for kind, gvk in KINDS.items():
            self._refs[kind] = await self.client.resolve(gvk)
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                await asyncio.Event().wait()  # the watches run in the group until cancelled
        finally:
            self._group = None
            self._watches.clear()

    @property
    def running(self) -> bool:
        """Whether watches can be started (:meth:`run` is running)."""
        return self._group is not None

    @property
    def watched(self) -> frozenset[ObjectRef]:
        """The objects followed now (a test can read it)."""
        return frozenset(self._watches)

    # --- users ----------------------------------------------------------------------------

    def use(self, user: str, refs: Iterable[ObjectRef]) -> None:
        """``user`` (a pod uid) refers to ``refs`` now (and to nothing else)."""
        wanted = frozenset(r for r in refs if r.kind in KINDS)
        before = self._used.get(user, frozenset())
        if wanted:
            self._used[user] = wanted
        else:
            self._used.pop(user, None)
        for ref in before - wanted:
            self._let_go(user, ref)
        for ref in sorted(wanted):  # all of them: a watch not started before may start now
            watch = self._watches.get(ref) or self._start(ref)
            if watch is not None:
                watch.users.add(user)

    def release(self, user: str) -> None:
        """``user`` refers to nothing any more (its pod is gone)."""
        for ref in self._used.pop(user, frozenset()):
            self._let_go(user, ref)

    def _let_go(self, user: str, ref: ObjectRef) -> None:
        watch = self._watches.get(ref)
        if watch is None:
            return
        watch.users.discard(user)
        if not watch.users:
            del self._watches[ref]
            watch.task.cancel()

    def _start(self, ref: ObjectRef) -> _Watch | None:
        if self._group is None or len(self._watches) >= self.config.max_objects:
            return None
        resource = self._refs[ref.kind]
        lw = runtime.ClientListWatcher(self.client, resource, namespace=ref.namespace,
                                       field_selector=f"metadata.name={ref.name}")
        informer = runtime.Informer(lw, clock=self.clock,
                                    name=f"{ref.kind} {ref.namespace}/{ref.name}")
        informer.cache.subscribe(runtime.Handlers(
            add=lambda _: self._changed(ref),
            update=lambda old, new: self._changed(ref) if _version(old) != _version(new)
            else None,
            delete=lambda _: self._changed(ref)), replay=False)
        task = self._group.create_task(self._follow(informer, ref), name=str(informer.name))
        watch = _Watch(informer, task)
        self._watches[ref] = watch
        return watch

    async def _follow(self, informer: runtime.Informer, ref: ObjectRef) -> None:
        try:
            await informer.run()
        except Exception:
            log.exception("following %s %s/%s failed; it is read with GETs", ref.kind,
                          ref.namespace, ref.name)
        finally:
            watch = self._watches.get(ref)
            if watch is not None and watch.informer is informer:
                del self._watches[ref]

    def _changed(self, ref: ObjectRef) -> None:
        watch = self._watches.get(ref)
        if watch is None or not watch.informer.synced or self.on_change is None:
            return  # the first list is not a change: the users' syncs read it
        self.on_change(sorted(watch.users))

    # --- reading --------------------------------------------------------------------------

    async def get(self, ref: ObjectRef) -> Obj | None:
        """The object (``None`` if the server has none of that name)."""
        watch = self._watches.get(ref)
        if watch is not None and await watch.informer.wait_synced(self.config.sync_timeout) \
                and self._watches.get(ref) is watch:
            return watch.informer.cache.get(f"{ref.namespace}/{ref.name}")
        try:
            return await self.client.get(KINDS[ref.kind], ref.name, namespace=ref.namespace)
        except errors.NotFound:
            return None
