"""The garbage collector: cascading deletion through ``ownerReferences``, on the runtime.

A :class:`GarbageCollector` is a :class:`~setpoint.runtime.Runnable`: the manager runs it
while it leads, with the manager's client and shared informers. It talks to the server only
through the API, as Kubernetes' garbage collector does:

1. **Monitors.** From discovery, every resource that can be listed, watched and deleted
   (Events excepted) gets a metadata-only informer; its events feed the
   :class:`~setpoint.controllers.graph.Graph`. Discovery is read again every
   ``resync_interval`` seconds and at once whenever a CustomResourceDefinition changes, so the
   kinds of CRDs created later are watched within moments; kinds that disappear are dropped.
   Events are not applied in the informers' handlers: they are queued (with the collector's
   own virtual deletes, in one order, as Kubernetes' ``graphChanges``) and applied by one task
   ``CHANGE_BATCH`` at a time; the work queues they fill are fed ``QUEUE_BATCH`` keys at a
   time. The task yields to the event loop between batches, so a burst of events or an
   owner with a huge number of dependents never holds the loop for long.
2. **attempt to delete** (``workers`` at a time), for a node the graph queued:

   - a node that does not exist (any more) is removed from the graph ("virtual delete"): its
     dependents are queued in turn; a node whose kind is namespaced but that has no namespace
     (only a cluster-scoped dependent names it so) cannot exist and is left alone, as
     Kubernetes does;
   - a node being deleted in the foreground waits for its dependents with
     ``blockOwnerDeletion``; once none is left its ``foregroundDeletion`` finalizer is removed
     (and the server deletes it);
   - otherwise its owner references are classified: *solid* (the owner exists), *dangling*
     (it does not, or has another UID, or is a namespaced owner in another namespace) and
     *waiting* (the owner is being deleted in the foreground). With a solid owner, dangling
     and waiting references are removed from the object; with none, the object is deleted:
     in the foreground when an owner waits and the object has dependents itself, else with
     the propagation its own finalizers ask for (``orphan``, ``foregroundDeletion``) or in
     the background.
3. **attempt to orphan**, for an owner deleted with the ``orphan`` finalizer: its reference is
   removed from every dependent, then the finalizer (and the server deletes the owner).

Invariants:

- Every write carries preconditions: deletes the object's UID and the resourceVersion the
  decision was made on, patches the resourceVersion. A conflict means the decision was made on
  stale data: the item is retried (rate limited) with a fresh read from the API.
- The graph is changed only by the informers' handlers and by virtual deletes, in the event
  loop, synchronously; workers never hold it across an ``await`` in a way that matters: they
  re-check what they act on.
- All state that matters lives in the API (finalizers, owner references, deletion
  timestamps): after a restart the graph is rebuilt from the informers' lists, and deletions
  in progress carry on.
- Stopping cancels the workers (any request in flight may or may not have been applied; each
  is idempotent), the monitor loop and the event recorder; the informers are the manager's.
- Every worker yields to the event loop after each item (see
  :class:`~setpoint.runtime.Engine`), and every retry of one object is rate limited (per UID,
  exponential up to ``max_backoff``): a malformed graph costs a bounded amount of work per
  object and never a tight loop.

Malformed owner graphs are handled as Kubernetes handles them: a self-reference makes the
object its own (solid) owner; a dependent naming an owner UID with other coordinates than
the owner's (kind, name, or namespace for a namespaced owner) treats that reference as
dangling (verified by a GET of the coordinates it names); a namespaced dependent naming an
owner in another namespace gets an ``OwnerRefInvalidNamespace`` Warning event, and the
reference is dangling; a cluster-scoped object that names a namespaced kind gets that event and
is left alone (its reference can never be resolved). Cycles: an object whose owner waits for
it in the foreground, and one of whose own dependents is being deleted in the foreground too,
has its blocking references unblocked before it is deleted in the foreground (Kubernetes'
rule); beyond Kubernetes, owners that are *all* being deleted in the foreground and wait for
each other (Kubernetes leaves them waiting forever) are freed by unblocking the reference that
closes the cycle (found with :meth:`graph.Graph.waiting_for`, within a bounded search); an object
that names itself never waits for itself.

Non-guarantees: a reference to a kind the server does not serve keeps its object (and is
retried with backoff, up to ``max_backoff`` seconds apart), as in Kubernetes. Deletions are as
fast as the API allows, not ordered across unrelated objects. The queue of graph changes is
not bounded by a number (it holds at most what the informers delivered and the task has not
applied yet, which it applies in order).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Final, Protocol

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.client.api import PropagationPolicy
from setpoint.controllers import graph as g

Obj = Mapping[str, Any]

#: Kubernetes' defaults: 20 concurrent deletions, discovery every 30 s
DEFAULT_WORKERS: Final = 20
DEFAULT_ORPHAN_WORKERS: Final = 5
DEFAULT_RESYNC_INTERVAL: Final = 30.0
DEFAULT_SYNC_TIMEOUT: Final = 30.0
DEFAULT_MAX_BACKOFF: Final = 300.0

#: (group, resource) never watched: Events are neither owners nor worth collecting
IGNORED_RESOURCES: Final = frozenset({("", "events"), ("events.k8s.io", "events")})
DELETABLE_VERBS: Final = frozenset({"list", "watch", "delete"})
CRD_RESOURCE: Final = ("apiextensions.k8s.io", "customresourcedefinitions")

#: attempts of one read-modify-write (a finalizer, an owner reference) before giving up
MAX_WRITE_ATTEMPTS: Final = 8
#: concurrent patches while orphaning the dependents of one owner
ORPHAN_CONCURRENCY: Final = 16
#: graph changes applied, and keys fed to the work queues, between two yields to the loop
CHANGE_BATCH: Final = 256
QUEUE_BATCH: Final = 1024
#: references classified, or dependents scanned, between two yields to the loop
SCAN_BATCH: Final = 1024

SOLID, DANGLING, WAITING = "solid", "dangling", "waiting"


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class InvalidReferenceError(Exception):
    """A cluster-scoped object names a namespaced owner: retrying cannot fix it."""


Change = Callable[[], None]


class _GraphFeed:
    """A cache event handler that queues one resource's events as graph changes."""

    def __init__(self, graph: g.Graph, ref: sp_client.ResourceRef,
                 submit: Callable[[Change], None]) -> None:
        self._graph = graph
        self._api_version = ref.api_version
        self._kind = ref.kind
        self._submit = submit

    def on_add(self, obj: Obj) -> None:
        self._submit(lambda: self._graph.observe(self._api_version, self._kind, None, obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        self._submit(lambda: self._graph.observe(self._api_version, self._kind, old, new))

    def on_delete(self, obj: Obj) -> None:
        self._submit(lambda: self._graph.observe_delete(self._api_version, self._kind, obj))


class _Monitor:
    def __init__(self, ref: sp_client.ResourceRef, informer: runtime.Informer,
                 subscriptions: list[_Cancellable]) -> None:
        self.ref = ref
        self.informer = informer
        self.subscriptions = subscriptions


def _same_resource(a: sp_client.ResourceRef, b: sp_client.ResourceRef) -> bool:
    return (a.group, a.version, a.resource, a.kind, a.namespaced) == (
        b.group, b.version, b.resource, b.kind, b.namespaced)


class GarbageCollector:
    """The garbage collector as a runnable; see the module docstring."""

    name = "garbagecollector"

    def __init__(self, *, workers: int = DEFAULT_WORKERS,
                 orphan_workers: int = DEFAULT_ORPHAN_WORKERS,
                 resync_interval: float = DEFAULT_RESYNC_INTERVAL,
                 sync_timeout: float = DEFAULT_SYNC_TIMEOUT,
                 max_backoff: float = DEFAULT_MAX_BACKOFF,
                 ignored: frozenset[tuple[str, str]] = IGNORED_RESOURCES) -> None:
        if resync_interval <= 0 or sync_timeout <= 0 or max_backoff <= 0:
            raise ValueError("intervals and timeouts must be positive")
        self.workers = workers
        self.orphan_workers = orphan_workers
        self.resync_interval = resync_interval
        self.sync_timeout = sync_timeout
        self.max_backoff = max_backoff
        self.ignored = ignored
        #: the collector of the current run (None when not running): for tests and metrics
        self.current: Collector | None = None

    async def run(self, ctx: runtime.RunnableContext) -> None:
        collector = Collector(self, ctx)
        self.current = collector
        try:
            await collector.run()
        finally:
            self.current = None


class Collector:
    """One run of the garbage collector: its graph, monitors and work queues."""

    def __init__(self, config: GarbageCollector, ctx: runtime.RunnableContext) -> None:
        self.config = config
        self.ctx = ctx
        self.client = ctx.client
        self.log: logging.Logger = ctx.logger
        self.graph = g.Graph(attempt_to_delete=self._queue_delete,
                             attempt_to_orphan=self._queue_orphan,
                             retry_delete=self._retry_delete,
                             invalid_owner=self._invalid_owner)
        self.deleter = runtime.Engine(
            f"{config.name}-delete", runtime.FuncReconciler(self._attempt_to_delete),
            workers=config.workers, clock=ctx.clock,
            rate_limiter=runtime.ItemExponentialBackoff(0.005, config.max_backoff),
            metrics=ctx.metrics, logger=self.log)
        self.orphaner = runtime.Engine(
            f"{config.name}-orphan", runtime.FuncReconciler(self._attempt_to_orphan),
            workers=config.orphan_workers, clock=ctx.clock,
            rate_limiter=runtime.ItemExponentialBackoff(0.005, config.max_backoff),
            metrics=ctx.metrics, logger=self.log)
        self.monitors: dict[tuple[str, str], _Monitor] = {}
        self.resync = asyncio.Event()
        self.synced = asyncio.Event()
        self._events: asyncio.Queue[tuple[g.Identity, Obj]] = asyncio.Queue(maxsize=1024)
        self._events_dropped = 0
        #: UIDs whose next attempt reads the object from the API, not the informer
        self._live: set[str] = set()
        self._tasks: list[asyncio.Task[None]] = []
        #: graph changes not applied yet, in order (informer events and virtual deletes)
        self._changes: deque[Change] = deque()
        #: keys the graph asked for, not handed to the work queues yet
        self._pending: deque[Callable[[], None]] = deque()
        self._wake = asyncio.Event()
        #: set while nothing is waiting to be applied or queued
        self.settled = asyncio.Event()

    # --- running ----------------------------------------------------------------------

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                changes = group.create_task(self._apply_changes(), name="gc graph changes")
                main = group.create_task(self._main(group), name="garbagecollector main")
                await self.ctx.stopping.wait()
                for task in [changes, main, *self._tasks]:
                    task.cancel()
        finally:
            for monitor in self.monitors.values():
                for subscription in monitor.subscriptions:
                    subscription.cancel()
            self.deleter.shut_down()
            self.orphaner.shut_down()

    async def _main(self, group: asyncio.TaskGroup) -> None:
        while True:
            try:
                await self.sync_monitors()
                break
            except (errors.ApiError, OSError) as e:
                self.log.warning("discovery failed (retrying): %s", e)
                if await self.ctx.wait(1.0):
                    return
        self._tasks.append(group.create_task(self._monitor_loop(), name="gc monitors"))
        self._tasks.append(group.create_task(self._record_events(), name="gc events"))
        await self._wait_synced()
        self.synced.set()
        self.log.info("garbage collector: %d resources monitored, %d objects in the graph",
                      len(self.monitors), len(self.graph))
        self._tasks.append(group.create_task(self.deleter.run(), name="gc delete workers"))
        self._tasks.append(group.create_task(self.orphaner.run(), name="gc orphan workers"))

    async def _wait_synced(self) -> None:
        started = self.ctx.clock.monotonic()
        for key, monitor in list(self.monitors.items()):
            left = self.config.sync_timeout - (self.ctx.clock.monotonic() - started)
            if not await monitor.informer.wait_synced(max(left, 0.001)):
                self.log.warning("garbage collector: %s did not sync within %gs; starting "
                                 "anyway", "/".join(key), self.config.sync_timeout)
                return

    async def _monitor_loop(self) -> None:
        while not await self.ctx.wait(self.config.resync_interval, event=self.resync):
            self.resync.clear()
            try:
                await self.sync_monitors()
            except (errors.ApiError, OSError) as e:
                self.log.warning("garbage collector: discovery failed: %s", e)

    def deletable(self, ref: sp_client.ResourceRef) -> bool:
        return ref.verbs >= DELETABLE_VERBS and (ref.group, ref.resource) not in \
            self.config.ignored

    async def sync_monitors(self) -> None:
        """Watch every deletable resource discovery lists now; drop the ones it does not."""
        await self.client.discovery.refresh()
        wanted = {(ref.group, ref.resource): ref
                  for ref in await self.client.discovery.all() if self.deletable(ref)}
        for key, monitor in list(self.monitors.items()):
            ref = wanted.get(key)
            if ref is None or not _same_resource(ref, monitor.ref):
                for subscription in monitor.subscriptions:
                    subscription.cancel()
                del self.monitors[key]
                await self.ctx.informers.discard(monitor.ref, metadata_only=True)
                self.log.info("garbage collector: stopped watching %s", "/".join(key))
        for key, ref in wanted.items():
            if key in self.monitors:
                continue
            informer = self.ctx.informers.informer(ref, metadata_only=True)
            subscriptions: list[_Cancellable] = [
                informer.cache.subscribe(_GraphFeed(self.graph, ref, self.submit))]
            if key == CRD_RESOURCE:
                def changed(*_objs: Obj) -> None:
                    self.resync.set()
                subscriptions.append(informer.cache.subscribe(
                    runtime.Handlers(add=changed, update=changed, delete=changed),
                    replay=False))
            self.monitors[key] = _Monitor(ref, informer, subscriptions)

    @property
    def idle(self) -> bool:
        """Every change applied and no key ready or being worked on (keys waiting for a
        backoff may remain): what the collector has seen, it has finished with for now."""
        return (self.settled.is_set() and self.synced.is_set()
                and not any(len(e.queue) or e.queue.processing
                            for e in (self.deleter, self.orphaner)))

    # --- graph changes ----------------------------------------------------------------

    def submit(self, change: Change) -> None:
        """Queue a change of the graph; :meth:`_apply_changes` applies it in order."""
        self._changes.append(change)
        self.settled.clear()
        self._wake.set()

    def _virtual_delete(self, identity: g.Identity) -> None:
        self.submit(lambda: self.graph.virtual_delete(identity))

    async def _apply_changes(self) -> None:
        """Apply queued changes and feed the work queues, a batch at a time."""
        changes, pending = self._changes, self._pending
        while True:
            if not changes and not pending:
                self.settled.set()
                await self._wake.wait()
                self._wake.clear()
                continue
            for _ in range(min(CHANGE_BATCH, len(changes))):
                change = changes.popleft()
                try:
                    change()
                except Exception:  # a bug here must not stop the collector
                    self.log.exception("garbage collector: applying a graph change failed")
            for _ in range(min(QUEUE_BATCH, len(pending))):
                pending.popleft()()
            await asyncio.sleep(0)

    # --- queueing ---------------------------------------------------------------------

    def _later(self, action: Callable[[], None]) -> None:
        self._pending.append(action)
        self.settled.clear()
        self._wake.set()

    def _queue_delete(self, node: g.Node) -> None:
        request = runtime.Request("", node.uid)
        self._later(lambda: self.deleter.enqueue(request))

    def _retry_delete(self, node: g.Node) -> None:
        request = runtime.Request("", node.uid)
        self._later(lambda: self.deleter.queue.add_rate_limited(request))

    def _queue_orphan(self, node: g.Node) -> None:
        request = runtime.Request("", node.uid)
        self._later(lambda: self.orphaner.enqueue(request))

    def _invalid_owner(self, node: g.Node, ref: Obj) -> None:
        try:
            self._events.put_nowait((node.identity, ref))
        except asyncio.QueueFull:
            if not self._events_dropped:
                self.log.warning("garbage collector: too many OwnerRefInvalidNamespace events "
                                 "waiting; dropping some (first: %s)", node.identity)
            self._events_dropped += 1
        else:
            self._events_dropped = 0

    async def _record_events(self) -> None:
        while True:
            identity, ref = await self._events.get()
            owner = g.owner_identity(ref, identity.namespace)
            involved = {"apiVersion": identity.api_version, "kind": identity.kind,
                        "metadata": {"name": identity.name, "namespace": identity.namespace,
                                     "uid": identity.uid}}
            await self.ctx.recorder.warning(
                involved, "OwnerRefInvalidNamespace",
                f'ownerRef {owner} does not exist in namespace "{identity.namespace}"')

    # --- reading ----------------------------------------------------------------------

    async def _resource(self, api_version: str, kind: str) -> sp_client.ResourceRef:
        try:
            return await self.client.resolve((api_version, kind))
        except ValueError as e:  # a malformed apiVersion: never served
            raise sp_client.NoMatchError(str(e)) from e

    def _namespace(self, ref: sp_client.ResourceRef, identity: g.Identity) -> str | None:
        return identity.namespace if ref.namespaced else None

    async def _get(self, identity: g.Identity) -> Obj | None:
        """The object from the API, or None when it does not exist.

        :class:`InvalidReferenceError` for a namespaced kind without a namespace: only a
        cluster-scoped dependent names an owner so, and whether it exists cannot be known.
        """
        ref = await self._resource(identity.api_version, identity.kind)
        if ref.namespaced and not identity.namespace:
            raise InvalidReferenceError(f"{identity}: a namespaced kind without a namespace")
        try:
            return await self.client.get(ref, identity.name,
                                         namespace=self._namespace(ref, identity))
        except errors.NotFound:
            return None

    async def _latest(self, node: g.Node) -> Obj | None:
        """The node's object: the informer's copy, or the API's after a conflict or for a
        virtual node."""
        if node.observed and node.obj is not None and node.uid not in self._live:
            return node.obj
        self._live.discard(node.uid)
        return await self._get(node.identity)

    # --- attempt to delete ------------------------------------------------------------

    async def _attempt_to_delete(self, request: runtime.Request) -> runtime.Result:
        node = self.graph.get(request.name)
        if node is None:
            return runtime.Result.done()
        try:
            await self._attempt(node)
        except errors.Conflict:
            self._live.add(node.uid)
            return runtime.Result(requeue=True)
        except sp_client.NoMatchError as e:
            self.log.info("garbage collector: %s: %s (retrying)", node.identity, e)
            return runtime.Result(requeue=True)
        except InvalidReferenceError:
            return runtime.Result.done()
        if not node.observed and node.uid in self.graph:
            return runtime.Result(requeue=True)  # until an informer has seen it
        return runtime.Result.done()

    async def _attempt(self, node: g.Node) -> None:
        if node.being_deleted and not node.deleting_dependents:
            return  # on its way; its dependents are looked at when it is gone
        # what was looked up: a virtual node may take another identity meanwhile (observed,
        # or replaced by a virtual delete), and only this one was verified absent
        identity = node.identity
        latest = await self._latest(node)
        if latest is None or g.metadata(latest).get("uid") != node.uid:
            self._virtual_delete(identity)
            return
        if node.deleting_dependents:
            await self._deleting_dependents(node)
            return
        refs = g.owner_references(latest)
        if not refs:
            return
        solid, dangling, waiting = await self._classify(node, refs)
        if solid:
            if dangling or waiting:
                # the references themselves, not every reference to their UIDs: a solid
                # reference may share its UID with a dangling one of other coordinates
                remove = {id(r) for r in (*dangling, *waiting)}
                await self._patch_owner_references(
                    node, latest, [r for r in refs if id(r) not in remove])
            return
        if waiting and node.dependents:
            if any(dep.deleting_dependents for dep in node.dependents):
                # an owner and a dependent both wait: unblock to avoid a cycle
                await self._patch_owner_references(
                    node, latest, [{**r, "blockOwnerDeletion": False} if g.is_blocking(r)
                                   else r for r in refs])
                self._live.add(node.uid)
                identity = node.identity
                latest = await self._latest(node)
                if latest is None:
                    self._virtual_delete(identity)
                    return
            await self._delete(node, latest, "Foreground")
            return
        own = g.finalizers(latest)
        policy: PropagationPolicy = (
            "Orphan" if g.ORPHAN in own else "Foreground" if g.FOREGROUND in own
            else "Background")
        await self._delete(node, latest, policy)

    async def _classify(self, node: g.Node, refs: list[Obj]
                        ) -> tuple[list[Obj], list[Obj], list[Obj]]:
        solid: list[Obj] = []
        dangling: list[Obj] = []
        waiting: list[Obj] = []
        for i, ref in enumerate(refs, 1):
            if i % SCAN_BATCH == 0:
                await asyncio.sleep(0)  # most owners are answered from the graph, at once
            state = await self._owner_state(node, ref)
            {SOLID: solid, DANGLING: dangling, WAITING: waiting}[state].append(ref)
        return solid, dangling, waiting

    @staticmethod
    def _state_of(owner: Obj) -> str:
        if g.being_deleted(owner) and g.FOREGROUND in g.finalizers(owner):
            return WAITING
        return SOLID

    async def _owner_state(self, item: g.Node, ref: Obj) -> str:
        in_namespace = g.owner_identity(ref, item.identity.namespace)
        cluster_wide = replace(in_namespace, namespace="")
        absent = self.graph.absent
        if cluster_wide in absent or in_namespace in absent:
            return DANGLING
        owner = self.graph.get(str(ref.get("uid")))
        if owner is not None and owner.observed and owner.obj is not None \
                and g.reference_matches(ref, owner.identity) \
                and owner.identity.namespace in ("", item.identity.namespace):
            return self._state_of(owner.obj)
        resource = await self._resource(str(ref.get("apiVersion")), str(ref.get("kind")))
        if resource.namespaced and not item.identity.namespace:
            self._invalid_owner(item, ref)
            raise InvalidReferenceError(f"{item.identity} names a namespaced owner")
        key = in_namespace if resource.namespaced else cluster_wide
        try:
            found = await self.client.get(resource, key.name,
                                          namespace=key.namespace or None)
        except errors.NotFound:
            absent.add(key)
            return DANGLING
        if g.metadata(found).get("uid") != key.uid:
            absent.add(key)
            return DANGLING
        return self._state_of(found)

    async def _delete(self, node: g.Node, latest: Obj, policy: PropagationPolicy
                      ) -> None:
        identity = node.identity
        ref = await self._resource(identity.api_version, identity.kind)
        rv = g.metadata(latest).get("resourceVersion")
        try:
            await self.client.delete(ref, identity.name, namespace=self._namespace(ref, identity),
                                     propagation_policy=policy, uid=identity.uid,
                                     resource_version=str(rv) if rv else None)
        except errors.NotFound:
            self._virtual_delete(identity)

    async def _patch_owner_references(self, node: g.Node, latest: Obj,
                                      refs: list[Obj]) -> None:
        identity = node.identity
        ref = await self._resource(identity.api_version, identity.kind)
        meta: dict[str, Any] = {"ownerReferences": [dict(r) for r in refs] or None}
        rv = g.metadata(latest).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
        try:
            await self.client.patch(ref, identity.name, {"metadata": meta},
                                    namespace=self._namespace(ref, identity))
        except errors.NotFound:
            self._virtual_delete(identity)

    async def _blocking_dependents(self, node: g.Node) -> list[g.Node]:
        """:meth:`graph.Node.blocking_dependents`, yielding to the loop every
        ``SCAN_BATCH`` dependents (an owner may have a great many)."""
        dependents = list(node.dependents)
        found: list[g.Node] = []
        for start in range(0, len(dependents), SCAN_BATCH):
            if start:
                await asyncio.sleep(0)
            found.extend(dep for dep in dependents[start:start + SCAN_BATCH]
                         if g.blocks(dep, node))
        return found

    async def _deleting_dependents(self, node: g.Node) -> None:
        blocking = await self._blocking_dependents(node)
        if not blocking:
            await self._remove_finalizer(node.identity, g.FOREGROUND)
            return
        waiting: set[g.Node] | None = None
        for dep in blocking:
            if not dep.deleting_dependents:
                self._queue_delete(dep)
                continue
            if waiting is None:  # one bounded search per attempt, however many dependents
                waiting = self.graph.waiting_for(node)
            if dep in waiting:
                # both deleted in the foreground, each waiting for the other: neither would
                # ever finish. The dependent stops blocking this owner (its own deletion
                # still waits for its blocking dependents).
                await self._unblock(dep, node.uid)

    async def _unblock(self, dep: g.Node, owner_uid: str) -> None:
        """Set ``blockOwnerDeletion: false`` on ``dep``'s references to ``owner_uid``."""
        self._live.add(dep.uid)
        latest = await self._latest(dep)
        if latest is None or g.metadata(latest).get("uid") != dep.uid:
            return
        refs = g.owner_references(latest)
        if not any(r.get("uid") == owner_uid and g.is_blocking(r) for r in refs):
            return
        self.log.info("garbage collector: %s and its owner %s wait for each other in the "
                      "foreground; unblocking the reference", dep.identity, owner_uid)
        await self._patch_owner_references(dep, latest, [
            {**r, "blockOwnerDeletion": False} if r.get("uid") == owner_uid else r
            for r in refs])

    async def _remove_finalizer(self, identity: g.Identity, finalizer: str) -> None:
        """Remove ``finalizer`` from the live object (re-read on every conflict)."""
        ref = await self._resource(identity.api_version, identity.kind)
        for _ in range(MAX_WRITE_ATTEMPTS):
            obj = await self._get(identity)
            if obj is None or g.metadata(obj).get("uid") != identity.uid:
                return
            current = g.finalizers(obj)
            if finalizer not in current:
                return
            body = {"metadata": {"finalizers": [f for f in current if f != finalizer],
                                 "resourceVersion": g.metadata(obj).get("resourceVersion")}}
            try:
                await self.client.patch(ref, identity.name, body,
                                        namespace=self._namespace(ref, identity))
                return
            except errors.Conflict:
                continue
            except errors.NotFound:
                return
        raise errors.Conflict(f"could not remove the {finalizer} finalizer from {identity}")

    # --- attempt to orphan ------------------------------------------------------------

    async def _attempt_to_orphan(self, request: runtime.Request) -> runtime.Result:
        node = self.graph.get(request.name)
        if node is None:
            return runtime.Result.done()
        failures: list[Exception] = []
        dependents = list(node.dependents)
        # one iterator shared by a bounded number of workers: each dependent is taken once
        todo: Iterator[g.Node] = iter(dependents)

        async def orphan() -> None:
            for dep in todo:
                try:
                    await self._orphan_one(dep, node.identity)
                except (errors.Conflict, sp_client.NoMatchError) as e:
                    failures.append(e)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(ORPHAN_CONCURRENCY, len(dependents))):
                group.create_task(orphan())
        if not failures:
            try:
                await self._remove_finalizer(node.identity, g.ORPHAN)
            except (errors.Conflict, sp_client.NoMatchError) as e:
                failures.append(e)
        if failures:
            self.log.info("garbage collector: orphaning the dependents of %s: %s (retrying)",
                          node.identity, failures[0])
            return runtime.Result(requeue=True)
        return runtime.Result.done()

    async def _orphan_one(self, dep: g.Node, owner: g.Identity) -> None:
        identity = dep.identity
        ref = await self._resource(identity.api_version, identity.kind)
        cached = dep.obj if dep.observed else None
        for _ in range(MAX_WRITE_ATTEMPTS):
            obj = cached if cached is not None else await self._get(identity)
            cached = None
            if obj is None or g.metadata(obj).get("uid") != identity.uid:
                return
            refs = list(g.metadata(obj).get("ownerReferences") or [])
            kept = [r for r in refs if not (isinstance(r, Mapping) and r.get("uid") == owner.uid)]
            if len(kept) == len(refs):
                return
            body = {"metadata": {"ownerReferences": [dict(r) for r in kept] or None,
                                 "resourceVersion": g.metadata(obj).get("resourceVersion")}}
            try:
                await self.client.patch(ref, identity.name, body,
                                        namespace=self._namespace(ref, identity))
                return
            except errors.Conflict:
                continue
            except errors.NotFound:
                return
        raise errors.Conflict(f"could not orphan {identity}")
