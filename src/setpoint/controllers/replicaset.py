"""The ReplicaSet controller: as many pods as ``spec.replicas``, stamped from the template.

For each ReplicaSet it:

* **claims** pods: the ones it controls (``ownerReferences`` with ``controller: true`` and its
  uid) that still match the selector stay its own, those that no longer match are released
  (the reference removed), and active pods of the namespace that match and have no
  controller are adopted (unless the ReplicaSet is being deleted); pods another controller
  owns are not even read (the pod cache is indexed by controller, :func:`claim_candidates`);
* **creates or deletes** the difference between ``spec.replicas`` and its active pods (not
  finished, not being deleted), creations in batches that double after each success (1, 2,
  4, ... as Kubernetes' slow start), deletions in :func:`~setpoint.controllers.rollout.
  deletion_order`;
* keeps **expectations**: after creating or deleting pods it does not act on the ReplicaSet
  again until its pod cache shows every one of those writes (a creation: the cache reached
  the resourceVersion the server answered; a deletion: the pod is gone or marked). A cache
  that lags the server therefore never makes it create or delete twice. Expectations that
  are not met within ``expectation_timeout`` seconds are dropped (someone else's write hid
  ours);
* writes the **status**: ``replicas``, ``fullyLabeledReplicas`` (pods carrying every label of
  the template), ``readyReplicas``, ``availableReplicas`` (Ready for ``minReadySeconds``: a
  ReplicaSet with pods Ready but not yet available looks again when they will be),
  ``observedGeneration`` and the ``ReplicaFailure`` condition (``FailedCreate`` or
  ``FailedDelete`` with the server's message) while writes fail.

It acts as ``system:serviceaccount:kube-system:replicaset-controller``.

Non-guarantees: no pod-deletion ranking by co-located pods; a pod is adopted or released with
a patch whose ``resourceVersion`` it read, so a concurrent change makes it try again later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.selectors import LabelSelector
from setpoint.controllers import rollout

Obj = Mapping[str, Any]

REPLICA_SET: Final = ("apps/v1", "ReplicaSet")
POD: Final = ("v1", "Pod")
#: most pods one reconcile creates or deletes
BURST: Final = 500
EXPECTATION_TIMEOUT: Final = 300.0


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def selector_of(obj: Obj) -> LabelSelector | None:
    selector = _d(obj.get("spec")).get("selector")
    if not isinstance(selector, Mapping):
        return None
    try:
        parsed = LabelSelector.from_dict(selector)
    except errors.ApiError:
        return None
    return None if parsed.empty else parsed


def controller_uid(obj: Obj) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return None


def controller_ref(owner: Obj, api_version: str, kind: str) -> dict[str, Any]:
    meta = _meta(owner)
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": True}


def labels_of(obj: Obj) -> dict[str, str]:
    labels = _meta(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping) else {}


#: the cache index :func:`claim_candidates` reads: ``namespace/controller-uid``, and
#: ``namespace/`` for objects without a controller
CONTROLLER_INDEX: Final = "controller"


def index_by_controller(obj: Obj) -> list[str]:
    namespace = str(_meta(obj).get("namespace") or "")
    return [f"{namespace}/{controller_uid(obj) or ''}"]


def claim_candidates(cache: runtime.Cache, namespace: str, owner_uid: str) -> list[Obj]:
    """The objects of ``namespace`` that :func:`claim` may keep or adopt for the owner of
    ``owner_uid``: those it controls and those without a controller, sorted by key.

    Objects another controller owns are never claimed, so they are not read: an owner's
    reconcile costs its own objects and the orphans, not the whole namespace (1,000
    ReplicaSets of 10 pods each in one namespace would otherwise scan 10,000 pods each time).
    The index is added to the shared cache on first use.
    """
    try:
        mine = cache.by_index(CONTROLLER_INDEX, f"{namespace}/{owner_uid}")
    except KeyError:
        cache.add_indexer(CONTROLLER_INDEX, index_by_controller)
        mine = cache.by_index(CONTROLLER_INDEX, f"{namespace}/{owner_uid}")
    orphans = cache.by_index(CONTROLLER_INDEX, f"{namespace}/") if owner_uid else []
    if not orphans:
        return mine
    return sorted([*mine, *orphans], key=lambda obj: str(_meta(obj).get("name") or ""))


async def claim(client: Any, owner: Obj, candidates: Iterable[Obj], selector: LabelSelector,
                resource: tuple[str, str], owner_type: tuple[str, str]) -> list[Obj]:
    """The objects ``owner`` controls after adopting matching orphans and releasing its
    objects that no longer match (Kubernetes' ``ClaimObjects``)."""
    uid = str(_meta(owner).get("uid") or "")
    deleting = bool(_meta(owner).get("deletionTimestamp"))
    mine: list[Obj] = []
    for obj in candidates:
        meta = _meta(obj)
        owner_uid = controller_uid(obj)
        matches = selector.matches(labels_of(obj))
        refs = [dict(r) for r in meta.get("ownerReferences") or () if isinstance(r, Mapping)]
        if owner_uid == uid:
            if matches or deleting:
                mine.append(obj)
                continue
            kept = [r for r in refs if r.get("uid") != uid]
        elif owner_uid is None and matches and not deleting and not meta.get(
                "deletionTimestamp"):
            kept = [*refs, controller_ref(owner, *owner_type)]
        else:
            continue
        patch = {"metadata": {"ownerReferences": kept, "uid": meta.get("uid"),
                              "resourceVersion": meta.get("resourceVersion")}}
        try:
            updated = await client.patch(resource, str(meta.get("name")), patch,
                                         namespace=str(meta.get("namespace")))
        except (errors.NotFound, errors.Conflict, errors.Invalid):
            continue
        if controller_uid(updated) == uid:
            mine.append(updated)
    return mine


@dataclass
class Expectation:
    """Writes the pod cache has not shown yet, for one ReplicaSet."""

    created: list[int] = field(default_factory=list)  # resourceVersions answered
    deleted: set[str] = field(default_factory=set)  # pod keys
    since: float = 0.0


class Expectations:
    """Per ReplicaSet key, the creations and deletions in flight (a test can read them)."""

    def __init__(self, timeout: float = EXPECTATION_TIMEOUT,
                 clock: Callable[[], float] | None = None) -> None:
        self.timeout = timeout
        self._clock = clock or (lambda: datetime.now(UTC).timestamp())
        self._pending: dict[str, Expectation] = {}

    def expect(self, key: str) -> Expectation:
        found = self._pending.get(key)
        if found is None:
            found = self._pending[key] = Expectation(since=self._clock())
        return found

    def forget(self, key: str) -> None:
        self._pending.pop(key, None)

    def pending(self, key: str) -> Expectation | None:
        return self._pending.get(key)

    def satisfied(self, key: str, pods: runtime.Cache) -> bool:
        found = self._pending.get(key)
        if found is None:
            return True
        found.created = [rv for rv in found.created if not pods.has_seen(str(rv))]
        found.deleted = {k for k in found.deleted
                         if (p := pods.get(k)) is not None and rollout.is_active(p)}
        if not found.created and not found.deleted:
            del self._pending[key]
            return True
        if self._clock() - found.since > self.timeout:
            del self._pending[key]
            return True
        return False


def pod_from_template(owner: Obj, template: Any, api_version: str, kind: str,
                      extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    template = _d(template)
    meta = _d(template.get("metadata"))
    labels = {**{str(k): str(v) for k, v in _d(meta.get("labels")).items()},
              **(extra_labels or {})}
    pod_meta: dict[str, Any] = {"generateName": f"{_meta(owner).get('name')}-",
                                "labels": labels,
                                "ownerReferences": [controller_ref(owner, api_version, kind)]}
    if meta.get("annotations"):
        pod_meta["annotations"] = dict(_d(meta.get("annotations")))
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": dict(_d(template.get("spec")))}


def replica_status(rs: Obj, pods: list[Obj], now: datetime) -> tuple[dict[str, Any], float]:
    """The status counts of ``rs`` over its active pods, and the seconds until a Ready pod
    becomes available (0: none waiting)."""
    spec = _d(rs.get("spec"))
    template_labels = labels_of(_d(spec.get("template")))
    min_ready = rollout.count(spec.get("minReadySeconds"))
    ready = available = labelled = 0
    wait = 0.0
    for pod in pods:
        labels = labels_of(pod)
        if all(labels.get(k) == v for k, v in template_labels.items()):
            labelled += 1
        since = rollout.pod_ready_since(pod)
        if since is None:
            continue
        ready += 1
        if rollout.is_available(pod, min_ready, now):
            available += 1
        else:
            left = min_ready - (now - since).total_seconds()
            wait = left if not wait else min(wait, left)
    status: dict[str, Any] = {"replicas": len(pods), "fullyLabeledReplicas": labelled,
                              "readyReplicas": ready, "availableReplicas": available,
                              "observedGeneration": _meta(rs).get("generation") or 0}
    return {k: v for k, v in status.items() if v or k == "replicas"}, max(wait, 0.0)


def failure_conditions(old: Any, failure: tuple[str, str] | None, now: datetime
                       ) -> list[dict[str, Any]]:
    conditions = [dict(c) for c in (old if isinstance(old, list) else ())
                  if isinstance(c, Mapping) and c.get("type") != "ReplicaFailure"]
    if failure is not None:
        previous = next((c for c in (old or ()) if isinstance(c, Mapping)
                         and c.get("type") == "ReplicaFailure"), None)
        stamp = (previous or {}).get("lastTransitionTime") or timeutil.format_time(now)
        conditions.append({"type": "ReplicaFailure", "status": "True", "reason": failure[0],
                           "message": failure[1], "lastTransitionTime": stamp})
    return conditions


class OrphansOfPod:
    """Maps a pod without a controller to the ReplicaSets of its namespace selecting it."""

    def __init__(self) -> None:
        self.owners: runtime.Cache | None = None

    def requests(self, pod: Obj) -> Iterable[runtime.Request]:
        if self.owners is None or controller_uid(pod) is not None:
            return
        namespace = str(_meta(pod).get("namespace") or "")
        labels = labels_of(pod)
        for owner in self.owners.by_index("namespace", namespace):
            chosen = selector_of(owner)
            if chosen is not None and chosen.matches(labels):
                yield runtime.Request(namespace, str(_meta(owner).get("name")))


class ReplicaSetReconciler:
    def __init__(self, mapper: OrphansOfPod, *, now: Callable[[], datetime] | None = None,
                 expectations: Expectations | None = None) -> None:
        self.mapper = mapper
        self.now = now or (lambda: datetime.now(UTC))
        self.expectations = expectations or Expectations()

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.mapper.owners = ctx.cache
        rs = ctx.get(request)
        if rs is None:
            self.expectations.forget(request.key)
            return runtime.Result.done()
        selector = selector_of(rs)
        if selector is None:
            return runtime.Result.done()
        pod_cache = ctx.cache_for(POD)
        uid = str(_meta(rs).get("uid") or "")
        candidates = [p for p in claim_candidates(pod_cache, request.namespace, uid)
                      if rollout.is_active(p) or controller_uid(p) == uid]
        try:
            owned = await claim(ctx.client, rs, candidates, selector, POD, REPLICA_SET)
        except errors.Forbidden:
            return runtime.Result.done()  # the namespace is going
        active = [p for p in owned if rollout.is_active(p)]
        failure: tuple[str, str] | None = None
        if self.expectations.satisfied(request.key, pod_cache) and \
                not _meta(rs).get("deletionTimestamp"):
            failure = await self._manage(rs, request, active, ctx)
        now = self.now()
        status, wait = replica_status(rs, active, now)
        old_status = _d(rs.get("status"))
        conditions = failure_conditions(old_status.get("conditions"), failure, now)
        if conditions:
            status["conditions"] = conditions
        if status != old_status:
            try:
                await ctx.client.update_status({**rs, "status": status}, resource=REPLICA_SET)
            except errors.Conflict:
                return runtime.Result(requeue=True)
            except (errors.NotFound, errors.Forbidden):
                return runtime.Result.done()
        if failure is not None:
            return runtime.Result(requeue=True)
        if wait:
            return runtime.Result.after(wait + 0.05)
        return runtime.Result.done()

    async def _manage(self, rs: Obj, request: runtime.Request, active: list[Obj],
                      ctx: runtime.Context) -> tuple[str, str] | None:
        wanted = rollout.count(_d(rs.get("spec")).get("replicas"))
        diff = len(active) - wanted
        if diff < 0:
            return await self._create(rs, request, min(-diff, BURST), ctx)
        if diff > 0:
            victims = rollout.deletion_order(active)[:min(diff, BURST)]
            return await self._delete(rs, request, victims, ctx)
        return None

    async def _create(self, rs: Obj, request: runtime.Request, wanted: int,
                      ctx: runtime.Context) -> tuple[str, str] | None:
        expectation = self.expectations.expect(request.key)
        pod = pod_from_template(rs, _d(rs.get("spec")).get("template"), *REPLICA_SET)
        batch = 1
        made = 0
        while made < wanted:
            size = min(batch, wanted - made)
            for _ in range(size):
                try:
                    created = await ctx.client.create(pod, namespace=request.namespace)
                except errors.ApiError as e:
                    if isinstance(e, errors.Forbidden) and "being terminated" in str(e):
                        return None
                    return "FailedCreate", str(e)
                made += 1
                await ctx.recorder.normal(rs, "SuccessfulCreate",
                                          f"Created pod: {_meta(created).get('name')}")
                rv = _meta(created).get("resourceVersion")
                if isinstance(rv, str) and rv.isdigit():
                    expectation.created.append(int(rv))
            batch = min(batch * 2, BURST)
        return None

    async def _delete(self, rs: Obj, request: runtime.Request, victims: list[Obj],
                      ctx: runtime.Context) -> tuple[str, str] | None:
        expectation = self.expectations.expect(request.key)
        for pod in victims:
            name = str(_meta(pod).get("name"))
            expectation.deleted.add(f"{request.namespace}/{name}")
            try:
                await ctx.client.delete(POD, name, namespace=request.namespace)
            except errors.NotFound:
                continue
            except errors.ApiError as e:
                expectation.deleted.discard(f"{request.namespace}/{name}")
                return "FailedDelete", str(e)
            await ctx.recorder.normal(rs, "SuccessfulDelete", f"Deleted pod: {name}")
        return None


def replicaset_controller(*, workers: int = 4, now: Callable[[], datetime] | None = None
                          ) -> runtime.Controller:
    mapper = OrphansOfPod()
    return (runtime.Controller(for_=REPLICA_SET,
                               reconcile=ReplicaSetReconciler(mapper, now=now),
                               name="replicaset")
            .owns(POD)
            .watches(POD, mapper)
            .with_options(workers=workers))


__all__ = ["Expectations", "ReplicaSetReconciler", "replicaset_controller"]
