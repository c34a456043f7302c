"""The scheduler's algorithm: which nodes a pod fits on, which one is best, and why none.

Pure, no I/O: :class:`SchedulingCache` keeps what the scheduler knows (nodes, and what the
pods bound or *assumed* to each node request); :func:`schedule` picks a node for one pod.

**Filters**, in the order of Kubernetes' default profile; a node fails at the first that
rejects it, with that filter's reason:

1. ``NodeUnschedulable``: ``spec.unschedulable`` (``kubectl cordon``), unless the pod
   tolerates ``node.kubernetes.io/unschedulable:NoSchedule`` — "node(s) were unschedulable";
2. ``TaintToleration``: a ``NoSchedule`` or ``NoExecute`` taint the pod does not tolerate —
   "node(s) had untolerated taint {key: value}". A node whose ``Ready`` condition is not
   ``True`` and that carries neither lifecycle taint yet (the node lifecycle controller adds
   them moments later) counts as tainted ``node.kubernetes.io/not-ready:NoSchedule``
   (``unreachable`` when ``Unknown``): so a node that is not ready takes only pods that
   tolerate that, as in Kubernetes;
3. ``NodeAffinity``: ``nodeSelector`` and required node affinity —
   "node(s) didn't match Pod's node affinity/selector";
4. ``NodeResourcesFit``: every resource the pod requests (cpu, memory, extended) must fit
   in ``allocatable`` minus what the pods on the node request — "Insufficient cpu" (one
   reason per resource short) — and the node must take one more pod — "Too many pods".

**Scores** of the nodes that pass, as Kubernetes weighs its default plugins:
``NodeResourcesFit`` least-allocated (0-100, the mean over cpu and memory of the free
fraction left after placing the pod, counted with
:func:`~setpoint.controllers.podresources.non_zero_requests`) x 1; ``TaintToleration``
(fewer untolerated ``PreferNoSchedule`` taints is better, normalised to 0-100) x 3;
``NodeAffinity`` preferred terms (normalised to 0-100) x 2. The highest total wins; ties
go to the node whose name sorts first (Kubernetes picks at random: this keeps decisions
reproducible).

**Why none**: :func:`fit_error` words it as Kubernetes' ``FitError``: ``0/3 nodes are
available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector.``
(reasons counted, each ``"<count> <reason>"``, sorted as strings).

Not done (Kubernetes does): preemption, pod affinity and anti-affinity, topology spread
constraints, host ports, volume topology, image locality, balanced allocation.

Invariants of :class:`SchedulingCache`: a node's requested totals always equal the sum over
the pods counted on it (bound and not terminal, or assumed); an assumed pod stays counted
until the pod, seen with that ``nodeName``, replaces the assumption (or it is forgotten, or
the pod deleted), so a slow watch never lets two pods take the same room.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint.controllers import nodeaffinity, podresources, taints
from setpoint.controllers.podresources import CPU, MEMORY, PODS, Resources

Obj = Mapping[str, Any]

UNSCHEDULABLE_REASON: Final = "node(s) were unschedulable"
AFFINITY_REASON: Final = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS: Final = "Too many pods"
NO_NODES: Final = "no nodes available to schedule pods"

#: the weights of the scores (Kubernetes' default profile)
FIT_WEIGHT: Final = 1
TAINT_WEIGHT: Final = 3
AFFINITY_WEIGHT: Final = 2
MAX_SCORE: Final = 100

TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _spec(obj: Obj) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def name_of(obj: Obj) -> str:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else ""


def pod_key(pod: Obj) -> str:
    return f"{_meta(pod).get('namespace') or ''}/{name_of(pod)}"


def node_name_of(pod: Obj) -> str:
    name = _spec(pod).get("nodeName")
    return name if isinstance(name, str) else ""


def is_terminal(pod: Obj) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in TERMINAL_PHASES


def ready_status(node: Obj) -> str:
    """The status of the node's ``Ready`` condition ("True", "False", "Unknown"); a node
    that reports none is "Unknown"."""
    status = node.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in taints.items(conditions):
        if condition.get("type") == "Ready":
            value = condition.get("status")
            return value if value in ("True", "False") else "Unknown"
    return "Unknown"


def effective_taints(node: Obj) -> list[Obj]:
    """The node's taints, plus the lifecycle taint a node that is not ready will get."""
    own = taints.node_taints(node)
    status = ready_status(node)
    if status != "True" and not any(t.get("key") in (taints.NOT_READY, taints.UNREACHABLE)
                                    for t in own):
        key = taints.NOT_READY if status == "False" else taints.UNREACHABLE
        return [*own, {"key": key, "effect": taints.NO_SCHEDULE}]
    return own


@dataclass(slots=True)
class _Counted:
    node: str
    requests: Resources
    non_zero: Resources
    assumed: bool


@dataclass(slots=True)
class NodeInfo:
    """One node and what the pods counted on it request."""

    node: Obj
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    non_zero: Resources = field(default_factory=dict)
    pods: int = 0

    @property
    def name(self) -> str:
        return name_of(self.node)


class SchedulingCache:
    """Nodes and per-node requested totals; see the module docstring."""

    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        #: pod key -> what it counts for, on which node
        self._pods: dict[str, _Counted] = {}
        #: node name -> totals of pods counted on a node not (yet) known
        self._orphans: dict[str, NodeInfo] = {}

    # nodes

    def set_node(self, node: Obj) -> None:
        name = name_of(node)
        info = self._nodes.get(name) or self._orphans.pop(name, None)
        if info is None:
            info = NodeInfo(node=node, allocatable=podresources.allocatable(node))
        else:
            info.node = node
            info.allocatable = podresources.allocatable(node)
        self._nodes[name] = info

    def remove_node(self, name: str) -> None:
        info = self._nodes.pop(name, None)
        if info is not None and info.pods:
            self._orphans[name] = info  # its pods still count, should it come back

    def nodes(self) -> list[NodeInfo]:
        return list(self._nodes.values())

    def node(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    # pods

    def _info(self, node: str) -> NodeInfo:
        info = self._nodes.get(node) or self._orphans.get(node)
        if info is None:
            info = self._orphans[node] = NodeInfo(node={"metadata": {"name": node}},
                                                  allocatable={})
        return info

    def _count(self, key: str, counted: _Counted) -> None:
        self._uncount(key)
        info = self._info(counted.node)
        podresources.add(info.requested, counted.requests)
        podresources.add(info.non_zero, counted.non_zero)
        info.pods += 1
        self._pods[key] = counted

    def _uncount(self, key: str) -> _Counted | None:
        counted = self._pods.pop(key, None)
        if counted is None:
            return None
        info = self._info(counted.node)
        podresources.add(info.requested, counted.requests, -1)
        podresources.add(info.non_zero, counted.non_zero, -1)
        info.pods -= 1
        if counted.node in self._orphans and info.pods == 0:
            del self._orphans[counted.node]
        return counted

    def observe_pod(self, pod: Obj) -> None:
        """A pod as the watch shows it (added or updated)."""
        key = pod_key(pod)
        node = node_name_of(pod)
        current = self._pods.get(key)
        if node and not is_terminal(pod):
            self._count(key, _Counted(node, podresources.pod_requests(pod),
                                      podresources.non_zero_requests(pod), False))
        elif not node and current is not None and current.assumed:
            return  # the binding is not visible yet: keep the assumption
        else:
            self._uncount(key)

    def remove_pod(self, key: str) -> None:
        self._uncount(key)

    def assume(self, pod: Obj, node: str) -> None:
        """Count ``pod`` on ``node`` before its binding is seen."""
        self._count(pod_key(pod), _Counted(node, podresources.pod_requests(pod),
                                           podresources.non_zero_requests(pod), True))

    def forget(self, pod: Obj) -> None:
        """Drop an assumption (the binding failed)."""
        counted = self._pods.get(pod_key(pod))
        if counted is not None and counted.assumed:
            self._uncount(pod_key(pod))

    def is_assumed(self, key: str) -> bool:
        counted = self._pods.get(key)
        return counted is not None and counted.assumed

    def counted(self) -> Iterator[tuple[str, str, bool]]:
        """(pod key, node, assumed) of every pod counted: for checks and tests."""
        for key, counted in self._pods.items():
            yield key, counted.node, counted.assumed

    def totals(self, node: str) -> tuple[Resources, Resources, int]:
        info = self._nodes.get(node) or self._orphans.get(node)
        if info is None:
            return {}, {}, 0
        return dict(info.requested), dict(info.non_zero), info.pods


def filter_reasons(pod: Obj, info: NodeInfo, requests: Resources | None = None) -> list[str]:
    """Why ``pod`` cannot go to the node (empty: it can); see the module docstring."""
    node = info.node
    tolerations = taints.pod_tolerations(pod)
    if _spec(node).get("unschedulable") is True and not taints.tolerated(
            {"key": taints.UNSCHEDULABLE, "effect": taints.NO_SCHEDULE}, tolerations):
        return [UNSCHEDULABLE_REASON]
    taint = taints.first_untolerated(effective_taints(node), tolerations)
    if taint is not None:
        return [taints.untolerated_reason(taint)]
    if not nodeaffinity.required_matches(pod, node):
        return [AFFINITY_REASON]
    return fit_reasons(pod, info, requests)


def fit_reasons(pod: Obj, info: NodeInfo, requests: Resources | None = None) -> list[str]:
    """NodeResourcesFit: "Too many pods" and one "Insufficient <resource>" per resource."""
    reasons: list[str] = []
    if info.pods + 1 > info.allocatable.get(PODS, 0):
        reasons.append(TOO_MANY_PODS)
    wanted = podresources.pod_requests(pod) if requests is None else requests
    for name in sorted(wanted):
        if name == PODS:
            continue
        want = wanted[name]
        if want > 0 and want > info.allocatable.get(name, 0) - info.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


def least_allocated(info: NodeInfo, non_zero: Resources) -> int:
    """0-100: the mean free fraction of cpu and memory once the pod is placed."""
    scores = []
    for name in (CPU, MEMORY):
        capacity = info.allocatable.get(name, 0)
        used = info.non_zero.get(name, 0) + non_zero.get(name, 0)
        if capacity <= 0 or used > capacity:
            scores.append(0)
        else:
            scores.append((capacity - used) * MAX_SCORE // capacity)
    return sum(scores) // len(scores)


def _normalise(raw: Mapping[str, int], *, reverse: bool) -> dict[str, int]:
    """Scale to 0-100 by the largest raw value (Kubernetes' ``DefaultNormalizeScore``)."""
    top = max(raw.values(), default=0)
    out = {}
    for name, value in raw.items():
        if top == 0:
            out[name] = MAX_SCORE if reverse else 0
        else:
            scaled = value * MAX_SCORE // top
            out[name] = MAX_SCORE - scaled if reverse else scaled
    return out


def scores(pod: Obj, feasible: Iterable[NodeInfo]) -> dict[str, int]:
    """The weighted total score of each feasible node, by name."""
    nodes = list(feasible)
    non_zero = podresources.non_zero_requests(pod)
    tolerations = taints.pod_tolerations(pod)
    fit = {i.name: least_allocated(i, non_zero) for i in nodes}
    taint = _normalise({i.name: taints.intolerable_preferences(taints.node_taints(i.node),
                                                              tolerations) for i in nodes},
                       reverse=True)
    affinity = _normalise({i.name: max(0, nodeaffinity.preferred_score(pod, i.node))
                           for i in nodes}, reverse=False)
    return {name: FIT_WEIGHT * fit[name] + TAINT_WEIGHT * taint[name]
            + AFFINITY_WEIGHT * affinity[name] for name in fit}


@dataclass(frozen=True, slots=True)
class Decision:
    """A node for the pod (``node``), or why there is none (``reasons``: reason -> nodes)."""

    node: str | None
    nodes: int
    reasons: Mapping[str, int]
    scores: Mapping[str, int]

    @property
    def message(self) -> str:
        return fit_error(self.nodes, self.reasons)


def fit_error(nodes: int, reasons: Mapping[str, int]) -> str:
    """Kubernetes' ``FitError`` message."""
    if nodes == 0:
        return NO_NODES
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{nodes} nodes are available: {', '.join(parts)}."


def schedule(pod: Obj, cache: SchedulingCache) -> Decision:
    """Pick a node for ``pod`` (see the module docstring); nothing is assumed here."""
    infos = cache.nodes()
    requests = podresources.pod_requests(pod)
    reasons: dict[str, int] = {}
    feasible: list[NodeInfo] = []
    for info in infos:
        failed = filter_reasons(pod, info, requests)
        if not failed:
            feasible.append(info)
        for reason in failed:
            reasons[reason] = reasons.get(reason, 0) + 1
    if not feasible:
        return Decision(None, len(infos), reasons, {})
    totals = scores(pod, feasible)
    best = min(totals, key=lambda name: (-totals[name], name))
    return Decision(best, len(infos), {}, totals)
