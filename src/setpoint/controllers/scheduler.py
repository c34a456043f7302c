"""The scheduler: pending pods get a node, through the ``pods/binding`` subresource.

:class:`Scheduler` is a :class:`~setpoint.runtime.Runnable` named ``scheduler``: the
controller manager runs it beside the other built-in controllers, acting as the user
``system:kube-scheduler`` (its own credentials and ClusterRole, as kube-scheduler has). It
reads Pods and Nodes from the manager's shared informers and decides with
:mod:`setpoint.controllers.scheduling` (what it filters and scores is written there).

Which pods: those with no ``spec.nodeName``, ``spec.schedulerName`` equal to
``scheduler_name`` (``default-scheduler``; the API server defaults it), not being deleted and
not finished. A pod another scheduler owns is left alone.

The loop (:class:`SchedulingLoop`): a work queue of pod keys, ``workers`` coroutines taking
one at a time. For a pod, the decision and the *assumption* (the pod counted on its node in
:class:`~setpoint.controllers.scheduling.SchedulingCache`) happen together without yielding to
the event loop, then the binding is POSTed; so a second pod decided while the first binding
is in flight, or before the watch shows it, already sees the first one's room taken. A
binding that fails drops the assumption (409/404: someone else bound it or it is gone;
anything else: retried with backoff).

A pod that fits nowhere gets the condition ``PodScheduled=False``, reason
``Unschedulable``, with Kubernetes' message (``0/3 nodes are available: ...``) and a
``FailedScheduling`` Warning event; it then waits — no polling — for a change that could
make room: a node added, or changed in what the filters read (labels, taints,
``unschedulable``, allocatable, readiness), a pod on a node deleted or finished, or its own
spec changed. Each such retry is delayed per pod by an exponential backoff
(``initial_backoff`` doubling to ``max_backoff``, Kubernetes' 1 s and 10 s), and every
unschedulable pod is tried again after ``unschedulable_retry`` seconds (Kubernetes' 5
minutes) in case something the scheduler does not watch changed. A scheduled pod gets a
``Scheduled`` event ("Successfully assigned ns/name to node").

Invariants: a pod is never handed to two workers at once (the queue is stingy); its own
status writes never re-trigger it (only spec changes do); every failure is retried with
backoff, never in a tight loop.

Non-guarantees: no preemption (a pod that fits nowhere waits, whatever its priority), no
pod priority ordering (pods are tried in the order they arrived), no pod affinity or
topology spread. Several schedulers with the same ``scheduler_name`` (several control
planes without leader election) may race: the loser's binding fails with 409 and it moves on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil
from setpoint.controllers import scheduling
from setpoint.controllers.scheduling import Obj

log = logging.getLogger(__name__)

POD: Final = ("v1", "Pod")
NODE: Final = ("v1", "Node")
DEFAULT_SCHEDULER: Final = "default-scheduler"
#: the user the scheduler acts as (bound to the ClusterRole of the same name)
USER: Final = "system:kube-scheduler"
MAX_WORKERS: Final = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    #: the ``spec.schedulerName`` this scheduler takes pods for (and its events' source)
    scheduler_name: str = DEFAULT_SCHEDULER
    #: pods decided and bound concurrently (decisions themselves are one at a time)
    workers: int = 4
    #: seconds before a retry after a change, per pod, doubling up to ``max_backoff``
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    #: seconds after which an unschedulable pod is tried again whatever happened
    unschedulable_retry: float = 300.0
    #: seconds to wait for the pod and node caches to fill before giving up the run
    sync_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not self.scheduler_name:
            raise ValueError("scheduler_name must not be empty")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}")
        if not 0 < self.initial_backoff <= self.max_backoff:
            raise ValueError("backoffs must be positive, the first not above the max")
        if self.unschedulable_retry <= 0 or self.sync_timeout <= 0:
            raise ValueError("unschedulable_retry and sync_timeout must be positive")


class SchedulerApi(Protocol):
    """What the loop writes: the binding, the unschedulable condition, events."""

    async def bind(self, pod: Obj, node: str) -> None:
        """POST the binding; raises the API's errors."""

    async def scheduled(self, pod: Obj, node: str) -> None:
        """Report success (an Event); never raises."""

    async def unschedulable(self, pod: Obj, message: str) -> None:
        """Set PodScheduled=False and record FailedScheduling; raises ``Conflict`` when the
        pod changed meanwhile."""


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _labels(obj: Obj) -> Any:
    return _meta(obj).get("labels")


class SchedulingLoop:
    """The queue, handlers and workers of one scheduler run (no I/O of its own: it reads
    the caches it is given and writes through ``api``)."""

    def __init__(self, pods: runtime.Cache, nodes: runtime.Cache, api: SchedulerApi, *,
                 config: SchedulerConfig, clock: runtime.AsyncClock | None = None) -> None:
        self.config = config
        self.pods = pods
        self.api = api
        self.cache = scheduling.SchedulingCache()
        #: keys of pods that fit nowhere at their last attempt
        self.unschedulable: set[str] = set()
        self.queue: runtime.WorkQueue[str] = runtime.WorkQueue(
            clock=clock, rate_limiter=runtime.ItemExponentialBackoff(
                config.initial_backoff, config.max_backoff))
        self._subscriptions = [
            nodes.subscribe(runtime.Handlers(add=self._node_added, update=self._node_updated,
                                             delete=self._node_deleted)),
            pods.subscribe(runtime.Handlers(add=self._pod_added, update=self._pod_updated,
                                            delete=self._pod_deleted)),
        ]

    # which pods

    def pending(self, pod: Obj) -> bool:
        spec = _spec(pod)
        return (not scheduling.node_name_of(pod)
                and (spec.get("schedulerName") or DEFAULT_SCHEDULER)
                == self.config.scheduler_name
                and not _meta(pod).get("deletionTimestamp")
                and not scheduling.is_terminal(pod))

    # handlers: they run in the event loop, synchronously, as the caches change

    def _retry_unschedulable(self) -> None:
        for key in self.unschedulable:
            self.queue.add_rate_limited(key)

    def _node_added(self, node: Obj) -> None:
        self.cache.set_node(node)
        self._retry_unschedulable()

    def _node_updated(self, old: Obj, new: Obj) -> None:
        self.cache.set_node(new)
        if (_spec(old) != _spec(new) or _labels(old) != _labels(new)
                or (old.get("status") or {}).get("allocatable")
                != (new.get("status") or {}).get("allocatable")
                or scheduling.ready_status(old) != scheduling.ready_status(new)):
            self._retry_unschedulable()

    def _node_deleted(self, node: Obj) -> None:
        self.cache.remove_node(scheduling.name_of(node))

    def _pod_added(self, pod: Obj) -> None:
        self.cache.observe_pod(pod)
        if self.pending(pod):
            self.queue.add(scheduling.pod_key(pod))

    def _pod_updated(self, old: Obj, new: Obj) -> None:
        self.cache.observe_pod(new)
        key = scheduling.pod_key(new)
        if self.pending(new):
            if key not in self.unschedulable or _spec(old) != _spec(new):
                self.queue.add(key)
            return
        self.unschedulable.discard(key)
        if scheduling.node_name_of(new) and scheduling.is_terminal(new) \
                and not scheduling.is_terminal(old):
            self._retry_unschedulable()  # a finished pod frees its room

    def _pod_deleted(self, pod: Obj) -> None:
        key = scheduling.pod_key(pod)
        self.cache.remove_pod(key)
        self.unschedulable.discard(key)
        self.queue.forget(key)
        if scheduling.node_name_of(pod):
            self._retry_unschedulable()

    # the workers

    async def run(self) -> None:
        """Run the workers until cancelled or the queue is shut down."""
        try:
            async with asyncio.TaskGroup() as group:
                for i in range(self.config.workers):
                    group.create_task(self._worker(), name=f"scheduler worker {i}")
        finally:
            for subscription in self._subscriptions:
                subscription.cancel()

    def shut_down(self) -> None:
        self.queue.shut_down()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except runtime.ShutDown:
                return
            try:
                await self.schedule_one(key)
            except Exception as e:  # a bug must not end the scheduler: retry later
                log.exception("scheduling %s failed: %s", key, e)
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)
            await asyncio.sleep(0)

    async def schedule_one(self, key: str) -> str | None:
        """Try once to schedule the pod ``key``; returns the node it was bound to."""
        pod = self.pods.get(key)
        if pod is None or not self.pending(pod) or self.cache.is_assumed(key):
            return None
        decision = scheduling.schedule(pod, self.cache)
        if decision.node is None:
            self.unschedulable.add(key)
            self.queue.add_after(key, self.config.unschedulable_retry)
            try:
                await self.api.unschedulable(pod, decision.message)
            except (errors.Conflict, errors.NotFound):
                pass  # the pod changed or went: its own event brings it back
            except errors.ApiError as e:
                log.warning("could not report %s unschedulable: %s", key, e)
            return None
        node = decision.node
        self.cache.assume(pod, node)
        try:
            await self.api.bind(pod, node)
        except (errors.Conflict, errors.NotFound) as e:
            self.cache.forget(pod)  # bound elsewhere meanwhile, or gone
            log.info("binding %s to %s: %s", key, node, e)
            return None
        except Exception:
            self.cache.forget(pod)
            self.queue.add_rate_limited(key)
            raise
        self.unschedulable.discard(key)
        self.queue.forget(key)
        await self.api.scheduled(pod, node)
        return node


class ClientApi:
    """:class:`SchedulerApi` over the API: the binding subresource, pod status, Events."""

    def __init__(self, client: sp_client.Client, pods: sp_client.ResourceRef,
                 recorder: runtime.EventRecorder, *, clock: base_clock.Clock | None = None
                 ) -> None:
        self.client = client
        self.pods = pods
        self.recorder = recorder
        self.clock: base_clock.Clock = clock or base_clock.SystemClock()

    async def bind(self, pod: Obj, node: str) -> None:
        meta = _meta(pod)
        binding_meta = {"name": meta.get("name"), "namespace": meta.get("namespace")}
        if meta.get("uid"):
            binding_meta["uid"] = meta["uid"]
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": binding_meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        path = self.pods.path(namespace=str(meta.get("namespace")), name=str(meta.get("name")),
                              subresource="binding")
        await self.client.request("POST", path, body=body)

    async def scheduled(self, pod: Obj, node: str) -> None:
        meta = _meta(pod)
        await self.recorder.normal(pod, "Scheduled",
                                   f"Successfully assigned {meta.get('namespace')}/"
                                   f"{meta.get('name')} to {node}")

    async def unschedulable(self, pod: Obj, message: str) -> None:
        conditions = _conditions(pod)
        current = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if not (current and current.get("status") == "False"
                and current.get("reason") == "Unschedulable"
                and current.get("message") == message):
            condition = {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                         "lastTransitionTime": timeutil.format_time(self.clock.now()),
                         "reason": "Unschedulable", "message": message}
            if current and current.get("status") == "False" and \
                    current.get("lastTransitionTime"):
                condition["lastTransitionTime"] = current["lastTransitionTime"]
            wanted = [c for c in conditions if c.get("type") != "PodScheduled"] + [condition]
            meta = _meta(pod)
            await self.client.patch_status(
                self.pods, str(meta.get("name")),
                {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "status": {"conditions": wanted}},
                namespace=str(meta.get("namespace")))
        await self.recorder.warning(pod, "FailedScheduling", message)


def _conditions(obj: Obj) -> list[dict[str, Any]]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    if not isinstance(conditions, list):
        return []
    return [dict(c) for c in conditions if isinstance(c, Mapping)]


class Scheduler:
    """The scheduler as a runnable of the controller manager; see the module docstring."""

    name = "scheduler"

    def __init__(self, config: SchedulerConfig | None = None) -> None:
        self.config = config or SchedulerConfig()
        #: the loop of the current run (None when not running): for tests and metrics
        self.current: SchedulingLoop | None = None

    async def run(self, ctx: runtime.RunnableContext) -> None:
        pods = await ctx.informers.informer_for(POD)
        nodes = await ctx.informers.informer_for(NODE)
        for informer in (pods, nodes):
            if not await informer.wait_synced(self.config.sync_timeout):
                raise TimeoutError(f"the scheduler's caches did not sync in "
                                   f"{self.config.sync_timeout:g}s")
        recorder = runtime.EventRecorder(ctx.client, self.config.scheduler_name)
        api = ClientApi(ctx.client, await ctx.client.resolve(POD), recorder)
        loop = SchedulingLoop(pods.cache, nodes.cache, api, config=self.config,
                              clock=ctx.clock)
        self.current = loop
        try:
            async with asyncio.TaskGroup() as group:
                running = group.create_task(loop.run(), name="scheduling loop")
                await _until(ctx.stopping, running)
                loop.shut_down()
        finally:
            self.current = None


async def _until(stopping: asyncio.Event, running: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({waiter, running}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
