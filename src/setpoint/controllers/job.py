"""The Job controller and the TTL-after-finished controller.

``job`` (:func:`job_controller`) runs a Job's pods to completion, as Kubernetes' job
controller does:

- it keeps ``min(parallelism, completions - succeeded)`` pods running (Indexed Jobs: one pod
  per index not yet completed, lowest first, with the ``batch.kubernetes.io/job-completion-
  index`` annotation and label, ``JOB_COMPLETION_INDEX`` in the environment and the hostname
  ``<job>-<index>``); without ``completions``, until one pod succeeds;
- pods are counted through the tracking finalizer (see :mod:`jobpods`); ``status`` carries
  ``active``, ``ready``, ``succeeded``, ``failed``, ``terminating``, ``startTime``,
  ``completionTime``, ``completedIndexes`` and ``uncountedTerminatedPods``;
- failures beyond ``backoffLimit`` (with ``restartPolicy: OnFailure``, container restarts
  count too) fail the Job with ``reason: BackoffLimitExceeded`` ("Job has reached the
  specified backoff limit"); running longer than ``activeDeadlineSeconds`` with
  ``DeadlineExceeded`` ("Job was active longer than specified deadline"); the active pods
  are deleted, and the conditions ``FailureTarget`` and ``Failed`` are set. After a failure,
  new pods wait ``backoff`` seconds doubling per failure (Kubernetes: 10 s to 6 min);
- once enough pods succeeded: ``SuccessCriteriaMet`` and ``Complete`` (reason
  ``CompletionsReached``), ``completionTime``, remaining pods deleted;
- ``suspend: true`` deletes the active pods and sets ``Suspended`` (``JobSuspended``);
  resuming sets it False (``JobResumed``) and starts the clock again.

A Job being deleted, or gone, holds none of its pods back: the tracking finalizer is removed
from its pods (and from pods whose Job of that name is another one now).

Expectations: the pods created and deleted by a reconcile are remembered until the pod cache
shows them, so a cache that lags behind the controller's own writes never makes it create
a pod twice (nor count one twice).

``ttl-after-finished`` (:func:`ttl_after_finished_controller`) deletes a finished Job
(background propagation of the deletion to its pods) ``ttlSecondsAfterFinished`` after its
``completionTime`` (or its ``Failed`` condition's transition time).

Non-guarantees: no pod failure policy, success policy or backoff limit per index; the
backoff is measured on this process's clock from when it saw the failure (a restarted
controller starts the delay again); pods are created one reconcile at a time, at most
:data:`MAX_BURST` per reconcile.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.client import PatchType
from setpoint.controllers import jobpods

Obj = Mapping[str, Any]

JOB: Final = ("batch/v1", "Job")
POD: Final = ("v1", "Pod")
MAX_BURST: Final = 100
#: seconds before a reconcile waiting for its own writes to show in the cache looks again,
#: and how often it waits before it gives up waiting (someone else deleted a pod)
CATCH_UP_DELAY: Final = 0.05
MAX_CATCH_UP_WAITS: Final = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class JobConfig:
    """Options of the Job controller."""

    #: seconds before pods are created again after the first failure (doubling per failure)
    backoff: float = jobpods.DEFAULT_BACKOFF
    max_backoff: float = jobpods.MAX_BACKOFF
    workers: int = 4

    def __post_init__(self) -> None:
        if self.backoff < 0 or self.max_backoff < self.backoff:
            raise ValueError("backoff must be non-negative and at most max_backoff")




def _now(clock: base_clock.Clock) -> str:
    return timeutil.format_time(clock.now())


def condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in as_list(status.get("conditions")):
        if as_dict(c).get("type") == kind:
            return as_dict(c)
    return None


def is_true(status: Mapping[str, Any], kind: str) -> bool:
    found = condition(status, kind)
    return found is not None and found.get("status") == "True"


def finished(job: Obj) -> bool:
    status = as_dict(job.get("status"))
    return is_true(status, "Complete") or is_true(status, "Failed")


def _set_condition(status: dict[str, Any], kind: str, value: str, reason: str, message: str,
                   now: str) -> None:
    conditions = [dict(c) for c in as_list(status.get("conditions")) if isinstance(c, Mapping)]
    for c in conditions:
        if c.get("type") == kind:
            if c.get("status") != value:
                c["lastTransitionTime"] = now
            c.update({"status": value, "reason": reason, "message": message,
                      "lastProbeTime": now})
            break
    else:
        conditions.append({"type": kind, "status": value, "reason": reason,
                           "message": message, "lastProbeTime": now,
                           "lastTransitionTime": now})
    status["conditions"] = conditions


def _parse(value: Any) -> datetime | None:
    try:
        return timeutil.parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


class Expectations:
    """Pods a reconcile created or deleted, per Job, until the cache shows it."""

    def __init__(self) -> None:
        self._created: dict[str, set[str]] = {}
        self._deleted: dict[str, set[str]] = {}
        self._waits: dict[str, int] = {}

    def created(self, key: str, name: str) -> None:
        self._created.setdefault(key, set()).add(name)

    def deleted(self, key: str, name: str) -> None:
        self._deleted.setdefault(key, set()).add(name)

    def forget(self, key: str) -> None:
        self._created.pop(key, None)
        self._deleted.pop(key, None)
        self._waits.pop(key, None)

    def satisfied(self, key: str, pods: Iterable[Obj]) -> bool:
        created, deleted = self._created.get(key), self._deleted.get(key)
        if not created and not deleted:
            self._waits.pop(key, None)
            return True
        by_name = {str(jobpods.meta(p).get("name")): p for p in pods}
        if created:
            created.difference_update(by_name)
        if deleted:
            deleted.difference_update(
                n for n in list(deleted)
                if n not in by_name or jobpods.meta(by_name[n]).get("deletionTimestamp"))
        if not created and not deleted:
            self.forget(key)
            return True
        waits = self._waits[key] = self._waits.get(key, 0) + 1
        if waits > MAX_CATCH_UP_WAITS:
            self.forget(key)
            return True
        return False


def pod_for(job: Obj, index: int | None) -> dict[str, Any]:
    """A new pod of ``job`` (for ``index`` in Indexed mode)."""
    meta = jobpods.meta(job)
    name = str(meta.get("name"))
    template = copy.deepcopy(dict(as_dict(as_dict(job.get("spec")).get("template"))))
    pod_meta = dict(as_dict(template.get("metadata")))
    labels = dict(as_dict(pod_meta.get("labels")))
    annotations = dict(as_dict(pod_meta.get("annotations")))
    spec = dict(as_dict(template.get("spec")))
    generate = f"{name}-"
    if index is not None:
        annotations[jobpods.INDEX_ANNOTATION] = str(index)
        labels[jobpods.INDEX_LABEL] = str(index)
        generate = f"{name}-{index}-"
        spec.setdefault("hostname", f"{name}-{index}"[:63].rstrip("-"))
        containers = []
        for c in as_list(spec.get("containers")):
            c = dict(as_dict(c))
            env = [e for e in as_list(c.get("env")) if as_dict(e).get("name") != jobpods.INDEX_ENV]
            env.append({"name": jobpods.INDEX_ENV, "valueFrom": {"fieldRef": {
                "apiVersion": "v1",
                "fieldPath": f"metadata.annotations['{jobpods.INDEX_ANNOTATION}']"}}})
            c["env"] = env
            containers.append(c)
        spec["containers"] = containers
    pod_meta.pop("name", None)
    pod_meta.update({"generateName": generate, "labels": labels,
                     "namespace": meta.get("namespace"),
                     "finalizers": [jobpods.TRACKING_FINALIZER],
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": name, "uid": meta.get("uid"),
                                          "controller": True, "blockOwnerDeletion": True}]})
    if annotations:
        pod_meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec}


class JobReconciler:
    def __init__(self, config: JobConfig, clock: base_clock.Clock) -> None:
        self.config = config
        self.clock = clock
        self.expectations = Expectations()
        #: job uid -> (monotonic time of the last failure seen, failures then)
        self._last_failure: dict[str, tuple[float, int]] = {}

    def _pods(self, ctx: runtime.Context, job: Obj) -> list[Obj]:
        uid = jobpods.uid_of(job)
        namespace = str(jobpods.meta(job).get("namespace") or "")
        return [p for p in ctx.cache_for(POD).by_index("namespace", namespace)
                if jobpods.owned_by(p, uid)]

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        job = ctx.get(request)
        orphans = self._orphans(ctx, request, job)
        if orphans:
            await self._release(ctx, request.namespace, orphans)
        if job is None:
            self.expectations.forget(request.key)
            return runtime.Result(requeue=True) if orphans else runtime.Result.done()
        pods = self._pods(ctx, job)
        if jobpods.meta(job).get("deletionTimestamp"):
            # a Job being deleted creates nothing and holds none of its pods back
            held = [p for p in pods if jobpods.has_finalizer(p)]
            await self._release(ctx, request.namespace, held)
            return runtime.Result(requeue=True) if held else runtime.Result.done()
        if not self.expectations.satisfied(request.key, pods):
            return runtime.Result.after(CATCH_UP_DELAY)
        try:
            return await self._sync(request, ctx, job, pods)
        except errors.Conflict:
            return runtime.Result(requeue=True)
        except errors.NotFound:
            return runtime.Result(requeue=True)

    @staticmethod
    def _orphans(ctx: runtime.Context, request: runtime.Request, job: Obj | None
                 ) -> list[Obj]:
        """Pods with the tracking finalizer whose Job of this name is gone (or is another
        Job now): nobody will count them, so their finalizer goes."""
        uid = jobpods.uid_of(job) if job is not None else None
        found = []
        for pod in ctx.cache_for(POD).by_index("namespace", request.namespace):
            if not jobpods.has_finalizer(pod) or list(_job_of_pod(pod)) != [request]:
                continue
            if uid is None or not jobpods.owned_by(pod, uid):
                found.append(pod)
        return found

    @staticmethod
    async def _release(ctx: runtime.Context, namespace: str, pods: Iterable[Obj]) -> None:
        """Remove the tracking finalizer from ``pods`` (conditional on what was read)."""
        for pod in pods:
            finalizers = [f for f in as_list(jobpods.meta(pod).get("finalizers"))
                          if f != jobpods.TRACKING_FINALIZER]
            try:
                await ctx.client.patch(POD, str(jobpods.meta(pod).get("name")), {
                    "metadata": {"finalizers": finalizers or None,
                                 "resourceVersion": jobpods.meta(pod).get("resourceVersion")}},
                    namespace=namespace, patch_type=PatchType.MERGE)
            except (errors.NotFound, errors.Conflict):
                pass  # gone, or changed: the next reconcile looks again

    async def _sync(self, request: runtime.Request, ctx: runtime.Context, job: Obj,
                    pods: list[Obj]) -> runtime.Result:
        spec, old_status = as_dict(job.get("spec")), as_dict(job.get("status"))
        status: dict[str, Any] = copy.deepcopy(dict(old_status))
        now = _now(self.clock)
        counted = jobpods.tally(old_status, pods)
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        limit = completions if isinstance(completions, int) else 0
        completed = jobpods.parse_indexes(old_status.get("completedIndexes"), limit)
        completed |= {i for i in counted.newly_completed_indexes if i < limit}
        succeeded = int(old_status.get("succeeded") or 0) + counted.newly_succeeded
        failed = int(old_status.get("failed") or 0) + counted.newly_failed
        status["succeeded"] = succeeded
        status["failed"] = failed
        if counted.uncounted_succeeded or counted.uncounted_failed:
            status["uncountedTerminatedPods"] = {
                k: v for k, v in (("succeeded", counted.uncounted_succeeded),
                                  ("failed", counted.uncounted_failed)) if v}
        else:
            status["uncountedTerminatedPods"] = {}
        if indexed:
            status["completedIndexes"] = jobpods.format_indexes(completed)
        succeeded_total = succeeded + len(counted.uncounted_succeeded)
        failed_total = failed + len(counted.uncounted_failed)
        if indexed:
            succeeded_total = max(succeeded_total, len(completed))
        done = finished(job)
        to_delete: list[Obj] = []
        to_create: list[int | None] = []
        requeue_after: float | None = None
        events: list[tuple[str, str, str]] = []
        active = counted.active
        uid = jobpods.uid_of(job)

        if not done:
            suspended = spec.get("suspend") is True
            if suspended:
                to_delete = list(active)
                if not is_true(old_status, "Suspended"):
                    _set_condition(status, "Suspended", "True", "JobSuspended",
                                   "Job suspended", now)
                    status.pop("startTime", None)
                    events.append(("Normal", "Suspended", "Job suspended"))
            else:
                if is_true(old_status, "Suspended"):
                    _set_condition(status, "Suspended", "False", "JobResumed",
                                   "Job resumed", now)
                    status["startTime"] = now
                    events.append(("Normal", "Resumed", "Job resumed"))
                status.setdefault("startTime", now)
                target = condition(old_status, "FailureTarget")
                failure: tuple[str, str] | None = None
                if target is not None and target.get("status") == "True":
                    failure = (str(target.get("reason") or ""), str(target.get("message") or ""))
                if failure is None:
                    failure = self._failure(spec, status, failed_total, counted)
                if failure is None:
                    failure, requeue_after = self._deadline(spec, status)
                complete = is_true(old_status, "SuccessCriteriaMet") or self._complete(
                    spec, succeeded_total, completed, active)
                # the final condition waits until every finished pod is counted
                settled = not counted.uncounted_succeeded and not counted.uncounted_failed
                if failure is not None:
                    reason, message = failure
                    to_delete = list(active)
                    if target is None:
                        _set_condition(status, "FailureTarget", "True", reason, message, now)
                        events.append(("Warning", reason, message))
                    if settled and not active:
                        _set_condition(status, "Failed", "True", reason, message, now)
                        self._last_failure.pop(uid, None)
                elif complete:
                    to_delete = list(active)
                    message = "Reached expected number of succeeded pods"
                    if not is_true(old_status, "SuccessCriteriaMet"):
                        _set_condition(status, "SuccessCriteriaMet", "True",
                                       "CompletionsReached", message, now)
                    if settled and not active:
                        _set_condition(status, "Complete", "True", "CompletionsReached",
                                       message, now)
                        status["completionTime"] = now
                        events.append(("Normal", "Completed", "Job completed"))
                        self._last_failure.pop(uid, None)
                else:
                    to_create, to_delete, wait = self._scale(
                        spec, uid, succeeded_total, completed, active, failed_total,
                        counted.new_failure)
                    if wait is not None:
                        requeue_after = wait if requeue_after is None else min(
                            requeue_after, wait)
        else:
            to_delete = list(active)
        remaining = len(active) - len(to_delete)
        status["active"] = remaining + len(to_create)
        status["ready"] = counted.ready if not to_delete else 0
        status["terminating"] = sum(1 for p in pods
                                    if jobpods.meta(p).get("deletionTimestamp")
                                    and jobpods.phase(p) not in ("Succeeded", "Failed"))
        if status != dict(old_status):
            await ctx.client.update_status({**job, "status": status}, resource=JOB)
        namespace = request.namespace
        await self._release(ctx, namespace, counted.release)
        for pod in to_delete:
            name = str(jobpods.meta(pod).get("name"))
            self.expectations.deleted(request.key, name)
            try:
                await ctx.client.delete(POD, name, namespace=namespace)
                events.append(("Normal", "SuccessfulDelete", f"Deleted pod: {name}"))
            except errors.NotFound:
                pass
        for index in to_create:
            try:
                created = await ctx.client.create(pod_for(job, index), namespace=namespace)
            except errors.Forbidden:
                break  # the namespace is being deleted
            name = str(jobpods.meta(created).get("name"))
            self.expectations.created(request.key, name)
            events.append(("Normal", "SuccessfulCreate", f"Created pod: {name}"))
        for type_, reason, message in events:
            await ctx.recorder.event(job, type_, reason, message)  # type: ignore[arg-type]
        if counted.release:
            return runtime.Result(requeue=True)
        if requeue_after is not None:
            return runtime.Result.after(max(requeue_after, 0.01))
        return runtime.Result.done()

    def _failure(self, spec: Mapping[str, Any], status: Mapping[str, Any], failed: int,
                 counted: jobpods.Tally) -> tuple[str, str] | None:
        limit = spec.get("backoffLimit")
        limit = limit if isinstance(limit, int) else 6
        failures = failed
        restart = as_dict(as_dict(spec.get("template")).get("spec")).get("restartPolicy")
        if restart == "OnFailure":
            failures += counted.restarts
        if failures > limit:
            return "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        return None

    def _deadline(self, spec: Mapping[str, Any], status: Mapping[str, Any]
                  ) -> tuple[tuple[str, str] | None, float | None]:
        deadline = spec.get("activeDeadlineSeconds")
        start = _parse(status.get("startTime"))
        if not isinstance(deadline, int) or start is None:
            return None, None
        left = deadline - (self.clock.now() - start).total_seconds()
        if left <= 0:
            return ("DeadlineExceeded", "Job was active longer than specified deadline"), None
        return None, left

    @staticmethod
    def _complete(spec: Mapping[str, Any], succeeded: int, completed: set[int],
                  active: list[Obj]) -> bool:
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed" and isinstance(completions, int):
            return len(completed) >= completions
        if isinstance(completions, int):
            return succeeded >= completions
        return succeeded > 0 and not active

    def _scale(self, spec: Mapping[str, Any], uid: str, succeeded: int, completed: set[int],
               active: list[Obj], failures: int, new_failure: bool
               ) -> tuple[list[int | None], list[Obj], float | None]:
        wanted = jobpods.wanted_active(spec, succeeded, len(completed))
        if len(active) > wanted:
            newest = sorted(active, key=lambda p: str(jobpods.meta(p).get(
                "creationTimestamp") or ""), reverse=True)
            return [], newest[:len(active) - wanted], None
        missing = min(wanted - len(active), MAX_BURST)
        if missing <= 0:
            return [], [], None
        mono = self.clock.monotonic()
        if new_failure or (failures and uid not in self._last_failure):
            self._last_failure[uid] = (mono, failures)
        wait = None
        seen = self._last_failure.get(uid)
        if seen is not None:
            delay = jobpods.backoff_delay(seen[1], self.config.backoff, self.config.max_backoff)
            if mono < seen[0] + delay:
                wait = seen[0] + delay - mono
                return [], [], wait
        completions = spec.get("completions")
        if spec.get("completionMode") == "Indexed" and isinstance(completions, int):
            return list(jobpods.missing_indexes(completions, completed, active, missing)), [], \
                None
        return [None] * missing, [], None


def _job_of_pod(pod: Obj) -> Iterable[runtime.Request]:
    namespace = str(jobpods.meta(pod).get("namespace") or "")
    for ref in as_list(jobpods.meta(pod).get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("kind") == "Job" and ref.get("controller") is True and \
                str(ref.get("apiVersion", "")).startswith("batch/") and ref.get("name"):
            yield runtime.Request(namespace, str(ref["name"]))


def job_controller(config: JobConfig | None = None, *,
                   clock: base_clock.Clock | None = None) -> runtime.Controller:
    config = config or JobConfig()
    reconciler = JobReconciler(config, clock or base_clock.SystemClock())
    return (runtime.Controller(for_=JOB, reconcile=reconciler, name="job")
            .watches(POD, _job_of_pod)
            .with_options(workers=config.workers))


# --- TTL after finished ----------------------------------------------------------------------


def finish_time(job: Obj) -> datetime | None:
    status = as_dict(job.get("status"))
    if is_true(status, "Complete"):
        return _parse(status.get("completionTime")) or _parse(
            as_dict(condition(status, "Complete")).get("lastTransitionTime"))
    if is_true(status, "Failed"):
        return _parse(as_dict(condition(status, "Failed")).get("lastTransitionTime"))
    return None


class TTLReconciler:
    def __init__(self, clock: base_clock.Clock) -> None:
        self.clock = clock

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        job = ctx.get(request)
        if job is None or jobpods.meta(job).get("deletionTimestamp"):
            return runtime.Result.done()
        ttl = as_dict(job.get("spec")).get("ttlSecondsAfterFinished")
        when = finish_time(job)
        if not isinstance(ttl, int) or when is None:
            return runtime.Result.done()
        left = ttl - (self.clock.now() - when).total_seconds()
        if left > 0:
            return runtime.Result.after(left)
        try:
            await ctx.client.delete(JOB, request.name, namespace=request.namespace,
                                    propagation_policy="Background",
                                    uid=jobpods.uid_of(job))
        except (errors.NotFound, errors.Conflict):
            pass
        return runtime.Result.done()


def ttl_after_finished_controller(*, clock: base_clock.Clock | None = None
                                  ) -> runtime.Controller:
    return runtime.Controller(for_=JOB, reconcile=TTLReconciler(
        clock or base_clock.SystemClock()), name="ttl-after-finished")
