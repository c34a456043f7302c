"""The node lifecycle: a silent node becomes Unknown and tainted; its pods are evicted.

Two ordinary controllers for Nodes, as Kubernetes' node lifecycle and taint eviction
controllers work:

- ``nodelifecycle`` (:class:`NodeLifecycle`) watches Nodes and the heartbeat Leases in
  ``kube-node-lease``. It notes *when it saw* a node's heartbeat change (the Lease's
  ``renewTime``, or the ``Ready`` condition's ``lastHeartbeatTime``) on its own monotonic
  clock, so the clocks of the node and of this process need not agree. A node silent for
  longer than ``grace_period`` (Kubernetes' ``--node-monitor-grace-period``, 40 s) gets its
  ``Ready`` condition (and any ``MemoryPressure``, ``DiskPressure``, ``PIDPressure``) set to
  ``Unknown``, reason ``NodeStatusUnknown``, "Kubelet stopped posting node status." (the
  heartbeat time is kept), a ``NodeNotReady`` event, and its pods' ``Ready`` condition set
  to ``False`` (so Services stop sending them traffic). Whatever the ``Ready`` condition
  says, the node carries the matching taints (Kubernetes' ``TaintNodesByCondition`` and
  ``NoExecute`` taints): ``node.kubernetes.io/unreachable`` (``Unknown``) or
  ``node.kubernetes.io/not-ready`` (``False``), each as ``NoSchedule`` and ``NoExecute``
  (with ``timeAdded``), and ``node.kubernetes.io/unschedulable:NoSchedule`` while cordoned;
  a node whose ``Ready`` is ``True`` again loses them. Its taints are the only part of a
  node's spec it writes.
- ``taint-eviction-controller`` (:class:`TaintEviction`) deletes the pods of a node with
  ``NoExecute`` taints they do not tolerate: at once, or ``tolerationSeconds`` after the
  taint's ``timeAdded`` (:func:`setpoint.controllers.taints.eviction_deadline`), with a
  ``TaintManagerEviction`` event ("Marking for deletion Pod ns/name"). A pod with no
  toleration at all for the ``not-ready`` or ``unreachable`` ``NoExecute`` taint is treated
  as having the one Kubernetes' DefaultTolerationSeconds admission plugin adds to every pod
  (``default_toleration_seconds``, 300 s), whether or not the API server added it.

Invariants: every write carries the resourceVersion it was computed from (a conflict retries
with backoff); a reconcile that finds the node as it should be writes nothing; a healthy node
is looked at again when its grace period would run out (no polling faster than that), and a
node with pods to evict when the next one is due.

Non-guarantees: after a restart of the controller every node gets a full grace period again
(its heartbeat was "seen" at start), as in Kubernetes; no rate limiting of evictions per
zone (Kubernetes slows evictions when a large share of a zone is down); the clocks that
``timeAdded`` and ``tolerationSeconds`` are measured with are this process's wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil
from setpoint.controllers import scheduling, taints

Obj = Mapping[str, Any]

NODE: Final = ("v1", "Node")
POD: Final = ("v1", "Pod")
LEASE: Final = ("coordination.k8s.io/v1", "Lease")
LEASE_NAMESPACE: Final = "kube-node-lease"
NODE_NAME_INDEX: Final = "spec.nodeName"

DEFAULT_GRACE_PERIOD: Final = 40.0
DEFAULT_TOLERATION_SECONDS: Final = 300
#: the conditions a silent node gets Unknown for (Ready always; the others if present)
PRESSURE_CONDITIONS: Final = ("MemoryPressure", "DiskPressure", "PIDPressure")
UNKNOWN_REASON: Final = "NodeStatusUnknown"
UNKNOWN_MESSAGE: Final = "Kubelet stopped posting node status."
NEVER_REASON: Final = "NodeStatusNeverUpdated"
NEVER_MESSAGE: Final = "Kubelet never posted node status."
#: the taints this controller owns, by key
MANAGED_TAINT_KEYS: Final = frozenset({taints.NOT_READY, taints.UNREACHABLE,
                                       taints.UNSCHEDULABLE})


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeLifecycleConfig:
    #: seconds without a heartbeat before a node is Unknown
    grace_period: float = DEFAULT_GRACE_PERIOD
    #: tolerationSeconds assumed for pods without a not-ready/unreachable toleration
    default_toleration_seconds: int = DEFAULT_TOLERATION_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.grace_period <= 86400:
            raise ValueError("grace_period must be between 0 and 86400 seconds")
        if not 0 <= self.default_toleration_seconds <= taints.MAX_TOLERATION_SECONDS:
            raise ValueError("default_toleration_seconds must not be negative")


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _conditions(obj: Obj) -> list[dict[str, Any]]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return [dict(c) for c in taints.items(conditions)]


def heartbeat(node: Obj, lease: Obj | None) -> tuple[str, str]:
    """What changes when a node's agent is alive: its Lease's renewTime and its Ready
    condition's lastHeartbeatTime."""
    renewed = ""
    if lease is not None:
        spec = lease.get("spec")
        if isinstance(spec, Mapping):
            renewed = str(spec.get("renewTime") or "")
    ready = next((c for c in _conditions(node) if c.get("type") == "Ready"), {})
    return renewed, str(ready.get("lastHeartbeatTime") or "")


def unknown_conditions(node: Obj, now: str) -> list[dict[str, Any]] | None:
    """The node's conditions for a silent node, or None when they already say so."""
    conditions = _conditions(node)
    changed = False
    types = {c.get("type") for c in conditions}
    for condition in conditions:
        if (condition.get("type") == "Ready" or condition.get("type") in PRESSURE_CONDITIONS) \
                and condition.get("status") != "Unknown":
            condition.update(status="Unknown", reason=UNKNOWN_REASON,
                             message=UNKNOWN_MESSAGE, lastTransitionTime=now)
            changed = True
    if "Ready" not in types:
        conditions.append({"type": "Ready", "status": "Unknown", "reason": NEVER_REASON,
                           "message": NEVER_MESSAGE, "lastHeartbeatTime": now,
                           "lastTransitionTime": now})
        changed = True
    return conditions if changed else None


def desired_taints(node: Obj, now: str) -> list[dict[str, Any]]:
    """The node's taints with the managed ones as its Ready condition and ``unschedulable``
    call for (others kept as they are; ``timeAdded`` kept for taints already there)."""
    current = [dict(t) for t in taints.node_taints(node)]
    ready = scheduling.ready_status(node)
    wanted: list[tuple[str, str]] = []
    if ready == "False":
        wanted = [(taints.NOT_READY, taints.NO_SCHEDULE), (taints.NOT_READY, taints.NO_EXECUTE)]
    elif ready == "Unknown":
        wanted = [(taints.UNREACHABLE, taints.NO_SCHEDULE),
                  (taints.UNREACHABLE, taints.NO_EXECUTE)]
    spec = node.get("spec")
    if isinstance(spec, Mapping) and spec.get("unschedulable") is True:
        wanted.append((taints.UNSCHEDULABLE, taints.NO_SCHEDULE))
    kept = [t for t in current if t.get("key") not in MANAGED_TAINT_KEYS
            or (t.get("key"), t.get("effect")) in wanted]
    have = {(t.get("key"), t.get("effect")) for t in kept}
    for key, effect in wanted:
        if (key, effect) not in have:
            taint: dict[str, Any] = {"key": key, "effect": effect}
            if effect == taints.NO_EXECUTE:
                taint["timeAdded"] = now
            kept.append(taint)
    return kept


def _to_node_of_lease(lease: Obj) -> Iterable[runtime.Request]:
    meta = _meta(lease)
    if meta.get("namespace") == LEASE_NAMESPACE and meta.get("name"):
        yield runtime.Request("", str(meta["name"]))


def _to_node_of_pod(pod: Obj) -> Iterable[runtime.Request]:
    node = scheduling.node_name_of(pod)
    if node:
        yield runtime.Request("", node)


def _pods_on(ctx: runtime.Context, node: str) -> list[Obj]:
    cache = ctx.cache_for(POD)
    try:
        return cache.by_index(NODE_NAME_INDEX, node)
    except KeyError:
        cache.add_indexer(NODE_NAME_INDEX, lambda p: [n] if (n := scheduling.node_name_of(p))
                          else [])
        return cache.by_index(NODE_NAME_INDEX, node)


@dataclass(slots=True)
class _Seen:
    signal: tuple[str, str]
    at: float


class NodeLifecycle:
    """The reconcile of ``nodelifecycle``; see the module docstring."""

    def __init__(self, config: NodeLifecycleConfig, *,
                 clock: base_clock.Clock | None = None) -> None:
        self.config = config
        self.clock: base_clock.Clock = clock or base_clock.SystemClock()
        self._seen: dict[str, _Seen] = {}

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        node = ctx.get(request)
        if node is None:
            self._seen.pop(request.name, None)
            return runtime.Result.done()
        lease = ctx.cache_for(LEASE).get(f"{LEASE_NAMESPACE}/{request.name}")
        signal = heartbeat(node, lease)
        mono = self.clock.monotonic()
        seen = self._seen.get(request.name)
        if seen is None or seen.signal != signal:
            seen = self._seen[request.name] = _Seen(signal, mono)
        silent = mono - seen.at
        now = timeutil.format_time(self.clock.now())
        try:
            if silent > self.config.grace_period:
                node = await self._mark_unknown(ctx, node, now)
            await self._taint(ctx, node, now)
        except (errors.Conflict, errors.NotFound):
            return runtime.Result(requeue=True)
        if silent > self.config.grace_period:
            return runtime.Result.done()  # nothing more until it speaks again
        return runtime.Result.after(self.config.grace_period - silent + 0.01)

    async def _mark_unknown(self, ctx: runtime.Context, node: Obj, now: str) -> Obj:
        conditions = unknown_conditions(node, now)
        if conditions is None:
            return node
        name = str(_meta(node).get("name"))
        updated = await ctx.client.patch_status(
            NODE, name, {"metadata": {"resourceVersion": _meta(node).get("resourceVersion")},
                         "status": {"conditions": conditions}})
        ctx.logger.info("node %s stopped posting status: Ready is Unknown", name)
        await ctx.recorder.normal(node, "NodeNotReady", f"Node {name} status is now: "
                                                        "NodeNotReady")
        for pod in _pods_on(ctx, name):
            await self._mark_pod_not_ready(ctx, pod, now)
        return updated

    async def _mark_pod_not_ready(self, ctx: runtime.Context, pod: Obj, now: str) -> None:
        conditions = _conditions(pod)
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") == "False" or scheduling.is_terminal(pod):
            return
        ready.update(status="False", lastTransitionTime=now)
        meta = _meta(pod)
        try:
            await ctx.client.patch_status(
                POD, str(meta.get("name")),
                {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                 "status": {"conditions": conditions}}, namespace=str(meta.get("namespace")))
        except (errors.Conflict, errors.NotFound):
            return  # changed or gone: whoever changed it knows better
        await ctx.recorder.warning(pod, "NodeNotReady", "Node is not ready")

    async def _taint(self, ctx: runtime.Context, node: Obj, now: str) -> None:
        wanted = desired_taints(node, now)
        if wanted == [dict(t) for t in taints.node_taints(node)]:
            return
        spec = dict(node.get("spec") or {})
        if wanted:
            spec["taints"] = wanted
        else:
            spec.pop("taints", None)
        await ctx.client.update({**node, "spec": spec}, resource=NODE)
        ctx.logger.info("node %s taints: %s", _meta(node).get("name"),
                        ", ".join(taints.taint_id(t) for t in wanted) or "none")


class TaintEviction:
    """The reconcile of ``taint-eviction-controller``; see the module docstring."""

    def __init__(self, config: NodeLifecycleConfig, *,
                 clock: base_clock.Clock | None = None) -> None:
        self.clock: base_clock.Clock = clock or base_clock.SystemClock()
        seconds = config.default_toleration_seconds
        self.defaults = [{"key": key, "operator": "Exists", "effect": taints.NO_EXECUTE,
                          "tolerationSeconds": seconds}
                         for key in (taints.NOT_READY, taints.UNREACHABLE)]

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        node = ctx.get(request)
        if node is None:
            return runtime.Result.done()
        executing = [t for t in taints.node_taints(node)
                     if t.get("effect") == taints.NO_EXECUTE]
        if not executing:
            return runtime.Result.done()
        now = self.clock.now().timestamp()
        added: dict[str, float] = {}
        for taint in executing:
            try:
                added[taints.taint_id(taint)] = timeutil.parse_time(
                    str(taint.get("timeAdded"))).timestamp()
            except ValueError:
                pass
        due: float | None = None
        for pod in _pods_on(ctx, request.name):
            if _meta(pod).get("deletionTimestamp") or scheduling.is_terminal(pod):
                continue
            deadline = taints.eviction_deadline(executing, taints.pod_tolerations(pod),
                                                now=now, added=added,
                                                default_tolerations=self.defaults)
            if deadline is None:
                continue
            if deadline <= now:
                await self._evict(ctx, pod)
            else:
                due = deadline if due is None else min(due, deadline)
        if due is None:
            return runtime.Result.done()
        return runtime.Result.after(max(0.01, due - now))

    async def _evict(self, ctx: runtime.Context, pod: Obj) -> None:
        meta = _meta(pod)
        name, namespace = str(meta.get("name")), str(meta.get("namespace"))
        await ctx.recorder.normal(pod, "TaintManagerEviction",
                                  f"Marking for deletion Pod {namespace}/{name}")
        try:
            await ctx.client.delete(POD, name, namespace=namespace,
                                    uid=str(meta.get("uid")) if meta.get("uid") else None)
        except (errors.NotFound, errors.Conflict):
            return
        ctx.logger.info("evicted pod %s/%s from node %s", namespace, name,
                        scheduling.node_name_of(pod))


def node_lifecycle_controller(config: NodeLifecycleConfig | None = None, *,
                              clock: base_clock.Clock | None = None) -> runtime.Controller:
    reconcile = NodeLifecycle(config or NodeLifecycleConfig(), clock=clock)
    return (runtime.Controller(for_=NODE, reconcile=reconcile, name="nodelifecycle")
            .watches(LEASE, _to_node_of_lease)
            .watches(POD, lambda pod: ())  # its cache: the pods to mark not ready
            .with_options(workers=2))


def taint_eviction_controller(config: NodeLifecycleConfig | None = None, *,
                              clock: base_clock.Clock | None = None) -> runtime.Controller:
    reconcile = TaintEviction(config or NodeLifecycleConfig(), clock=clock)
    return (runtime.Controller(for_=NODE, reconcile=reconcile,
                               name="taint-eviction-controller")
            .watches(POD, _to_node_of_pod)
            .with_options(workers=2))
