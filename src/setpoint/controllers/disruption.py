"""The disruption controller: the status of every PodDisruptionBudget.

As Kubernetes' disruption controller, for each budget:

- its **pods** are those of its namespace that its selector matches (an empty selector
  matches every pod, a missing one none);
- **expectedPods** and **desiredHealthy**: with ``minAvailable`` an integer, the number of
  pods and ``minAvailable``; with ``maxUnavailable`` or a percentage, the sum of the scales
  of the controllers that own the pods (a ReplicaSet's ``spec.replicas``, or its
  Deployment's when a Deployment controls it, a StatefulSet's, or any other owner's
  ``/scale`` subresource), each controller once, and ``desiredHealthy`` is that minus
  ``maxUnavailable`` (a percentage rounded up, never below 0) or ``minAvailable`` of it
  (rounded up). Pods with no controller are left out of the scale (an ``UnmanagedPods``
  Warning event says so); an owner with no scale is an error;
- **currentHealthy**: pods Ready, not being deleted and not in ``disruptedPods``;
- **disruptedPods**: the evictions the server granted whose pods are not yet being deleted,
  each forgotten :attr:`DisruptionConfig.deletion_timeout` seconds after it was granted
  (Kubernetes: two minutes; the budget is looked at again then);
- **disruptionsAllowed**: ``currentHealthy - desiredHealthy``, or 0 when negative or when
  there are no expected pods; ``observedGeneration``; the ``DisruptionAllowed`` condition
  (True ``SufficientPods`` / False ``InsufficientPods``).

A second controller, ``disruption-pods`` (same identity), resets to False the
``DisruptionTarget`` condition of a pod that still runs
:attr:`DisruptionConfig.stale_condition_timeout` seconds after it was set (an eviction whose
deletion failed), unless the node agent set it or the pod has finished (Kubernetes'
``syncStalePodDisruption``).

When the expected count cannot be computed (an owner without a scale), the budget is made
safe: ``disruptionsAllowed: 0`` and ``DisruptionAllowed`` False with reason ``SyncFailed``
and the error as message (Kubernetes' ``failSafe``). The status is written only when it
changes.

It acts as ``system:serviceaccount:kube-system:disruption-controller``.

Non-guarantees: a pod whose labels change so that a budget no longer selects it requeues
only the budgets that select it now (the old one is recomputed at its next event); the
stale ``DisruptionTarget`` condition of pods that were not deleted after all is not reset.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, intstr, timeutil
from setpoint.apimachinery.selectors import LabelSelector
from setpoint.runtime.conditions import MAX_MESSAGE

Obj = Mapping[str, Any]

PDB: Final = ("policy/v1", "PodDisruptionBudget")
POD: Final = ("v1", "Pod")
REPLICA_SET: Final = ("apps/v1", "ReplicaSet")
DEPLOYMENT: Final = ("apps/v1", "Deployment")
STATEFUL_SET: Final = ("apps/v1", "StatefulSet")
CONDITION: Final = "DisruptionAllowed"
DISRUPTION_TARGET: Final = "DisruptionTarget"
#: the reason of a ``DisruptionTarget`` the node agent sets (never stale)
BY_KUBELET: Final = "TerminationByKubelet"


@dataclass(frozen=True, slots=True, kw_only=True)
class DisruptionConfig:
    workers: int = 2
    #: seconds after which a granted eviction whose pod is still not being deleted is
    #: forgotten (the pod counts as healthy again)
    deletion_timeout: float = 120.0
    #: seconds after which a pod's ``DisruptionTarget`` condition, set by an eviction whose
    #: pod was not deleted after all, is reset to False
    stale_condition_timeout: float = 120.0


class SyncFailed(Exception):
    """The budget's expected pods cannot be computed (the message says why)."""


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return _d(obj.get("metadata"))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _labels(obj: Obj) -> dict[str, str]:
    return {str(k): str(v) for k, v in _d(_meta(obj).get("labels")).items()}


def budget_selector(budget: Obj) -> LabelSelector | None:
    """The budget's selector; None (selects nothing) when missing or malformed."""
    raw = _d(budget.get("spec")).get("selector")
    if not isinstance(raw, Mapping):
        return None
    try:
        return LabelSelector.from_dict(dict(raw))
    except errors.ApiError:
        return None


def selects(budget: Obj, labels: dict[str, str]) -> bool:
    selector = budget_selector(budget)
    return selector is not None and selector.matches(labels)


def pod_ready(pod: Obj) -> bool:
    return any(_d(c).get("type") == "Ready" and _d(c).get("status") == "True"
               for c in _d(pod.get("status")).get("conditions") or ())


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def scaled(value: Any, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounded up."""
    return intstr.scaled(value, total, round_up=True)


def desired_healthy(spec: Obj, expected: int) -> int:
    """What a budget with ``spec`` wants healthy out of ``expected`` pods (scaled case)."""
    if spec.get("maxUnavailable") is not None:
        return max(expected - scaled(spec.get("maxUnavailable"), expected), 0)
    return scaled(spec.get("minAvailable"), expected)


def uses_scale(spec: Obj) -> bool:
    """Whether the expected count comes from the owners' scale (not the number of pods)."""
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def disrupted_map(budget: Obj, pods: Iterable[Obj], now: datetime, timeout: float
                  ) -> tuple[dict[str, str], float | None]:
    """The ``disruptedPods`` to keep and in how many seconds the oldest one expires."""
    recorded = _d(_d(budget.get("status")).get("disruptedPods"))
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in pods:
        name = str(_meta(pod).get("name"))
        if _meta(pod).get("deletionTimestamp") or name not in recorded:
            continue
        try:
            when = timeutil.parse_time(str(recorded[name]))
        except ValueError:
            continue
        left = timeout - (now - when).total_seconds()
        if left > 0:
            kept[name] = str(recorded[name])
            recheck = left if recheck is None else min(recheck, left)
    return kept, recheck


def count_healthy(pods: Iterable[Obj], disrupted: Mapping[str, str]) -> int:
    return sum(1 for p in pods if not _meta(p).get("deletionTimestamp")
               and str(_meta(p).get("name")) not in disrupted and pod_ready(p))


def allowed_condition(status: Mapping[str, Any], old: Any, now: datetime) -> list[dict[str, Any]]:
    allowed = _int(status.get("disruptionsAllowed")) > 0
    return runtime.set_condition(
        [c for c in old or () if isinstance(c, Mapping)],
        runtime.Condition(type=CONDITION, status=allowed,
                          reason="SufficientPods" if allowed else "InsufficientPods",
                          observed_generation=_int(status.get("observedGeneration"))),
        now=now)


def budget_status(budget: Obj, *, current: int, desired: int, expected: int,
                  disrupted: Mapping[str, str], now: datetime) -> dict[str, Any]:
    """The status Kubernetes' ``updatePdbStatus`` writes."""
    allowed = current - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status: dict[str, Any] = {"observedGeneration": _int(_meta(budget).get("generation")),
                              "disruptionsAllowed": allowed, "currentHealthy": current,
                              "desiredHealthy": desired, "expectedPods": expected}
    if disrupted:
        status["disruptedPods"] = dict(disrupted)
    status["conditions"] = allowed_condition(status, _d(budget.get("status")).get(
        "conditions"), now)
    return status


def fail_safe(budget: Obj, message: str, now: datetime) -> dict[str, Any]:
    """Kubernetes' ``failSafe``: the old status with no disruption allowed."""
    status = dict(_d(budget.get("status")))
    status["disruptionsAllowed"] = 0
    status["conditions"] = runtime.set_condition(
        [c for c in status.get("conditions") or () if isinstance(c, Mapping)],
        runtime.Condition(type=CONDITION, status=False, reason="SyncFailed",
                          message=message[:MAX_MESSAGE],
                          observed_generation=_int(status.get("observedGeneration"))),
        now=now)
    return status


class BudgetsOfObject:
    """Maps a pod (by its labels) or a workload (by its template's) to the budgets of its
    namespace that select it; reads the budget cache it is given on the first reconcile."""

    def __init__(self, template: bool) -> None:
        self.template = template
        self.budgets: runtime.Cache | None = None

    def requests(self, obj: Obj) -> Iterable[runtime.Request]:
        if self.budgets is None:
            return
        namespace = str(_meta(obj).get("namespace") or "")
        labels = _labels(_d(_d(obj.get("spec")).get("template"))) if self.template \
            else _labels(obj)
        for budget in self.budgets.by_index("namespace", namespace):
            if selects(budget, labels):
                yield runtime.Request(namespace, str(_meta(budget).get("name")))


class DisruptionReconciler:
    def __init__(self, config: DisruptionConfig, clock: base_clock.Clock,
                 mappers: Iterable[BudgetsOfObject]) -> None:
        self.config = config
        self.clock = clock
        self.mappers = list(mappers)

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        for mapper in self.mappers:
            mapper.budgets = ctx.cache
        budget = ctx.get(request)
        if budget is None:
            return runtime.Result.done()
        now = self.clock.now()
        pods = [p for p in ctx.cache_for(POD).by_index("namespace", request.namespace)
                if selects(budget, _labels(p))]
        spec = _d(budget.get("spec"))
        recheck: float | None = None
        events: list[tuple[str, str, str]] = []
        try:
            if uses_scale(spec):
                expected, unmanaged = await self._expected_scale(pods, request.namespace, ctx)
                desired = desired_healthy(spec, expected)
                if unmanaged:
                    events.append(("Warning", "UnmanagedPods", (
                        f"Pods selected by this PodDisruptionBudget (selector: "
                        f"{budget_selector(budget)}) were found to be unmanaged. As a result, "
                        "the status of the PDB cannot be calculated correctly, which may "
                        "result in undefined behavior. To account for these pods please set "
                        '".spec.minAvailable" field of the PDB to an integer value.')))
            else:
                minimum = spec.get("minAvailable")
                desired = _int(minimum) if minimum is not None else 0
                expected = len(pods)
        except SyncFailed as e:
            events.append(("Warning", "CalculateExpectedPodCountFailed",
                           f"Failed to calculate the number of expected pods: {e}"))
            status = fail_safe(budget, str(e), now)
        else:
            disrupted, recheck = disrupted_map(budget, pods, now, self.config.deletion_timeout)
            status = budget_status(budget, current=count_healthy(pods, disrupted),
                                   desired=desired, expected=expected, disrupted=disrupted,
                                   now=now)
        if not pods:
            events.append(("Normal", "NoPods", "No matching pods found"))
        if status != _d(budget.get("status")):
            try:
                await ctx.client.update_status({**budget, "status": status}, resource=PDB)
            except errors.Conflict:
                return runtime.Result(requeue=True)
            except errors.NotFound:
                return runtime.Result.done()
            for kind, reason, message in events:
                if kind == "Warning":
                    await ctx.recorder.warning(budget, reason, message)
                else:
                    await ctx.recorder.normal(budget, reason, message)
        if recheck is not None:
            return runtime.Result.after(math.ceil(recheck * 1000) / 1000 + 0.05)
        return runtime.Result.done()

    async def _expected_scale(self, pods: list[Obj], namespace: str, ctx: runtime.Context
                              ) -> tuple[int, list[str]]:
        scales: dict[str, int] = {}
        unmanaged: list[str] = []
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                unmanaged.append(str(_meta(pod).get("name")))
                continue
            if str(ref.get("uid")) in scales:
                continue
            found = await self._scale_of(ref, namespace, ctx)
            if found is None:
                raise SyncFailed(f'found no controllers for pod "{_meta(pod).get("name")}"')
            scales[found[0]] = found[1]
        return sum(scales.values()), unmanaged

    async def _scale_of(self, ref: Mapping[str, Any], namespace: str, ctx: runtime.Context
                        ) -> tuple[str, int] | None:
        """The (uid, scale) of the controller ``ref`` names: a ReplicaSet (or the Deployment
        controlling it), a StatefulSet, or anything with a ``/scale`` subresource."""
        api_version, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
        uid = str(ref.get("uid"))
        key = f"{namespace}/{name}"
        if (api_version, kind) == REPLICA_SET:
            rs = ctx.cache_for(REPLICA_SET).get(key)
            if rs is not None and str(_meta(rs).get("uid")) == uid:
                owner = controller_ref(rs)
                if owner is None or (owner.get("apiVersion"), owner.get("kind")) != DEPLOYMENT:
                    return uid, _int(_d(rs.get("spec")).get("replicas"))
                deployment = ctx.cache_for(DEPLOYMENT).get(f"{namespace}/{owner.get('name')}")
                if deployment is not None and \
                        _meta(deployment).get("uid") == owner.get("uid"):
                    return (str(owner.get("uid")),
                            _int(_d(deployment.get("spec")).get("replicas")))
                return None
        if (api_version, kind) == STATEFUL_SET:
            sts = ctx.cache_for(STATEFUL_SET).get(key)
            if sts is not None and str(_meta(sts).get("uid")) == uid:
                return uid, _int(_d(sts.get("spec")).get("replicas"))
        if not isinstance(api_version, str) or not isinstance(kind, str) or \
                not isinstance(name, str):
            return None
        try:
            scale = await ctx.client.get((api_version, kind), name, namespace=namespace,
                                         subresource="scale")
        except (errors.ApiError, LookupError, ValueError):
            return None
        if str(_meta(scale).get("uid") or uid) != uid:
            return None
        return uid, _int(_d(scale.get("spec")).get("replicas"))


def stale_target(pod: Obj, now: datetime, timeout: float) -> float | None:
    """None when the pod has no ``DisruptionTarget`` condition that may go stale; else the
    seconds until it is stale (0: now)."""
    if _meta(pod).get("deletionTimestamp") or \
            _d(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
        return None
    for cond in _d(pod.get("status")).get("conditions") or ():
        cond = _d(cond)
        if cond.get("type") != DISRUPTION_TARGET:
            continue
        if cond.get("status") != "True" or cond.get("reason") == BY_KUBELET:
            return None
        try:
            since = timeutil.parse_time(str(cond.get("lastTransitionTime")))
        except ValueError:
            return 0.0
        return max(timeout - (now - since).total_seconds(), 0.0)
    return None


def reset_target(pod: Obj, now: datetime) -> dict[str, Any]:
    """The pod with its ``DisruptionTarget`` condition False (``UpdatePodCondition``: the
    reason and message go, the transition time is now)."""
    status = dict(_d(pod.get("status")))
    status["conditions"] = [
        {"type": DISRUPTION_TARGET, "status": "False", "lastProbeTime": None,
         "lastTransitionTime": timeutil.format_time(now)}
        if _d(c).get("type") == DISRUPTION_TARGET else c
        for c in status.get("conditions") or ()]
    return {**pod, "status": status}


class StaleTargetReconciler:
    def __init__(self, config: DisruptionConfig, clock: base_clock.Clock) -> None:
        self.config = config
        self.clock = clock

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        pod = ctx.get(request)
        if pod is None:
            return runtime.Result.done()
        now = self.clock.now()
        wait = stale_target(pod, now, self.config.stale_condition_timeout)
        if wait is None:
            return runtime.Result.done()
        if wait > 0:
            return runtime.Result.after(wait + 0.05)
        try:
            await ctx.client.update_status(reset_target(pod, now), resource=POD)
        except errors.Conflict:
            return runtime.Result(requeue=True)
        except errors.NotFound:
            pass
        return runtime.Result.done()


def stale_target_controller(config: DisruptionConfig | None = None, *,
                            clock: base_clock.Clock | None = None) -> runtime.Controller:
    config = config or DisruptionConfig()
    return (runtime.Controller(for_=POD, name="disruption-pods",
                               reconcile=StaleTargetReconciler(
                                   config, clock or base_clock.SystemClock()))
            .with_options(workers=config.workers))


def disruption_controller(config: DisruptionConfig | None = None, *,
                          clock: base_clock.Clock | None = None) -> runtime.Controller:
    config = config or DisruptionConfig()
    pods, workloads = BudgetsOfObject(template=False), BudgetsOfObject(template=True)
    reconciler = DisruptionReconciler(config, clock or base_clock.SystemClock(),
                                      (pods, workloads))
    return (runtime.Controller(for_=PDB, reconcile=reconciler, name="disruption")
            .watches(POD, pods)
            .watches(REPLICA_SET, workloads)
            .watches(DEPLOYMENT, workloads)
            .watches(STATEFUL_SET, workloads)
            .with_options(workers=config.workers))


__all__ = ["DisruptionConfig", "DisruptionReconciler", "StaleTargetReconciler",
           "budget_status", "desired_healthy", "disrupted_map", "disruption_controller",
           "fail_safe", "reset_target", "stale_target", "stale_target_controller"]
