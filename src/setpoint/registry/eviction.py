"""The ``pods/eviction`` subresource: a deletion that respects PodDisruptionBudgets.

``POST .../pods/NAME/eviction`` with a policy/v1 (or v1beta1) Eviction, as Kubernetes'
``EvictionREST``:

1. A pod that is ``Pending``, ``Succeeded`` or ``Failed``, or already being deleted, is deleted
   without looking at budgets (a pending pod with a precondition on the resourceVersion read,
   so that it cannot become ready unnoticed). A pod being deleted is a success with nothing
   done.
2. Otherwise the budgets of the pod's namespace whose selector (not empty) matches its labels
   are found: none → the pod is deleted; more than one → ``500`` "This pod has more than one
   PodDisruptionBudget, which the eviction subresource does not support.".
3. A pod that is not Ready is deleted without spending the budget when the budget's
   ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or when the budget is met
   (``currentHealthy >= desiredHealthy > 0``, the ``IfHealthyBudget`` default); the deletion
   then carries a precondition on the pod's resourceVersion, and a pod that changed meanwhile
   is a ``429`` (try again).
4. Otherwise the budget is checked and decremented in one compare-and-swap of its status
   (a conflicting write means a fresh read and another try, as ``RetryOnConflict``):
   not yet observed by the disruption controller (``observedGeneration < generation``) →
   ``429`` "Cannot evict pod as it would violate the pod's disruption budget." with the
   cause "The disruption budget NAME is still being processed by the server.";
   ``disruptionsAllowed`` 0 → the same ``429`` with the cause "The disruption budget NAME
   needs D healthy pods and has C currently"; negative, or more than
   :data:`MAX_DISRUPTED_PODS` entries in ``disruptedPods`` → ``403``. Else
   ``disruptionsAllowed`` goes down by one, the ``DisruptionAllowed`` condition turns False
   when it reaches 0, and the pod is recorded in ``disruptedPods`` with the time (so the
   controller does not count it healthy while it goes). The pod is then deleted with the
   Eviction's ``deleteOptions``.

Before every deletion (not in dry-run) the pod gets the ``DisruptionTarget`` condition
(reason ``EvictionByEvictionAPI``). Dry-run (``?dryRun=All`` or ``deleteOptions.dryRun``)
checks everything and writes nothing. Answer: a ``Success`` Status, 201.

Non-guarantees: the budget's decrement and the pod's deletion are two writes; a failure
between them leaves the budget spent until the disruption controller recomputes it (as in
Kubernetes, where the controller forgets ``disruptedPods`` entries after two minutes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

from setpoint.apimachinery import errors, selectors
from setpoint.apimachinery.jsonshape import as_dict
from setpoint.registry import actions, podactions
from setpoint.registry.disruptionbudgets import ALWAYS_ALLOW
from setpoint.registry.options import DeleteOptions, ListOptions, WriteOptions
from setpoint.registry.store import Store

Obj = dict[str, Any]

#: most ``disruptedPods`` entries a budget may hold before evictions are refused (pods the
#: server let go that the disruption controller has not seen go yet)
MAX_DISRUPTED_PODS: Final = 2000
VIOLATION: Final = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_BUDGETS: Final = ("This pod has more than one PodDisruptionBudget, which the eviction "
                       "subresource does not support.")
DISRUPTION_BUDGET_CAUSE: Final = "DisruptionBudget"
DISRUPTION_TARGET: Final = "DisruptionTarget"


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionConfig:
    """How often a pod read again after a conflicting write is tried (Kubernetes: 20)."""

    attempts: int = 20



def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pod_ready(pod: Obj) -> bool:
    return any(as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True"
               for c in as_dict(pod.get("status")).get("conditions") or ())


def can_ignore_budget(pod: Obj) -> bool:
    """Pods whose eviction needs no budget: not started, finished, or already going."""
    return as_dict(pod.get("status")).get("phase") in ("Pending", "Succeeded", "Failed") or \
        bool(as_dict(pod.get("metadata")).get("deletionTimestamp"))


def must_hold_version(pod: Obj) -> bool:
    """Whether the deletion must hold the pod's resourceVersion (it could become ready)."""
    return as_dict(pod.get("status")).get("phase") not in ("Succeeded", "Failed") and \
        not as_dict(pod.get("metadata")).get("deletionTimestamp")


def budget_selects(budget: Obj, labels: dict[str, str]) -> bool:
    """A budget's selector matches ``labels``; a missing, empty or malformed one never does
    (for eviction: the disruption controller reads an empty one as "every pod")."""
    raw = as_dict(budget.get("spec")).get("selector")
    if not isinstance(raw, dict):
        return False
    try:
        selector = selectors.LabelSelector.from_dict(raw)
    except errors.ApiError:
        return False
    return not selector.empty and selector.matches(labels)


def too_many_requests(cause: str, retry_after: int | None) -> errors.TooManyRequests:
    return errors.TooManyRequests(VIOLATION, retry_after=retry_after or None, details={
        "causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]})


def still_processing(name: str) -> errors.TooManyRequests:
    return too_many_requests(f"The disruption budget {name} is still being processed by the "
                             "server.", 10)


def _forbidden(name: str, why: str) -> errors.Forbidden:
    return errors.Forbidden(f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
                            details={"name": name, "group": "policy",
                                     "kind": "poddisruptionbudget"})


def check_budget(budget: Obj) -> None:
    """Raise what Kubernetes answers when ``budget`` allows no eviction now."""
    meta, status = as_dict(budget.get("metadata")), as_dict(budget.get("status"))
    name = str(meta.get("name") or "")
    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        raise still_processing(name)
    allowed = _int(status.get("disruptionsAllowed"))
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(as_dict(status.get("disruptedPods"))) > MAX_DISRUPTED_PODS:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed "
                               "by PDB controller")
    if allowed == 0:
        raise too_many_requests(
            f"The disruption budget {name} needs {_int(status.get('desiredHealthy'))} healthy "
            f"pods and has {_int(status.get('currentHealthy'))} currently", None)


def spend(budget: Obj, pod_name: str, now: str) -> None:
    """Check ``budget`` and take one disruption from it for ``pod_name`` (in place)."""
    check_budget(budget)
    status = budget.setdefault("status", {})
    status["disruptionsAllowed"] = _int(status.get("disruptionsAllowed")) - 1
    if status["disruptionsAllowed"] == 0:
        set_allowed_condition(status, now)
    disrupted = status.get("disruptedPods")
    status["disruptedPods"] = {**(disrupted if isinstance(disrupted, dict) else {}),
                               pod_name: now}


def set_allowed_condition(status: Obj, now: str) -> None:
    """The ``DisruptionAllowed`` condition as ``disruptionsAllowed`` says (in place)."""
    allowed = _int(status.get("disruptionsAllowed")) > 0
    wanted = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
              "reason": "SufficientPods" if allowed else "InsufficientPods", "message": "",
              "observedGeneration": _int(status.get("observedGeneration"))}
    set_condition(status, wanted, now)


def set_condition(status: Obj, wanted: Obj, now: str) -> None:
    """``meta.SetStatusCondition``: the transition time moves only when the status does."""
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    for cond in conditions:
        if cond.get("type") == wanted["type"]:
            if cond.get("status") != wanted["status"]:
                cond["lastTransitionTime"] = now
            cond.update({k: v for k, v in wanted.items() if k != "type"})
            cond.setdefault("lastTransitionTime", now)
            break
    else:
        conditions.append({**wanted, "lastTransitionTime": now})
    status["conditions"] = conditions


class Evictor:
    """Evicts pods of ``pods`` through the budgets of ``budgets``."""

    def __init__(self, pods: Store, budgets: Store, *,
                 config: EvictionConfig | None = None) -> None:
        self.pods = pods
        self.budgets = budgets
        self.config = config or EvictionConfig()

    async def __call__(self, req: actions.ActionRequest) -> Obj:
        if req.namespace is None:
            raise errors.path_not_found()
        body = podactions.eviction_body(req.body)
        podactions.check_name(body, req.name, "Eviction")
        opts = podactions.delete_options(body.get("deleteOptions"), req.dry_run)
        namespace = req.namespace
        pod: Obj = {}
        for attempt in range(max(self.config.attempts, 1)):
            pod = await self.pods.get(namespace, req.name, "v1")
            if not can_ignore_budget(pod):
                break
            if as_dict(pod.get("metadata")).get("deletionTimestamp"):
                return dict(podactions.SUCCESS)
            held = opts
            if must_hold_version(pod) and opts.precondition_resource_version is None:
                held = _with_version(opts, pod)
            try:
                await self._delete(namespace, req.name, held)
            except errors.Conflict:
                if opts.precondition_resource_version is not None or \
                        attempt + 1 >= self.config.attempts:
                    raise
                continue
            return dict(podactions.SUCCESS)
        labels = {str(k): str(v) for k, v in
                  as_dict(as_dict(pod.get("metadata")).get("labels")).items()}
        page = await self.budgets.list(namespace, "v1", ListOptions())
        matching = [b for b in page.items if budget_selects(b, labels)]
        if len(matching) > 1:
            raise errors.ApiError(MANY_BUDGETS, code=500, reason="")
        hold_version = False
        if matching:
            budget = matching[0]
            name = str(as_dict(budget.get("metadata")).get("name"))
            status = as_dict(budget.get("status"))
            if not pod_ready(pod) and (
                    as_dict(budget.get("spec")).get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW
                    or _int(status.get("currentHealthy")) >= _int(status.get("desiredHealthy"))
                    > 0):
                hold_version = True
            elif opts.dry_run:
                check_budget(await self.budgets.get(namespace, name, "v1"))
            else:
                await self._spend(namespace, name, req.name)
        delete = opts
        if hold_version and opts.precondition_resource_version is None:
            delete = _with_version(opts, pod)
        try:
            await self._delete(namespace, req.name, delete)
        except errors.Conflict:
            if hold_version and opts.precondition_resource_version is None:
                raise still_processing(str(as_dict(matching[0].get("metadata")).get(
                    "name"))) from None
            raise
        return dict(podactions.SUCCESS)

    async def _spend(self, namespace: str, name: str, pod_name: str) -> None:
        try:
            await self.budgets.guaranteed_update(
                namespace, name, "v1", lambda budget, now: spend(budget, pod_name, now),
                subresource="status")
        except errors.Conflict as e:
            raise errors.Timeout(f'Timeout: couldn\'t update PodDisruptionBudget "{name}" due '
                                 "to conflicts", retry_after=10) from e

    async def _delete(self, namespace: str, name: str, opts: DeleteOptions) -> None:
        """Mark the pod a disruption target, then delete it (Kubernetes'
        ``addConditionAndDeletePod``); the mark moves the resourceVersion a precondition
        holds."""
        if not opts.dry_run:
            uid, version = opts.precondition_uid, opts.precondition_resource_version

            def mark(pod: Obj, now: str) -> None:
                meta = as_dict(pod.get("metadata"))
                if uid and uid != meta.get("uid"):
                    raise errors.conflict("pods", "", name, (
                        f"Precondition failed: UID in precondition: {uid}, UID in object "
                        f"meta: {meta.get('uid', '')}"))
                if version and version != meta.get("resourceVersion"):
                    raise errors.conflict("pods", "", name, (
                        "Precondition failed: ResourceVersion in precondition: "
                        f"{version}, ResourceVersion in meta: {meta.get('resourceVersion')}"))
                status = pod.get("status")
                if not isinstance(status, dict):
                    status = pod["status"] = {}
                target = {"type": DISRUPTION_TARGET, "status": "True",
                          "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting"}
                conditions = [c for c in status.get("conditions") or ()
                              if isinstance(c, dict)]
                for cond in conditions:
                    if cond.get("type") == DISRUPTION_TARGET:
                        if cond.get("status") != "True":
                            cond["lastTransitionTime"] = now
                        cond.update(target)
                        break
                else:
                    conditions.append({**target, "lastProbeTime": None,
                                       "lastTransitionTime": now})
                status["conditions"] = conditions

            written = await self.pods.guaranteed_update(namespace, name, "v1", mark,
                                                        subresource="status",
                                                        opts=WriteOptions())
            if version is not None:
                opts = _replace_version(opts, str(as_dict(written.object.get("metadata"))
                                                  .get("resourceVersion")))
        await self.pods.delete(namespace, name, "v1", opts)


def _with_version(opts: DeleteOptions, pod: Obj) -> DeleteOptions:
    return _replace_version(opts, str(as_dict(pod.get("metadata")).get("resourceVersion")))


def _replace_version(opts: DeleteOptions, version: str) -> DeleteOptions:
    return replace(opts, precondition_resource_version=version)


def eviction_action(pods: Store, budgets: Store, *,
                    config: EvictionConfig | None = None) -> actions.Action:
    return Evictor(pods, budgets, config=config)
