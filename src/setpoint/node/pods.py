"""The agent's pod loop: the pods bound to this node, run by a :class:`PodRuntime`.

It watches the pods whose ``spec.nodeName`` is this node (an informer with that field
selector, as the kubelet does), and for each:

* **runs it**: fetches what it refers to (ConfigMaps and Secrets from a watch of each one,
  :mod:`setpoint.node.objects`; ServiceAccount tokens through
  ``serviceaccounts/<name>/token`` bound to the pod), adds the service environment variables
  (``service_env(namespace, enableServiceLinks)``, from the Services known at that moment) and
  calls the runtime's ``sync_pod``; a pod is synced again as soon as a ConfigMap or Secret
  it uses changes, and pods that refer to other objects every ``resync`` seconds too, so
  updated ConfigMaps and Secrets reach their volumes and tokens are renewed;
* **reports it**: every status change the runtime signals is written to ``pods/<name>/status``
  (PUT with the resourceVersion of the newer of the watched pod and the server's answer to
  the previous write, so that two writes in a row do not conflict with each other; on a
  conflict the pod is read again and the write retried), keeping the conditions and fields
  the agent does not own (a scheduler's ``PodScheduled``, readiness gates' conditions,
  ``nominatedNodeName``);
* **records Events** the runtime reports (``Started``, ``Killing``, ``BackOff``, ``Failed``,
  ...), with the container's ``fieldPath`` and ``source.host``; repeats of one Event within
  10 minutes bump its ``count``;
* **completes graceful deletion**: once the pod has a ``deletionTimestamp``, its containers
  are stopped within ``deletionGracePeriodSeconds`` (``preStop``, SIGTERM, SIGKILL of every
  process), the final status is written, then the pod is deleted with
  ``gracePeriodSeconds: 0`` and a ``uid`` precondition (so a new pod of the same name is never
  deleted instead), and the runtime forgets it.

When the informer has first synced, pods the runtime holds (adopted from a previous agent on
the same directory) that the API no longer has are removed: their processes killed, their
files deleted. A pod that disappears from the API without a graceful deletion (a force
delete) is removed the same way.

Bounds: ``workers`` pods synced at once, ``status_workers`` status writes at once, at most
``events_queue`` Events waiting (the oldest dropped beyond), the Event series table
``max_series`` entries. Failures to write are retried with the work queue's backoff; they
never stop the loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.agent import PodEvent, PodRuntime, references, resolve_inputs
from setpoint.agent.status import KUBELET_CONDITIONS
from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.clock import Clock, SystemClock
from setpoint.node.objects import ObjectRef, WatchedObjects, WatchedObjectsConfig
from setpoint.node.tokens import TokenCache, TokenKey
from setpoint.runtime import clock as rtclock

log = logging.getLogger(__name__)

Obj = dict[str, Any]

#: the status fields the agent writes (anything else in a pod's status is kept)
OWNED_STATUS: Final = frozenset({
    "phase", "conditions", "reason", "message", "hostIP", "hostIPs", "podIP", "podIPs",
    "startTime", "initContainerStatuses", "containerStatuses", "qosClass"})
TERMINAL: Final = ("Succeeded", "Failed")
MAX_CONFLICT_RETRIES: Final = 5
EVENT_SERIES_WINDOW: Final = 600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PodLoopConfig:
    node_name: str
    workers: int = 8
    status_workers: int = 16
    resync: float = 60.0
    events_queue: int = 1000
    max_series: int = 4096
    #: seconds of token validity asked for projected ServiceAccount tokens without one
    token_seconds: int = 3600
    #: ConfigMaps and Secrets followed by a watch each (beyond: read with a GET per sync)
    watched_objects: int = 4096

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ValueError("node_name is required")
        if min(self.workers, self.status_workers, self.events_queue, self.max_series) < 1:
            raise ValueError("workers, status_workers, events_queue, max_series must be >= 1")
        if self.resync <= 0:
            raise ValueError("resync must be positive")
        if self.watched_objects < 0:
            raise ValueError("watched_objects must be >= 0")


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _uid(pod: Mapping[str, Any] | None) -> str:
    return str(((pod or {}).get("metadata") or {}).get("uid") or "")


def _sync_relevant(pod: Mapping[str, Any]) -> tuple[Any, ...]:
    """What a change must touch to need a sync (status writes are the agent's own)."""
    meta = pod.get("metadata") or {}
    return (meta.get("uid"), meta.get("deletionTimestamp"), meta.get("labels"),
            meta.get("annotations"), pod.get("spec"))


def _version(pod: Mapping[str, Any]) -> int:
    rv = str((pod.get("metadata") or {}).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() and len(rv) <= 20 else -1


def merge_status(current: Mapping[str, Any] | None, reported: Mapping[str, Any]) -> Obj:
    """The status to write: the runtime's, with what others own kept from ``current``."""
    current = current or {}
    merged: Obj = {k: v for k, v in current.items() if k not in OWNED_STATUS}
    merged.update(reported)
    ours = {c.get("type") for c in reported.get("conditions") or []}
    before = {c.get("type"): c for c in current.get("conditions") or []}
    foreign = [c for t, c in before.items() if t not in ours and t not in KUBELET_CONDITIONS]
    # the scheduler's PodScheduled (its transition time) is kept once it is True
    mine = [before["PodScheduled"] if c.get("type") == "PodScheduled"
            and (before.get("PodScheduled") or {}).get("status") == "True" else c
            for c in reported.get("conditions") or []]
    merged["conditions"] = [*foreign, *mine]
    return merged


class PodLoop:
    """See the module docstring. ``run()`` until cancelled."""

    def __init__(self, client: sp_client.Client, pods: PodRuntime, config: PodLoopConfig, *,
                 clock: runtime.AsyncClock | None = None, wall: Clock | None = None,
                 service_env: Callable[[str, bool], Mapping[str, str]] | None = None) -> None:
        self.client = client
        self.service_env = service_env
        self.runtime = pods
        self.config = config
        self.clock: runtime.AsyncClock = clock or runtime.SystemAsyncClock()
        self.wall = wall or SystemClock()
        self.queue: runtime.WorkQueue[str] = runtime.WorkQueue(clock=self.clock)
        self.status_queue: runtime.WorkQueue[str] = runtime.WorkQueue(clock=self.clock)
        self.informer: runtime.Informer | None = None
        #: uid -> key of every pod handed to the runtime (adopted ones once synced)
        self.uids: dict[str, str] = {}
        #: the same, key -> uids (a pod being stopped and its successor of the same name)
        self._uids_of: dict[str, set[str]] = {}
        #: uid -> the server's answer to our last status write, until the cache shows it
        self._answered: dict[str, Mapping[str, Any]] = {}
        self._status_locks: dict[str, asyncio.Lock] = {}
        #: projected tokens, asked for again only at 80 % of their validity
        self.tokens = TokenCache(self.clock.monotonic)
        #: the ConfigMaps and Secrets the pods use, each followed by a watch
        self.objects = WatchedObjects(
            client, clock=self.clock, on_change=self._objects_changed,
            config=WatchedObjectsConfig(max_objects=config.watched_objects))
        self._terminating: dict[str, asyncio.Task[None]] = {}
        self._events: collections.deque[PodEvent] = collections.deque(
            maxlen=config.events_queue)
        self._events_ready = asyncio.Event()
        self._series: collections.OrderedDict[tuple[str, ...], tuple[str, str, int, float]] = \
            collections.OrderedDict()
        self._group: asyncio.TaskGroup | None = None
        self.synced = asyncio.Event()
        self._pods_ref: sp_client.ResourceRef | None = None

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        ref = await self.client.resolve(("v1", "Pod"))
        self._pods_ref = ref
        lw = runtime.ClientListWatcher(self.client, ref,
                                       field_selector=f"spec.nodeName={self.config.node_name}")
        informer = runtime.Informer(lw, clock=self.clock, name="node pods")
        self.informer = informer
        informer.cache.add_indexer("uid", lambda obj: (_uid(obj),))
        informer.cache.subscribe(runtime.Handlers(
            add=lambda obj: self.queue.add(pod_key(obj)),
            update=self._on_update,
            delete=self._on_delete))
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                group.create_task(informer.run(), name="pod informer")
                group.create_task(self.objects.run(), name="configmaps and secrets")
                await informer.wait_synced()
                self._adopt()
                self.synced.set()
                for i in range(self.config.workers):
                    group.create_task(self._worker(), name=f"pod worker {i}")
                for i in range(self.config.status_workers):
                    group.create_task(self._status_worker(), name=f"status writer {i}")
                group.create_task(self._feed_changes(), name="runtime changes")
                group.create_task(self._take_events(), name="runtime events")
                group.create_task(self._write_events(), name="event writer")
        finally:
            self.queue.shut_down()
            self.status_queue.shut_down()

    def _on_delete(self, obj: Mapping[str, Any]) -> None:
        self.objects.release(_uid(obj))  # gone from the API: its volumes need no updates
        self.queue.add(pod_key(obj))

    def _on_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        if _sync_relevant(old) != _sync_relevant(new):
            self.queue.add(pod_key(new))

    def _adopt(self) -> None:
        """Map the runtime's pods to the API's; remove those the API no longer has."""
        assert self.informer is not None
        cache = self.informer.cache
        for uid in self.runtime.pods():
            found = cache.by_index("uid", uid)
            if found:
                self._track(uid, pod_key(found[0]))
                self.status_queue.add(uid)
            else:
                log.info("removing pod %s: the API no longer has it", uid)
                self._spawn(self._remove(uid), f"remove {uid}")

    def _track(self, uid: str, key: str) -> None:
        old = self.uids.get(uid)
        if old == key:
            return
        if old is not None:
            self._untrack(uid)
        self.uids[uid] = key
        self._uids_of.setdefault(key, set()).add(uid)

    def _untrack(self, uid: str) -> None:
        self._answered.pop(uid, None)
        self._status_locks.pop(uid, None)
        key = self.uids.pop(uid, None)
        if key is None:
            return
        uids = self._uids_of.get(key)
        if uids is not None:
            uids.discard(uid)
            if not uids:
                del self._uids_of[key]

    def _objects_changed(self, uids: Iterable[str]) -> None:
        for uid in uids:
            key = self.uids.get(uid)
            if key is not None:
                self.queue.add(key)

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        assert self._group is not None
        return self._group.create_task(coro, name=name)

    async def _remove(self, uid: str) -> None:
        try:
            await self.runtime.remove_pod(uid)
        except Exception:
            log.exception("removing pod %s failed", uid)
        self._untrack(uid)
        self.tokens.forget(uid)
        self.objects.release(uid)

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except runtime.ShutDown:
                return
            try:
                await self.sync(key)
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.info("syncing pod %s failed (will retry): %s", key, e)
                self.queue.add_rate_limited(key)
            except Exception:
                log.exception("syncing pod %s failed (will retry)", key)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
            finally:
                self.queue.done(key)

    # --- one pod --------------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        assert self.informer is not None
        pod = self.informer.cache.get(key)
        uid = _uid(pod)
        for old_uid in list(self._uids_of.get(key, ())):
            if old_uid != uid and old_uid not in self._terminating:
                # deleted without a graceful deletion (or replaced by a new pod of this name)
                self._untrack(old_uid)
                self._spawn(self._remove(old_uid), f"remove {old_uid}")
        if pod is None or not uid:
            return
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            if uid not in self._terminating:
                self._terminating[uid] = self._spawn(self._terminate(pod), f"terminate {key}")
            return
        known = uid in self.uids
        phase = (pod.get("status") or {}).get("phase")
        if not known and phase in TERMINAL:
            return  # finished before this agent knew it: nothing to run again
        refs = references(pod)
        ns = str(meta.get("namespace") or "default")
        self.objects.use(uid, [*(ObjectRef("ConfigMap", ns, n) for n in refs.config_maps),
                               *(ObjectRef("Secret", ns, n) for n in refs.secrets)])
        inputs = await self._inputs(pod, refs)
        await self.runtime.sync_pod(pod, inputs)
        self._track(uid, key)
        if refs.config_maps or refs.secrets or refs.tokens:
            self.queue.add_after(key, self.config.resync)

    async def _inputs(self, pod: Mapping[str, Any], refs: Any) -> Any:
        meta = pod.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        config_maps: dict[str, Any] = {}
        secrets: dict[str, Any] = {}
        for name in sorted(refs.config_maps):
            if (found := await self.objects.get(ObjectRef("ConfigMap", ns, name))) is not None:
                config_maps[name] = found
        for name in sorted(refs.secrets):
            if (found := await self.objects.get(ObjectRef("Secret", ns, name))) is not None:
                secrets[name] = found
        tokens: dict[tuple[str, str], str] = {}
        account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
        for volume, path, audience, seconds in refs.tokens:
            validity = int(seconds or self.config.token_seconds)
            spec: Obj = {"expirationSeconds": validity,
                         "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                            "name": meta.get("name"), "uid": meta.get("uid")}}
            if audience:
                spec["audiences"] = [audience]

            async def fetch(spec: Obj = spec) -> str | None:
                try:
                    answer = await self.client.request(
                        "POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token",
                        body={"apiVersion": "authentication.k8s.io/v1",
                              "kind": "TokenRequest", "spec": spec})
                except errors.NotFound:
                    return None
                token = (answer.get("status") or {}).get("token")
                return token if isinstance(token, str) else None

            token = await self.tokens.get(TokenKey(ns, account, str(audience or ""), validity,
                                                   str(meta.get("uid") or "")), fetch)
            if token is not None:
                tokens[(volume, path)] = token
        service_env: Mapping[str, str] = {}
        if self.service_env is not None:
            links = (pod.get("spec") or {}).get("enableServiceLinks")
            service_env = self.service_env(ns, links is None or links is True)
        return resolve_inputs(pod, config_maps=config_maps, secrets=secrets, tokens=tokens,
                              service_env=service_env)

    async def _terminate(self, pod: Mapping[str, Any]) -> None:
        """Graceful deletion: stop the containers, report, delete with grace 0."""
        meta = pod.get("metadata") or {}
        uid = _uid(pod)
        key = pod_key(pod)
        try:
            grace = meta.get("deletionGracePeriodSeconds")
            if uid in self.runtime.pods():
                await self.runtime.kill_pod(uid, float(grace) if isinstance(grace, int)
                                            else None)
                await self._write_status(uid)
            ns, name = str(meta.get("namespace")), str(meta.get("name"))
            while True:
                try:
                    await self.client.delete(("v1", "Pod"), name, namespace=ns,
                                             grace_period_seconds=0, uid=uid)
                    break
                except (errors.NotFound, errors.Conflict):
                    break  # gone already, or another pod of that name now
                except (TimeoutError, errors.ApiError, OSError) as e:
                    log.info("deleting pod %s failed (will retry): %s", key, e)
                    await rtclock.sleep(self.clock, 1.0)
            await self.runtime.remove_pod(uid)
            self._untrack(uid)
            self.objects.release(uid)
        finally:
            self._terminating.pop(uid, None)

    # --- status ---------------------------------------------------------------------------

    async def _feed_changes(self) -> None:
        async for uid in self.runtime.changes():
            if uid in self.uids:
                self.status_queue.add(uid)

    async def _status_worker(self) -> None:
        while True:
            try:
                uid = await self.status_queue.get()
            except runtime.ShutDown:
                return
            try:
                await self._write_status(uid)
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.info("writing the status of pod %s failed (will retry): %s", uid, e)
                self.status_queue.add_rate_limited(uid)
            except Exception:
                log.exception("writing the status of pod %s failed (will retry)", uid)
                self.status_queue.add_rate_limited(uid)
            else:
                self.status_queue.forget(uid)
            finally:
                self.status_queue.done(uid)

    def _freshest(self, uid: str, cached: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """The newer of the cached pod and the server's answer to our last status write.

        The watch shows our own write a moment after the server answered it; a second
        write based on the cache in that moment (Running, then Ready) would be refused as
        a conflict, and read again. The answer is the pod as the server then had it, so it
        is the better base until the cache shows that resourceVersion or a later one.
        """
        answered = self._answered.get(uid)
        if answered is None:
            return cached
        if cached is not None and _uid(cached) == uid and \
                _version(cached) >= _version(answered):
            del self._answered[uid]  # the cache caught up
            return cached
        return answered

    async def _write_status(self, uid: str) -> None:
        """Write the runtime's status of ``uid``; one write at a time per pod (a status
        writer and the pod's termination may both want to), so that the second starts from
        the first's answer instead of conflicting with it."""
        if uid not in self.uids:
            return  # not (or no longer) ours to report
        lock = self._status_locks.get(uid)
        if lock is None:
            lock = self._status_locks[uid] = asyncio.Lock()
        async with lock:
            await self._write_status_now(uid)

    async def _write_status_now(self, uid: str) -> None:
        assert self.informer is not None
        assert self._pods_ref is not None
        key = self.uids.get(uid)
        reported = self.runtime.pod_status(uid)
        if key is None or reported is None:
            return
        pod = self._freshest(uid, self.informer.cache.get(key))
        for _ in range(MAX_CONFLICT_RETRIES):
            if pod is None or _uid(pod) != uid:
                return
            status = merge_status(pod.get("status"), reported)
            if status == pod.get("status"):
                return
            body = {**pod, "status": status}
            try:
                self._answered[uid] = await self.client.update_status(
                    body, resource=self._pods_ref)
                return
            except errors.NotFound:
                return
            except errors.Conflict:
                meta = pod.get("metadata") or {}
                try:
                    pod = await self.client.get(self._pods_ref, str(meta.get("name")),
                                                namespace=str(meta.get("namespace")))
                except errors.NotFound:
                    return
        raise errors.Conflict(f"pod {key}: the status kept conflicting")

    # --- events ---------------------------------------------------------------------------

    async def _take_events(self) -> None:
        async for event in self.runtime.events():
            self._events.append(event)  # the oldest dropped when full
            self._events_ready.set()

    async def _write_events(self) -> None:
        while True:
            while not self._events:
                self._events_ready.clear()
                await self._events_ready.wait()
            event = self._events.popleft()
            try:
                await self.record(event)
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.debug("could not record event %s for pod %s: %s", event.reason,
                          event.name, e)

    async def record(self, event: PodEvent) -> None:
        """Write ``event`` as a core/v1 Event (or bump the count of its recent twin)."""
        series_key = (event.uid, event.type, event.reason, event.message, event.field_path)
        now = self.wall.now()
        stamp = timeutil.format_time(now)
        mono = self.clock.monotonic()
        found = self._series.get(series_key)
        if found is not None and mono - found[3] <= EVENT_SERIES_WINDOW:
            ns, name, count, _ = found
            try:
                await self.client.patch(("v1", "Event"), name, {"count": count + 1,
                                                                 "lastTimestamp": stamp},
                                        namespace=ns)
                self._series[series_key] = (ns, name, count + 1, mono)
                self._series.move_to_end(series_key)
                return
            except errors.NotFound:
                pass
        involved: Obj = {"apiVersion": "v1", "kind": "Pod", "namespace": event.namespace,
                         "name": event.name, "uid": event.uid}
        if event.field_path:
            involved["fieldPath"] = event.field_path
        nanos = int(now.timestamp() * 1e9) + len(self._series)
        name = f"{event.name}.{nanos:x}"
        await self.client.create({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": event.namespace},
            "involvedObject": involved, "reason": event.reason, "message": event.message,
            "type": event.type, "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": "kubelet", "host": self.config.node_name},
            "reportingComponent": "kubelet", "reportingInstance": self.config.node_name,
        }, namespace=event.namespace)
        self._series[series_key] = (event.namespace, name, 1, mono)
        while len(self._series) > self.config.max_series:
            self._series.popitem(last=False)
