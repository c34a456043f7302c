"""The DaemonSet controller: one pod of each DaemonSet on every eligible node.

As Kubernetes' daemon set controller:

- a node is *eligible* when the pod template would run there: its ``nodeName`` (if set),
  ``nodeSelector`` and required node affinity match (:mod:`nodeaffinity`), and every
  ``NoSchedule``/``NoExecute`` taint of the node is tolerated — with the tolerations every
  daemon pod gets (:data:`DAEMON_TOLERATIONS`: not-ready and unreachable ``NoExecute``,
  the pressure conditions, unschedulable; network-unavailable for host-network pods);
- an eligible node without a pod gets one, pinned to it by a required node affinity on
  ``metadata.name`` (the scheduler binds it), labelled ``controller-revision-hash`` (a hash
  of the template) and ``pod-template-generation``; pods on nodes that are not eligible, or
  gone, are deleted (at once for gone nodes: no agent will finish them), failed pods are
  replaced, and a node with several pods keeps the oldest;
- ``updateStrategy: RollingUpdate`` replaces pods of an older template at most
  ``maxUnavailable`` (a number or a percentage of the eligible nodes, rounded up) unavailable
  at a time; ``OnDelete`` replaces them only when they are deleted;
- status: ``desiredNumberScheduled``, ``currentNumberScheduled``, ``numberMisscheduled``,
  ``numberReady``, ``updatedNumberScheduled``, ``numberAvailable`` (ready for
  ``minReadySeconds``), ``numberUnavailable``, ``observedGeneration``.

Pods created and deleted are expected until the cache shows them (as for Jobs), so a lagging
cache never creates two pods for one node.

Each distinct template is stored as a ControllerRevision ``NAME-HASH`` labelled
``controller-revision-hash: HASH`` (:mod:`setpoint.controllers.history`), which is what
``kubectl rollout history|undo daemonset/NAME`` read.

Non-guarantees: no ``maxSurge``; availability is re-checked when pods or nodes change, or at
the end of ``minReadySeconds``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.controllers import history, nodeaffinity, taints
from setpoint.controllers.job import CATCH_UP_DELAY, Expectations

Obj = Mapping[str, Any]

DAEMONSET: Final = ("apps/v1", "DaemonSet")
POD: Final = ("v1", "Pod")
NODE: Final = ("v1", "Node")
HASH_LABEL: Final = "controller-revision-hash"
GENERATION_LABEL: Final = "pod-template-generation"
NAME_FIELD: Final = "metadata.name"
DAEMON_TOLERATIONS: Final = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists",
     "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists",
     "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
     "effect": "NoSchedule"},
)
NETWORK_TOLERATION: Final = {"key": "node.kubernetes.io/network-unavailable",
                             "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSetConfig:
    workers: int = 2




def _meta(obj: Obj) -> Mapping[str, Any]:
    return as_dict(obj.get("metadata"))


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def template_hash(daemonset: Obj) -> str:
    template = as_dict(as_dict(daemonset.get("spec")).get("template"))
    text = json.dumps(template, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def daemon_tolerations(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The template's tolerations plus the daemon ones it lacks."""
    own = [dict(as_dict(t)) for t in as_list(spec.get("tolerations"))]
    extra = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork") is True:
        extra.append(NETWORK_TOLERATION)
    for toleration in extra:
        if not any(t.get("key") == toleration["key"] and t.get("effect") == toleration[
                "effect"] for t in own):
            own.append(dict(toleration))
    return own


def eligible(daemonset: Obj, node: Obj) -> bool:
    """Whether the DaemonSet's pod should run on ``node`` (see the module docstring)."""
    spec = as_dict(as_dict(as_dict(daemonset.get("spec")).get("template")).get("spec"))
    pinned = spec.get("nodeName")
    if pinned and pinned != _name(node):
        return False
    pod = {"spec": spec}
    if not nodeaffinity.required_matches(pod, node):
        return False
    tolerations = daemon_tolerations(spec)
    return taints.first_untolerated(taints.node_taints(node), tolerations) is None


def pod_for(daemonset: Obj, node_name: str, revision: str) -> dict[str, Any]:
    meta = _meta(daemonset)
    template = copy.deepcopy(dict(as_dict(as_dict(daemonset.get("spec")).get("template"))))
    pod_meta = dict(as_dict(template.get("metadata")))
    labels = dict(as_dict(pod_meta.get("labels")))
    labels[HASH_LABEL] = revision
    labels[GENERATION_LABEL] = str(meta.get("generation") or 1)
    spec = dict(as_dict(template.get("spec")))
    spec["tolerations"] = daemon_tolerations(spec)
    affinity = dict(as_dict(spec.get("affinity")))
    node_affinity = dict(as_dict(affinity.get("nodeAffinity")))
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": NAME_FIELD, "operator": "In", "values": [node_name]}]}]}
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity
    pod_meta.pop("name", None)
    pod_meta.update({"generateName": f"{_name(daemonset)}-", "labels": labels,
                     "namespace": meta.get("namespace"),
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": _name(daemonset), "uid": meta.get("uid"),
                                          "controller": True, "blockOwnerDeletion": True}]})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


def target_node(pod: Obj) -> str:
    """The node a daemon pod is for: where it is bound, else where its affinity pins it."""
    bound = as_dict(pod.get("spec")).get("nodeName")
    if bound:
        return str(bound)
    required = as_dict(as_dict(as_dict(as_dict(pod.get("spec")).get("affinity")).get(
        "nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution"))
    for term in as_list(required.get("nodeSelectorTerms")):
        for field in as_list(as_dict(term).get("matchFields")):
            field = as_dict(field)
            values = as_list(field.get("values"))
            if field.get("key") == NAME_FIELD and field.get("operator") == "In" and \
                    len(values) == 1:
                return str(values[0])
    return ""


def _ready_since(pod: Obj) -> datetime | None:
    for c in as_list(as_dict(pod.get("status")).get("conditions")):
        c = as_dict(c)
        if c.get("type") == "Ready" and c.get("status") == "True":
            try:
                return timeutil.parse_time(str(c.get("lastTransitionTime")))
            except ValueError:
                return datetime.min.replace(tzinfo=None)
    return None


def max_unavailable(spec: Mapping[str, Any], desired: int) -> int:
    rolling = as_dict(as_dict(spec.get("updateStrategy")).get("rollingUpdate"))
    value = rolling.get("maxUnavailable", 1)
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        count = math.ceil(int(value[:-1]) * desired / 100)
    elif isinstance(value, int) and not isinstance(value, bool):
        count = value
    else:
        count = 1
    return max(1, count)


def _owned_by(pod: Obj, uid: str) -> bool:
    return any(as_dict(r).get("uid") == uid and as_dict(r).get("controller") is True
               for r in as_list(_meta(pod).get("ownerReferences")))


class DaemonSetReconciler:
    def __init__(self, clock: base_clock.Clock) -> None:
        self.clock = clock
        self.expectations = Expectations()
        self.written = history.Written()

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        daemonset = ctx.get(request)
        if daemonset is None:
            self.expectations.forget(request.key)
            self.written.forget(request.key)
            return runtime.Result.done()
        uid = str(_meta(daemonset).get("uid") or "")
        pods = [p for p in ctx.cache_for(POD).by_index("namespace", request.namespace)
                if _owned_by(p, uid)]
        if not self.expectations.satisfied(request.key, pods):
            return runtime.Result.after(CATCH_UP_DELAY)
        try:
            return await self._sync(request, ctx, daemonset, pods)
        except errors.Conflict:
            return runtime.Result(requeue=True)

    async def _sync(self, request: runtime.Request, ctx: runtime.Context, daemonset: Obj,
                    pods: list[Obj]) -> runtime.Result:
        spec = as_dict(daemonset.get("spec"))
        nodes = {_name(n): n for n in ctx.cache_for(NODE).list()}
        wanted = {name for name, node in nodes.items() if eligible(daemonset, node)}
        revision = template_hash(daemonset)
        deleting = bool(_meta(daemonset).get("deletionTimestamp"))
        if not deleting:
            live = {as_dict(_meta(p).get("labels")).get(HASH_LABEL) for p in pods}
            try:
                await history.sync(
                    ctx, daemonset, DAEMONSET, name=f"{_name(daemonset)}-{revision}",
                    hash_label=HASH_LABEL, hash_value=revision,
                    in_use=lambda r: as_dict(_meta(r).get("labels")).get(HASH_LABEL) in live,
                    written=self.written, key=request.key)
            except history.Collision:
                return runtime.Result.after(CATCH_UP_DELAY)
            except errors.Forbidden:
                return runtime.Result.done()  # the namespace is going
        by_node: dict[str, list[Obj]] = {}
        to_delete: list[tuple[Obj, bool]] = []  # (pod, at once)
        for pod in pods:
            if _meta(pod).get("deletionTimestamp"):
                continue
            node = target_node(pod)
            if node not in nodes:
                to_delete.append((pod, True))
            elif node not in wanted or as_dict(pod.get("status")).get("phase") == "Failed":
                to_delete.append((pod, False))
            else:
                by_node.setdefault(node, []).append(pod)
        for node, found in by_node.items():
            found.sort(key=lambda p: str(_meta(p).get("creationTimestamp") or ""))
            to_delete.extend((extra, False) for extra in found[1:])
            by_node[node] = found[:1]
        now = self.clock.now()
        min_ready = spec.get("minReadySeconds")
        min_ready = min_ready if isinstance(min_ready, int) and min_ready > 0 else 0
        wake: float | None = None

        def available(pod: Obj) -> bool:
            nonlocal wake
            since = _ready_since(pod)
            if since is None:
                return False
            if not min_ready or since.tzinfo is None:
                return True
            left = min_ready - (now - since).total_seconds()
            if left > 0:
                wake = left if wake is None else min(wake, left)
                return False
            return True

        current = {n: ps[0] for n, ps in by_node.items() if ps}
        to_create = sorted(n for n in wanted if n not in current) if not deleting else []
        # rolling update: old pods go, at most maxUnavailable unavailable at once
        strategy = as_dict(spec.get("updateStrategy")).get("type") or "RollingUpdate"
        if strategy == "RollingUpdate" and not deleting:
            budget = max_unavailable(spec, len(wanted))
            unavailable = len(to_create) + sum(1 for p in current.values()
                                               if not available(p))
            old = [(n, p) for n, p in sorted(current.items())
                   if as_dict(_meta(p).get("labels")).get(HASH_LABEL) != revision]
            for _node, pod in sorted(old, key=lambda np: available(np[1])):
                if not available(pod):
                    to_delete.append((pod, False))  # unavailable anyway: replace it now
                elif unavailable < budget:
                    to_delete.append((pod, False))
                    unavailable += 1
        status = {
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": sum(1 for n in current if n in wanted),
            "numberMisscheduled": sum(1 for p in pods if not _meta(p).get(
                "deletionTimestamp") and target_node(p) not in wanted),
            "numberReady": sum(1 for p in current.values() if _ready_since(p) is not None),
            "updatedNumberScheduled": sum(1 for p in current.values() if as_dict(
                _meta(p).get("labels")).get(HASH_LABEL) == revision),
            "numberAvailable": sum(1 for p in current.values() if available(p)),
            "observedGeneration": _meta(daemonset).get("generation") or 1,
        }
        status["numberUnavailable"] = max(0, len(wanted) - status["numberAvailable"])
        old_status = dict(as_dict(daemonset.get("status")))
        merged = {**{k: v for k, v in old_status.items() if k not in status}, **status}
        merged = {k: v for k, v in merged.items() if v != 0 or k in old_status}
        if merged != old_status:
            await ctx.client.update_status({**daemonset, "status": merged},
                                           resource=DAEMONSET)
        for pod, at_once in to_delete:
            self.expectations.deleted(request.key, _name(pod))
            try:
                await ctx.client.delete(POD, _name(pod), namespace=request.namespace,
                                        grace_period_seconds=0 if at_once else None)
                await ctx.recorder.normal(daemonset, "SuccessfulDelete",
                                          f"Deleted pod: {_name(pod)}")
            except errors.NotFound:
                pass
        for node in to_create:
            try:
                created = await ctx.client.create(pod_for(daemonset, node, revision),
                                                  namespace=request.namespace)
            except errors.Forbidden:
                break  # the namespace is going
            self.expectations.created(request.key, _name(created))
            await ctx.recorder.normal(daemonset, "SuccessfulCreate",
                                      f"Created pod: {_name(created)}")
        if wake is not None:
            return runtime.Result.after(wake + 0.01)
        return runtime.Result.done()


class DaemonSetsOfNode:
    """A node changed: every DaemonSet may want (or no longer want) a pod there."""

    def __init__(self) -> None:
        self.daemonsets: runtime.Cache | None = None

    def requests(self, node: Obj) -> Iterable[runtime.Request]:
        if self.daemonsets is None:
            return
        for ds in self.daemonsets.list():
            yield runtime.Request(str(_meta(ds).get("namespace") or ""), _name(ds))


def _daemonset_of_pod(pod: Obj) -> Iterable[runtime.Request]:
    namespace = str(_meta(pod).get("namespace") or "")
    for ref in as_list(_meta(pod).get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("kind") == "DaemonSet" and ref.get("controller") is True and \
                str(ref.get("apiVersion", "")).startswith("apps/") and ref.get("name"):
            yield runtime.Request(namespace, str(ref["name"]))


class _Reconcile:
    def __init__(self, inner: DaemonSetReconciler, mapper: DaemonSetsOfNode) -> None:
        self.inner, self.mapper = inner, mapper

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.mapper.daemonsets = ctx.cache
        return await self.inner(request, ctx)


def daemonset_controller(config: DaemonSetConfig | None = None, *,
                         clock: base_clock.Clock | None = None) -> runtime.Controller:
    config = config or DaemonSetConfig()
    mapper = DaemonSetsOfNode()
    reconciler = _Reconcile(DaemonSetReconciler(clock or base_clock.SystemClock()), mapper)
    return (runtime.Controller(for_=DAEMONSET, reconcile=reconciler, name="daemonset")
            .owns(history.CONTROLLER_REVISION)
            .watches(POD, _daemonset_of_pod)
            .watches(NODE, mapper)
            .with_options(workers=config.workers))
