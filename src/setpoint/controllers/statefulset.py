"""The StatefulSet controller: pods with stable names, started and stopped in order.

For a StatefulSet ``web`` with ``replicas: N`` (and ``ordinals.start: S``, default 0) the
controller keeps the pods ``web-S`` .. ``web-(S+N-1)``. Each pod is the template with:

- the labels ``statefulset.kubernetes.io/pod-name`` (its name), ``apps.kubernetes.io/pod-index``
  (its ordinal) and ``controller-revision-hash`` (the revision it was made from);
- ``hostname`` its name and ``subdomain`` the ``serviceName``;
- an ``emptyDir`` volume for each ``volumeClaimTemplates`` entry the template does not already
  name as a volume (there is no PersistentVolumeClaim kind: the data lives as long as the pod);
- a controller ``ownerReference`` to the StatefulSet.

What one reconcile does is decided by :func:`plan`, a pure function of the spec, the pods and
the update revision:

- **OrderedReady** (the default): ordinals are walked upwards; the first missing pod is
  created and nothing else happens until it is Running and Ready; a pod that is terminating or
  not Running and Ready stops the walk; a Failed (or Succeeded) pod is deleted, to be created
  again. Only when every wanted pod is Running and Ready does the pod of the highest ordinal
  beyond ``replicas`` go, one at a time, each after the previous one is gone.
- **Parallel**: every missing pod is created (at most :data:`BURST` per reconcile) and every
  pod beyond ``replicas`` deleted at once, without waiting for readiness.
- **RollingUpdate**: when nothing else is to be done, the pod of the highest ordinal at or
  above ``partition`` whose revision is not the update revision is deleted (it comes back at
  the new one), one at a time, waiting for each to be Running and Ready. **OnDelete**: pods are
  replaced by the new revision only when someone deletes them.

The *revision* is ``NAME-HASH``, ``HASH`` a hash of the pod template, and it is stored as a
ControllerRevision of that name (:mod:`setpoint.controllers.history`: numbered, renumbered
when a template comes back, trimmed to ``revisionHistoryLimit``), which is what
``kubectl rollout history|undo`` read. ``status.updateRevision`` is the revision of the
current template;
``status.currentRevision`` becomes it once a RollingUpdate has updated, and made Ready, every
pod.

Pods are *claimed* as a ReplicaSet's are (:func:`setpoint.controllers.replicaset.claim`):
active pods of the namespace that match the selector and have no controller are adopted, its
pods that no longer match are released; an adopted pod whose name is not ``NAME-ORDINAL`` is
kept but neither counted nor replaced.

Pods created and deleted are *expected* until the pod cache shows them (per StatefulSet, by
pod name), and no decision is taken meanwhile: a lagging cache never makes the controller
create a pod twice or go on to the next ordinal early.

Status: ``replicas`` (pods not being deleted), ``readyReplicas``, ``availableReplicas``
(Ready for ``minReadySeconds``), ``currentReplicas`` and ``updatedReplicas`` (pods at the
current and update revisions), ``currentRevision``, ``updateRevision``,
``observedGeneration``.

It acts as ``system:serviceaccount:kube-system:statefulset-controller``.

With RollingUpdate, a pod below ``partition`` that is missing is made again at the current
revision (its template read back from its ControllerRevision), the others at the update
revision.

Non-guarantees: no ``maxUnavailable`` (a Kubernetes alpha field); PersistentVolumeClaims
are neither created nor deleted, whatever ``persistentVolumeClaimRetentionPolicy`` says.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers import history, replicaset, rollout
from setpoint.controllers.job import CATCH_UP_DELAY, Expectations

Obj = Mapping[str, Any]

STATEFULSET: Final = ("apps/v1", "StatefulSet")
POD: Final = ("v1", "Pod")
HASH_LABEL: Final = "controller-revision-hash"
#: the label of a revision that carries its hash (Kubernetes' ``ControllerRevisionHashLabel``)
REVISION_HASH_LABEL: Final = "controller.kubernetes.io/hash"
POD_NAME_LABEL: Final = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
#: the highest ordinal considered (names beyond it are not the StatefulSet's pods)
MAX_ORDINAL: Final = 10**9
#: most pods one reconcile creates (Parallel; OrderedReady creates one)
BURST: Final = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class StatefulSetConfig:
    workers: int = 2


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: Obj) -> Mapping[str, Any]:
    return _d(obj.get("metadata"))


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def ordinal_of(set_name: str, pod_name: str) -> int | None:
    """The ordinal of ``pod_name`` in the StatefulSet ``set_name`` (``web-3`` -> 3), or None
    when the name is not one of its pods' names."""
    prefix = f"{set_name}-"
    if not pod_name.startswith(prefix):
        return None
    digits = pod_name[len(prefix):]
    if not digits.isascii() or not digits.isdigit() or len(digits) > 10 or (
            len(digits) > 1 and digits[0] == "0"):
        return None
    value = int(digits)
    return value if value <= MAX_ORDINAL else None


def revision_name(statefulset: Obj) -> str:
    """The revision of the StatefulSet's current template (``NAME-HASH``)."""
    template = _d(_d(statefulset.get("spec")).get("template"))
    return f"{_name(statefulset)}-{rollout.template_hash(template)}"


def revision_of(pod: Obj) -> str:
    return str(_d(_meta(pod).get("labels")).get(HASH_LABEL) or "")


def terminating(pod: Obj) -> bool:
    return bool(_meta(pod).get("deletionTimestamp"))


def finished(pod: Obj) -> bool:
    return _d(pod.get("status")).get("phase") in ("Failed", "Succeeded")


def running_and_ready(pod: Obj) -> bool:
    return (not terminating(pod) and _d(pod.get("status")).get("phase") == "Running"
            and rollout.pod_ready_since(pod) is not None)


def wanted_ordinals(spec: Mapping[str, Any]) -> range:
    start = min(rollout.count(_d(spec.get("ordinals")).get("start")), MAX_ORDINAL)
    replicas = min(rollout.count(spec.get("replicas")), MAX_ORDINAL)
    return range(start, start + replicas)


def partition_of(spec: Mapping[str, Any]) -> int:
    return rollout.count(_d(_d(spec.get("updateStrategy")).get("rollingUpdate")).get(
        "partition"))


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconcile does: ordinals to create, pod names to delete."""

    create: tuple[int, ...] = ()
    delete: tuple[str, ...] = ()


def plan(spec: Mapping[str, Any], pods: Mapping[int, Obj], update_revision: str) -> Plan:
    """The creations and deletions for a StatefulSet whose pods, by ordinal, are ``pods``
    (see the module docstring)."""
    parallel = spec.get("podManagementPolicy") == "Parallel"
    wanted = wanted_ordinals(spec)
    create: list[int] = []
    delete: list[str] = []

    def done() -> Plan:
        return Plan(tuple(create), tuple(delete))

    for ordinal in wanted:
        pod = pods.get(ordinal)
        if pod is None:
            create.append(ordinal)
            if not parallel or len(create) >= BURST:
                return done()
            continue
        if terminating(pod):
            if not parallel:
                return done()
            continue
        if finished(pod):
            delete.append(_name(pod))
            if not parallel:
                return done()
            continue
        if not parallel and not running_and_ready(pod):
            return done()
    for ordinal in sorted((o for o in pods if o not in wanted), reverse=True):
        pod = pods[ordinal]
        if not terminating(pod):
            delete.append(_name(pod))
        if not parallel:
            return done()
    if create or delete:
        return done()
    strategy = _d(spec.get("updateStrategy"))
    if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
        return done()
    partition = partition_of(spec)
    for ordinal in reversed(wanted):
        if ordinal < partition:
            break
        pod = pods.get(ordinal)
        if pod is None:
            break
        if revision_of(pod) != update_revision and not terminating(pod):
            delete.append(_name(pod))
            break
        if not running_and_ready(pod):
            break
    return done()


def pod_for(statefulset: Obj, ordinal: int, revision: str) -> dict[str, Any]:
    """The pod of ``statefulset`` at ``ordinal``, made from its template."""
    meta = _meta(statefulset)
    spec = _d(statefulset.get("spec"))
    template = copy.deepcopy(dict(_d(spec.get("template"))))
    name = f"{_name(statefulset)}-{ordinal}"
    template_meta = _d(template.get("metadata"))
    labels = {str(k): str(v) for k, v in _d(template_meta.get("labels")).items()}
    labels.update({HASH_LABEL: revision, POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)})
    pod_meta: dict[str, Any] = {
        "name": name, "namespace": meta.get("namespace"), "labels": labels,
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                             "name": _name(statefulset), "uid": meta.get("uid"),
                             "controller": True, "blockOwnerDeletion": True}]}
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(_d(template_meta.get("annotations")))
    if template_meta.get("finalizers"):
        pod_meta["finalizers"] = list(_l(template_meta.get("finalizers")))
    pod_spec = dict(_d(template.get("spec")))
    pod_spec["hostname"] = name
    if spec.get("serviceName"):
        pod_spec["subdomain"] = spec["serviceName"]
    volumes = list(_l(pod_spec.get("volumes")))
    have = {_d(v).get("name") for v in volumes}
    for claim in _l(spec.get("volumeClaimTemplates")):
        claim_name = _d(_d(claim).get("metadata")).get("name")
        if claim_name and claim_name not in have:
            volumes.append({"name": claim_name, "emptyDir": {}})
            have.add(claim_name)
    if volumes:
        pod_spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec}


def set_status(statefulset: Obj, pods: Iterable[Obj], update_revision: str,
               now: datetime) -> tuple[dict[str, Any], float]:
    """The status over the StatefulSet's pods, and the seconds until a Ready pod becomes
    available (0: none waiting)."""
    spec = _d(statefulset.get("spec"))
    old = _d(statefulset.get("status"))
    current_revision = str(old.get("currentRevision") or update_revision)
    min_ready = rollout.count(spec.get("minReadySeconds"))
    replicas = ready = available = current = updated = 0
    wait = 0.0
    for pod in pods:
        if terminating(pod):
            continue
        replicas += 1
        if running_and_ready(pod):
            ready += 1
            if rollout.is_available(pod, min_ready, now):
                available += 1
            else:
                since = rollout.pod_ready_since(pod)
                if since is not None:
                    left = min_ready - (now - since).total_seconds()
                    wait = left if not wait else min(wait, left)
        if revision_of(pod) == current_revision:
            current += 1
        if revision_of(pod) == update_revision:
            updated += 1
    rolling = (_d(spec.get("updateStrategy")).get("type") or "RollingUpdate") == \
        "RollingUpdate"
    if rolling and updated == replicas == ready and \
            replicas == rollout.count(spec.get("replicas")):
        current_revision, current = update_revision, updated
    status: dict[str, Any] = {
        "replicas": replicas, "readyReplicas": ready, "availableReplicas": available,
        "currentReplicas": current, "updatedReplicas": updated,
        "currentRevision": current_revision, "updateRevision": update_revision,
        "observedGeneration": _meta(statefulset).get("generation") or 0,
        "collisionCount": old.get("collisionCount") or 0}
    if old.get("conditions"):
        status["conditions"] = old["conditions"]
    kept = {k: v for k, v in status.items()
            if v or k in ("replicas", "availableReplicas")}
    return kept, max(wait, 0.0)


def _owned_by(pod: Obj, uid: str) -> bool:
    return any(_d(r).get("uid") == uid and _d(r).get("controller") is True
               for r in _l(_meta(pod).get("ownerReferences")))


class StatefulSetReconciler:
    def __init__(self, mapper: replicaset.OrphansOfPod | None = None, *,
                 now: Callable[[], datetime] | None = None,
                 expectations: Expectations | None = None) -> None:
        self.mapper = mapper or replicaset.OrphansOfPod()
        self.now = now or (lambda: datetime.now(UTC))
        self.expectations = expectations or Expectations()
        self.written = history.Written()

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.mapper.owners = ctx.cache
        statefulset = ctx.get(request)
        if statefulset is None:
            self.expectations.forget(request.key)
            self.written.forget(request.key)
            return runtime.Result.done()
        uid = str(_meta(statefulset).get("uid") or "")
        in_namespace = replicaset.claim_candidates(ctx.cache_for(POD), request.namespace, uid)
        selector = replicaset.selector_of(statefulset)
        if selector is None:
            owned = [p for p in in_namespace if _owned_by(p, uid)]
        else:
            candidates = [p for p in in_namespace
                          if rollout.is_active(p) or _owned_by(p, uid)]
            try:
                owned = await replicaset.claim(ctx.client, statefulset, candidates, selector,
                                               POD, STATEFULSET)
            except errors.Forbidden:
                return runtime.Result.done()  # the namespace is going
        if not self.expectations.satisfied(request.key, owned):
            return runtime.Result.after(CATCH_UP_DELAY)
        try:
            return await self._sync(request, ctx, statefulset, owned)
        except errors.Conflict:
            return runtime.Result(requeue=True)
        except errors.NotFound:
            return runtime.Result.done()

    async def _sync(self, request: runtime.Request, ctx: runtime.Context, statefulset: Obj,
                    owned: list[Obj]) -> runtime.Result:
        name = _name(statefulset)
        by_ordinal: dict[int, Obj] = {}
        for pod in owned:
            ordinal = ordinal_of(name, _name(pod))
            if ordinal is not None:
                by_ordinal[ordinal] = pod
        revision = revision_name(statefulset)
        deleting = bool(_meta(statefulset).get("deletionTimestamp"))
        current_set: Obj | None = None  # the StatefulSet at its current revision, if older
        current_name = str(_d(statefulset.get("status")).get("currentRevision") or "")
        if not deleting:
            live = {revision_of(p) for p in owned}
            try:
                synced = await history.sync(
                    ctx, statefulset, STATEFULSET, name=revision,
                    hash_label=REVISION_HASH_LABEL, hash_value=revision.rpartition("-")[2],
                    in_use=lambda r: _name(r) in live,
                    current_name=current_name or None, written=self.written,
                    key=request.key)
            except history.Collision:
                return runtime.Result.after(CATCH_UP_DELAY)
            except errors.Forbidden:
                return runtime.Result.done()  # the namespace is going
            current = synced.by_name.get(current_name) if current_name != revision else None
            template = history.template_of(current) if current is not None else None
            if template is not None:
                current_set = {**statefulset,
                               "spec": {**_d(statefulset.get("spec")), "template": template}}
        decided = Plan() if deleting else plan(
            _d(statefulset.get("spec")), by_ordinal, revision)
        for victim in decided.delete:
            self.expectations.deleted(request.key, victim)
            try:
                await ctx.client.delete(POD, victim, namespace=request.namespace)
            except errors.NotFound:
                continue
            await ctx.recorder.normal(statefulset, "SuccessfulDelete",
                                      f"delete Pod {victim} in StatefulSet {name} successful")
        partition = partition_of(_d(statefulset.get("spec"))) if (_d(_d(statefulset.get(
            "spec")).get("updateStrategy")).get("type") or "RollingUpdate") == \
            "RollingUpdate" else 0
        for ordinal in decided.create:
            if current_set is not None and ordinal < partition:
                # below the partition a pod is made again at the current revision
                pod = pod_for(current_set, ordinal, current_name)
            else:
                pod = pod_for(statefulset, ordinal, revision)
            try:
                await ctx.client.create(pod, namespace=request.namespace)
            except errors.AlreadyExists:
                continue  # not ours yet (or a cache behind): looked at again on its event
            except errors.Forbidden:
                break  # the namespace is going
            except errors.ApiError as e:
                await ctx.recorder.warning(
                    statefulset, "FailedCreate",
                    f"create Pod {pod['metadata']['name']} in StatefulSet {name} failed "
                    f"error: {e}")
                return runtime.Result(requeue=True)
            self.expectations.created(request.key, str(pod["metadata"]["name"]))
            await ctx.recorder.normal(
                statefulset, "SuccessfulCreate",
                f"create Pod {pod['metadata']['name']} in StatefulSet {name} successful")
        status, wait = set_status(statefulset, owned, revision, self.now())
        if status != dict(_d(statefulset.get("status"))):
            await ctx.client.update_status({**statefulset, "status": status},
                                           resource=STATEFULSET)
        if wait:
            return runtime.Result.after(wait + 0.05)
        return runtime.Result.done()


def statefulset_controller(config: StatefulSetConfig | None = None, *,
                           now: Callable[[], datetime] | None = None) -> runtime.Controller:
    config = config or StatefulSetConfig()
    mapper = replicaset.OrphansOfPod()
    return (runtime.Controller(for_=STATEFULSET,
                               reconcile=StatefulSetReconciler(mapper, now=now),
                               name="statefulset")
            .owns(POD)
            .owns(history.CONTROLLER_REVISION)
            .watches(POD, mapper)
            .with_options(workers=config.workers))


__all__ = ["Plan", "StatefulSetConfig", "StatefulSetReconciler", "ordinal_of", "plan",
           "pod_for", "set_status", "statefulset_controller"]
