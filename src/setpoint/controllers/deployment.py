"""The Deployment controller: ReplicaSets that roll a pod template out.

For each Deployment it claims the ReplicaSets of its namespace its selector matches (as the
ReplicaSet controller claims pods), finds the **new** ReplicaSet (the oldest whose template
equals the Deployment's, ``pod-template-hash`` label aside) or creates it, named
``<deployment>-<pod-template-hash>`` with that label added to its selector and template, and
then moves replicas from the **old** ReplicaSets to the new one:

* ``RollingUpdate``: one step of :func:`~setpoint.controllers.rollout.new_replicas` and
  :func:`~setpoint.controllers.rollout.scale_down_old` per reconcile (every change of a
  ReplicaSet's status reconciles again), so that there are never more than ``replicas +
  maxSurge`` pods asked for and never fewer than ``replicas - maxUnavailable`` available;
* ``Recreate``: the old ReplicaSets go to 0, and once none of their pods is left the new one
  goes to ``replicas``.

Revisions: the new ReplicaSet carries ``deployment.kubernetes.io/revision`` = the highest
revision so far + 1 (also when it is an old ReplicaSet whose template came back: that is how
``kubectl rollout undo`` rolls back), copied to the Deployment with the Deployment's other
annotations (``kubernetes.io/change-cause`` shows in ``kubectl rollout history``). Once a
rollout is complete, old ReplicaSets without pods beyond ``revisionHistoryLimit`` are deleted,
oldest first. A ``paused`` Deployment creates no new ReplicaSet and rolls nothing; its
ReplicaSets still follow ``spec.replicas`` when it has only one.

Status: ``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
``unavailableReplicas`` summed over its ReplicaSets, ``observedGeneration``, and the
conditions with Kubernetes' reasons: ``Available`` (``MinimumReplicasAvailable`` /
``MinimumReplicasUnavailable``), ``Progressing`` (``NewReplicaSetCreated``,
``FoundNewReplicaSet``, ``ReplicaSetUpdated``, ``NewReplicaSetAvailable``,
``DeploymentPaused``, ``DeploymentResumed``, and ``ProgressDeadlineExceeded`` when the
rollout made no progress for ``progressDeadlineSeconds``).

It acts as ``system:serviceaccount:kube-system:deployment-controller``.

Non-guarantees: no proportional scaling of several active ReplicaSets when ``replicas``
changes mid-rollout (the rollout converges to the new count instead); no hash collision
handling beyond ``collisionCount`` on a name taken by a ReplicaSet with another template.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors, timeutil
from setpoint.controllers import replicaset as rsc
from setpoint.controllers import rollout

Obj = Mapping[str, Any]

DEPLOYMENT: Final = ("apps/v1", "Deployment")
REPLICA_SET: Final = rsc.REPLICA_SET
POD: Final = ("v1", "Pod")
#: annotations of the Deployment never copied to its ReplicaSets
_NOT_COPIED: Final = frozenset({"kubectl.kubernetes.io/last-applied-configuration",
                                rollout.REVISION, "deployment.kubernetes.io/revision-history",
                                rollout.DESIRED_REPLICAS, rollout.MAX_REPLICAS})


def _meta(obj: Obj) -> Mapping[str, Any]:
    return rsc._meta(obj)


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _created(obj: Obj) -> tuple[str, str]:
    return str(_meta(obj).get("creationTimestamp") or ""), str(_meta(obj).get("name") or "")


def _sets(rs: Obj) -> rollout.Sets:
    return rollout.Sets(rollout.count(_d(rs.get("spec")).get("replicas")),
                        rollout.count(_d(rs.get("status")).get("availableReplicas")))


def _annotations(obj: Obj) -> dict[str, str]:
    found = _meta(obj).get("annotations")
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def progressing_condition(old: Mapping[str, Any] | None, status: str, reason: str,
                          message: str, now: datetime) -> dict[str, Any]:
    stamp = timeutil.format_time(now)
    transition = stamp
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        transition = str(old["lastTransitionTime"])
    return {"type": "Progressing", "status": status, "lastUpdateTime": stamp,
            "lastTransitionTime": transition, "reason": reason, "message": message}


def _condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def _put(conditions: list[dict[str, Any]], condition: dict[str, Any], *,
         refresh: bool = False) -> None:
    """Set ``condition`` in place of its type's; an unchanged one keeps its times unless
    ``refresh`` (progress was made: ``lastUpdateTime`` moves, the deadline starts over)."""
    for i, c in enumerate(conditions):
        if c.get("type") == condition["type"]:
            same = all(c.get(k) == condition.get(k) for k in ("status", "reason", "message"))
            conditions[i] = dict(c) if same and not refresh else condition
            return
    conditions.append(condition)


class DeploymentReconciler:
    def __init__(self, *, now: Callable[[], datetime] | None = None) -> None:
        self.now = now or (lambda: datetime.now(UTC))
        self.owners_of_orphans = rsc.OrphansOfPod()
        self.deployment_of_pod = DeploymentOfPod()

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.owners_of_orphans.owners = ctx.cache
        self.deployment_of_pod.sets = ctx.cache_for(REPLICA_SET)
        self.deployment_of_pod.deployments = ctx.cache
        deployment = ctx.get(request)
        if deployment is None:
            return runtime.Result.done()
        selector = rsc.selector_of(deployment)
        if selector is None or _meta(deployment).get("deletionTimestamp"):
            return runtime.Result.done()
        candidates = rsc.claim_candidates(ctx.cache_for(REPLICA_SET), request.namespace,
                                          str(_meta(deployment).get("uid") or ""))
        try:
            owned = await rsc.claim(ctx.client, deployment, candidates, selector, REPLICA_SET,
                                    DEPLOYMENT)
            return await self._sync(deployment, sorted(owned, key=_created), request, ctx)
        except (errors.Conflict, errors.AlreadyExists):
            return runtime.Result(requeue=True)
        except (errors.NotFound, errors.Forbidden):
            return runtime.Result.done()

    async def _sync(self, deployment: Obj, sets: list[Obj], request: runtime.Request,
                    ctx: runtime.Context) -> runtime.Result:
        spec = _d(deployment.get("spec"))
        template = spec.get("template")
        new = next((s for s in sets if rollout.same_template(_d(s.get("spec")).get("template"),
                                                              template)), None)
        olds = [s for s in sets if s is not new]
        desired = rollout.count(spec.get("replicas"))
        paused = spec.get("paused") is True
        created = False
        if new is None and not paused:
            new = await self._create_new(deployment, olds, request, ctx)
            created = True
        elif new is not None and not paused:
            new = await self._keep_new_current(deployment, new, olds, ctx)
        if new is not None:
            deployment = await self._copy_revision(deployment, new, ctx)
        strategy = _d(spec.get("strategy"))
        if paused:
            active = [s for s in sets if rollout.count(_d(s.get("spec")).get("replicas"))]
            if len(active) == 1 and _sets(active[0]).replicas != desired:
                await self._scale(active[0], desired, deployment, ctx)
        elif new is not None and strategy.get("type") == "Recreate":
            await self._recreate(deployment, new, olds, desired, request, ctx)
        elif new is not None:
            await self._roll(deployment, new, olds, desired, ctx)
        complete = new is not None and self._complete(deployment, new, olds, desired)
        if complete:
            await self._clean_up(deployment, olds, ctx)
        return await self._write_status(deployment, new, olds, desired, created, ctx)

    # --- the new ReplicaSet ---------------------------------------------------------------

    async def _create_new(self, deployment: Obj, olds: list[Obj], request: runtime.Request,
                          ctx: runtime.Context) -> Obj:
        spec = _d(deployment.get("spec"))
        status = _d(deployment.get("status"))
        collisions = rollout.count(status.get("collisionCount"))
        template = rollout.without_hash(spec.get("template"))
        hash_ = rollout.template_hash(template, collisions)
        template["metadata"]["labels"] = {**_d(template["metadata"].get("labels")),
                                          rollout.HASH_LABEL: hash_}
        selector = dict(_d(spec.get("selector")))
        selector["matchLabels"] = {**_d(selector.get("matchLabels")), rollout.HASH_LABEL: hash_}
        desired = rollout.count(spec.get("replicas"))
        surge, _ = self._fenceposts(deployment, desired)
        if _d(spec.get("strategy")).get("type") == "Recreate":
            replicas = 0 if any(_sets(o).replicas for o in olds) else desired
        else:
            replicas = rollout.new_replicas(desired, surge, rollout.Sets(0, 0),
                                            [_sets(o) for o in olds])
        name = f"{_meta(deployment).get('name')}-{hash_}"
        annotations = {k: v for k, v in _annotations(deployment).items() if k not in _NOT_COPIED}
        annotations.update({rollout.REVISION: str(rollout.max_revision(olds) + 1),
                            rollout.DESIRED_REPLICAS: str(desired),
                            rollout.MAX_REPLICAS: str(desired + surge)})
        body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": request.namespace,
                             "labels": dict(template["metadata"]["labels"]),
                             "annotations": annotations,
                             "ownerReferences": [rsc.controller_ref(deployment, *DEPLOYMENT)]},
                "spec": {"replicas": replicas, "selector": selector, "template": template,
                         "minReadySeconds": rollout.count(spec.get("minReadySeconds"))}}
        try:
            made = await ctx.client.create(body, namespace=request.namespace)
        except errors.AlreadyExists:
            # a ReplicaSet of that name with another template: count a collision and retry
            await ctx.client.patch_status(DEPLOYMENT, str(_meta(deployment).get("name")),
                                          {"status": {"collisionCount": collisions + 1}},
                                          namespace=request.namespace)
            raise
        await ctx.recorder.normal(deployment, "ScalingReplicaSet",
                                  f"Scaled up replica set {name} from 0 to {replicas}")
        return dict(made)

    async def _keep_new_current(self, deployment: Obj, new: Obj, olds: list[Obj],
                                ctx: runtime.Context) -> Obj:
        """The new ReplicaSet's revision above every old one's (a rollback brings an old
        template back) and the Deployment's annotations copied to it."""
        annotations = _annotations(new)
        wanted = dict(annotations)
        wanted.update({k: v for k, v in _annotations(deployment).items() if k not in _NOT_COPIED})
        top = rollout.max_revision(olds)
        if rollout.revision_of(new) <= top:
            wanted[rollout.REVISION] = str(top + 1)
        if wanted == annotations:
            return new
        meta = _meta(new)
        updated = await ctx.client.patch(REPLICA_SET, str(meta.get("name")), {
            "metadata": {"annotations": wanted, "resourceVersion": meta.get("resourceVersion")}},
            namespace=str(meta.get("namespace")))
        return dict(updated)

    async def _copy_revision(self, deployment: Obj, new: Obj, ctx: runtime.Context) -> Obj:
        """The Deployment's revision annotation is its new ReplicaSet's."""
        revision = _annotations(new).get(rollout.REVISION)
        annotations = _annotations(deployment)
        if revision is None or annotations.get(rollout.REVISION) == revision:
            return deployment
        meta = {**_meta(deployment), "annotations": {**annotations, rollout.REVISION: revision}}
        return dict(await ctx.client.update({**deployment, "metadata": meta},
                                            resource=DEPLOYMENT))

    # --- moving replicas ------------------------------------------------------------------

    def _fenceposts(self, deployment: Obj, desired: int) -> tuple[int, int]:
        rolling = _d(_d(_d(deployment.get("spec")).get("strategy")).get("rollingUpdate"))
        return rollout.fenceposts(rolling.get("maxSurge"), rolling.get("maxUnavailable"),
                                  desired)

    async def _scale(self, rs: Obj, replicas: int, deployment: Obj,
                     ctx: runtime.Context) -> None:
        meta = _meta(rs)
        before = _sets(rs).replicas
        if before == replicas:
            return
        desired = rollout.count(_d(deployment.get("spec")).get("replicas"))
        surge, _ = self._fenceposts(deployment, desired)
        annotations = {rollout.DESIRED_REPLICAS: str(desired),
                       rollout.MAX_REPLICAS: str(desired + surge)}
        await ctx.client.patch(REPLICA_SET, str(meta.get("name")), {
            "metadata": {"annotations": annotations,
                         "resourceVersion": meta.get("resourceVersion")},
            "spec": {"replicas": replicas}}, namespace=str(meta.get("namespace")))
        direction = "up" if replicas > before else "down"
        await ctx.recorder.normal(deployment, "ScalingReplicaSet",
                                  f"Scaled {direction} replica set {meta.get('name')} from "
                                  f"{before} to {replicas}")

    async def _roll(self, deployment: Obj, new: Obj, olds: list[Obj], desired: int,
                    ctx: runtime.Context) -> None:
        surge, unavailable = self._fenceposts(deployment, desired)
        old_sets = [_sets(o) for o in olds]
        grown = rollout.new_replicas(desired, surge, _sets(new), old_sets)
        if grown != _sets(new).replicas:
            await self._scale(new, grown, deployment, ctx)
            return  # the next step starts from what the caches then show
        shrunk = rollout.scale_down_old(desired, unavailable, _sets(new), old_sets)
        for old, replicas in zip(olds, shrunk, strict=True):
            await self._scale(old, replicas, deployment, ctx)

    async def _recreate(self, deployment: Obj, new: Obj, olds: list[Obj], desired: int,
                        request: runtime.Request, ctx: runtime.Context) -> None:
        for old in olds:
            await self._scale(old, 0, deployment, ctx)
        old_uids = {str(_meta(o).get("uid")) for o in olds}
        pods = ctx.cache_for(POD).by_index("namespace", request.namespace)
        left = [p for p in pods if rsc.controller_uid(p) in old_uids
                and _d(p.get("status")).get("phase") not in ("Succeeded", "Failed")]
        if left or any(rollout.count(_d(o.get("status")).get("replicas")) for o in olds):
            return  # old pods still running (or terminating)
        await self._scale(new, desired, deployment, ctx)

    def _complete(self, deployment: Obj, new: Obj, olds: list[Obj], desired: int) -> bool:
        status = _d(new.get("status"))
        return (_sets(new).replicas == desired
                and rollout.count(status.get("replicas")) == desired
                and rollout.count(status.get("availableReplicas")) == desired
                and not any(_sets(o).replicas or rollout.count(_d(o.get("status")).get(
                    "replicas")) for o in olds))

    async def _clean_up(self, deployment: Obj, olds: list[Obj], ctx: runtime.Context) -> None:
        limit = _d(deployment.get("spec")).get("revisionHistoryLimit")
        if not isinstance(limit, int):
            return
        empty = [o for o in olds if not _sets(o).replicas
                 and not rollout.count(_d(o.get("status")).get("replicas"))
                 and not _meta(o).get("deletionTimestamp")]
        empty.sort(key=lambda o: (rollout.revision_of(o), _created(o)))
        for old in empty[:max(len(empty) - limit, 0)]:
            meta = _meta(old)
            try:
                await ctx.client.delete(REPLICA_SET, str(meta.get("name")),
                                        namespace=str(meta.get("namespace")))
            except errors.NotFound:
                pass

    # --- status ---------------------------------------------------------------------------

    async def _write_status(self, deployment: Obj, new: Obj | None, olds: list[Obj],
                            desired: int, created: bool, ctx: runtime.Context
                            ) -> runtime.Result:
        now = self.now()
        every = ([new] if new is not None else []) + olds
        total = {name: sum(rollout.count(_d(s.get("status")).get(name)) for s in every)
                 for name in ("replicas", "readyReplicas", "availableReplicas")}
        updated = rollout.count(_d(new.get("status")).get("replicas")) if new else 0
        old_status = _d(deployment.get("status"))
        status: dict[str, Any] = {
            "observedGeneration": _meta(deployment).get("generation") or 0,
            "replicas": total["replicas"], "updatedReplicas": updated,
            "readyReplicas": total["readyReplicas"],
            "availableReplicas": total["availableReplicas"],
            "unavailableReplicas": max(desired - total["availableReplicas"], 0)}
        status = {k: v for k, v in status.items() if v}
        if old_status.get("collisionCount") is not None:
            status["collisionCount"] = old_status["collisionCount"]
        conditions = [dict(c) for c in old_status.get("conditions") or ()
                      if isinstance(c, Mapping)]
        _, unavailable = self._fenceposts(deployment, desired)
        if total["availableReplicas"] >= desired - unavailable:
            available = progressing_condition(_condition(conditions, "Available"), "True",
                                              "MinimumReplicasAvailable",
                                              "Deployment has minimum availability.", now)
        else:
            available = progressing_condition(_condition(conditions, "Available"), "False",
                                              "MinimumReplicasUnavailable",
                                              "Deployment does not have minimum "
                                              "availability.", now)
        available["type"] = "Available"
        _put(conditions, available)
        wait = self._progress(deployment, new, olds, desired, created, status, old_status,
                              conditions, now)
        if conditions:
            status["conditions"] = conditions
        if status != dict(old_status):
            try:
                await ctx.client.update_status({**deployment, "status": status},
                                               resource=DEPLOYMENT)
            except errors.Conflict:
                return runtime.Result(requeue=True)
        return runtime.Result.after(wait) if wait else runtime.Result.done()

    def _progress(self, deployment: Obj, new: Obj | None, olds: list[Obj], desired: int,
                  created: bool, status: dict[str, Any], old_status: Mapping[str, Any],
                  conditions: list[dict[str, Any]], now: datetime) -> float:
        """Set the Progressing condition; the seconds until the deadline would pass."""
        spec = _d(deployment.get("spec"))
        current = _condition(conditions, "Progressing")
        name = str(_meta(new).get("name")) if new is not None else ""
        if spec.get("paused") is True:
            if current is None or current.get("reason") != "DeploymentPaused":
                _put(conditions, progressing_condition(current, "Unknown", "DeploymentPaused",
                                                       "Deployment is paused", now))
            return 0.0
        if current is not None and current.get("reason") == "DeploymentPaused":
            current = progressing_condition(current, "Unknown", "DeploymentResumed",
                                            "Deployment is resumed", now)
            _put(conditions, current)
        deadline = spec.get("progressDeadlineSeconds")
        if new is not None and self._complete(deployment, new, olds, desired):
            if current is None or current.get("reason") != "NewReplicaSetAvailable":
                _put(conditions, progressing_condition(
                    current, "True", "NewReplicaSetAvailable",
                    f'ReplicaSet "{name}" has successfully progressed.', now))
            return 0.0
        if created:
            _put(conditions, progressing_condition(current, "True", "NewReplicaSetCreated",
                                                   f'Created new replica set "{name}"', now))
            return float(deadline) if isinstance(deadline, int) else 0.0
        counts = ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
        moved = any(status.get(k, 0) != old_status.get(k, 0) for k in counts)
        if new is not None and (moved or current is None):
            _put(conditions, progressing_condition(current, "True", "ReplicaSetUpdated",
                                                   f'ReplicaSet "{name}" is progressing.', now),
                 refresh=True)
            return float(deadline) if isinstance(deadline, int) else 0.0
        if current is None or not isinstance(deadline, int):
            return 0.0
        if current.get("reason") == "ProgressDeadlineExceeded":
            return 0.0
        try:
            since = timeutil.parse_time(str(current.get("lastUpdateTime")))
        except ValueError:
            return 0.0
        left = deadline - (now - since).total_seconds()
        if left > 0:
            return left + 0.05
        _put(conditions, progressing_condition(current, "False", "ProgressDeadlineExceeded",
                                               f'ReplicaSet "{name}" has timed out '
                                               "progressing.", now))
        return 0.0


class DeploymentsOfReplicaSet:
    """A ReplicaSet without a controller: the Deployments of its namespace selecting it."""

    def __init__(self) -> None:
        self.inner = rsc.OrphansOfPod()

    def requests(self, obj: Obj) -> Iterable[runtime.Request]:
        return self.inner.requests(obj)


class DeploymentOfPod:
    """A pod: the Deployment controlling the ReplicaSet controlling it, when that Deployment's
    strategy is ``Recreate`` (which waits for the old pods to be gone, not only for their
    ReplicaSets to be scaled down). A rolling update follows its ReplicaSets' status, never
    pods: as in Kubernetes, the pods of other Deployments wake nothing (10,000 pods starting
    would otherwise reconcile their Deployments tens of thousands of times)."""

    def __init__(self) -> None:
        self.sets: runtime.Cache | None = None
        self.deployments: runtime.Cache | None = None

    def requests(self, pod: Obj) -> Iterable[runtime.Request]:
        if self.sets is None:
            return
        namespace = str(_meta(pod).get("namespace") or "")
        for ref in _meta(pod).get("ownerReferences") or ():
            if isinstance(ref, Mapping) and ref.get("controller") is True \
                    and ref.get("kind") == "ReplicaSet":
                rs = self.sets.get(f"{namespace}/{ref.get('name')}")
                for owner in _meta(rs).get("ownerReferences") or () if rs else ():
                    if isinstance(owner, Mapping) and owner.get("controller") is True \
                            and owner.get("kind") == "Deployment" \
                            and self._recreates(namespace, str(owner.get("name"))):
                        yield runtime.Request(namespace, str(owner.get("name")))

    def _recreates(self, namespace: str, name: str) -> bool:
        found = None if self.deployments is None else self.deployments.get(f"{namespace}/{name}")
        if found is None:
            return self.deployments is None  # not known yet: let the reconcile decide
        strategy = _d(_d(found.get("spec")).get("strategy"))
        return strategy.get("type") == "Recreate"


def deployment_controller(*, workers: int = 4, now: Callable[[], datetime] | None = None
                          ) -> runtime.Controller:
    reconciler = DeploymentReconciler(now=now)
    orphans = DeploymentsOfReplicaSet()
    orphans.inner = reconciler.owners_of_orphans
    pods = reconciler.deployment_of_pod
    return (runtime.Controller(for_=DEPLOYMENT, reconcile=reconciler, name="deployment")
            .owns(REPLICA_SET)
            .watches(REPLICA_SET, orphans)
            .watches(POD, pods)
            .with_options(workers=workers))


__all__ = ["DeploymentReconciler", "deployment_controller"]
