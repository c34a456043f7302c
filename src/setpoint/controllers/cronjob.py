"""The CronJob controller: Jobs on a schedule, as Kubernetes' CronJob controller (v2) does.

For each CronJob:

- ``status.active`` lists the Jobs it owns that have not finished; a finished one leaves the
  list (event ``SawCompletedJob``), and a successful one moves ``lastSuccessfulTime``;
- unless ``suspend``, the most recent schedule time not yet run (after ``lastScheduleTime``,
  or the creation time, and no earlier than ``startingDeadlineSeconds`` ago) gets a Job named
  ``<cronjob>-<minutes since the epoch>`` from ``jobTemplate`` (annotation
  ``batch.kubernetes.io/cronjob-scheduled-timestamp``, controller owner reference), and
  ``lastScheduleTime``; missed times before it are skipped; more than 100 of them give the
  warning event ``TooManyMissedTimes``; a time older than ``startingDeadlineSeconds`` is
  not run (``MissSchedule``);
- ``concurrencyPolicy``: ``Allow`` runs Jobs side by side, ``Forbid`` skips a time while a
  Job is active, ``Replace`` deletes the active Jobs first;
- finished Jobs beyond ``successfulJobsHistoryLimit`` / ``failedJobsHistoryLimit`` are
  deleted, oldest first (background propagation to their pods).

Schedules are read in ``spec.timeZone`` (the system's tz database), else in UTC. Time is the
injected :class:`~setpoint.apimachinery.clock.Clock`'s; the reconcile is requeued for the
next schedule time, but never later than ``max_wait`` seconds (so a test that moves a fake
clock sees the controller act without waiting for real minutes).

Non-guarantees: a CronJob whose schedule stops parsing (older objects) is skipped with a
``UnparseableSchedule`` warning; the Jobs' own deletion waits for the garbage collector.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import cron, errors, timeutil
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.controllers import job as jobs

Obj = Mapping[str, Any]

CRONJOB: Final = ("batch/v1", "CronJob")
JOB: Final = ("batch/v1", "Job")
SCHEDULED_ANNOTATION: Final = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MAX_MISSED: Final = 100
#: windows (seconds before now) searched for the most recent time after too many missed
_WINDOWS: Final = (3600, 86400, 40 * 86400, 400 * 86400, 6 * 366 * 86400)
_STEPS: Final = 2000


@dataclass(frozen=True, slots=True, kw_only=True)
class CronJobConfig:
    """Options of the CronJob controller."""

    #: the longest a reconcile waits for the next schedule time before looking again
    max_wait: float = 3600.0
    workers: int = 2
    #: the wall clock schedules are read on (None: the system's)
    clock: base_clock.Clock | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.max_wait <= 0:
            raise ValueError("max_wait must be positive")




def _meta(obj: Obj) -> Mapping[str, Any]:
    return as_dict(obj.get("metadata"))


def _time(value: Any) -> datetime | None:
    try:
        return timeutil.parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def zone_of(cronjob: Obj) -> tzinfo | None:
    name = as_dict(cronjob.get("spec")).get("timeZone")
    if name is None:
        return UTC
    try:
        return zoneinfo.ZoneInfo(str(name))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class Due:
    """The most recent unrun schedule time (None: none), how many were missed, the next."""

    time: datetime | None
    missed: int
    next: datetime | None


def most_recent(schedule: cron.Schedule, zone: tzinfo, earliest: datetime,
                now: datetime) -> Due:
    """The last schedule time in ``(earliest, now]``, and how many there were (capped just
    above :data:`MAX_MISSED`)."""
    found: datetime | None = None
    missed = 0
    t = schedule.next(earliest, zone)
    while t is not None and t <= now and missed <= MAX_MISSED:
        found, missed = t, missed + 1
        t = schedule.next(t, zone)
    if t is not None and t <= now:  # too many: find the most recent from a recent window
        for window in _WINDOWS:
            start = max(earliest, now - timedelta(seconds=window))
            last, steps = None, 0
            t = schedule.next(start, zone)
            while t is not None and t <= now and steps < _STEPS:
                last, steps = t, steps + 1
                t = schedule.next(t, zone)
            if last is not None and (t is None or t > now):
                found = last
                break
    return Due(found, missed, schedule.next(now, zone))


def job_name(cronjob: Obj, scheduled: datetime) -> str:
    return f"{_meta(cronjob).get('name')}-{int(scheduled.timestamp()) // 60}"


def job_for(cronjob: Obj, scheduled: datetime, zone: tzinfo) -> dict[str, Any]:
    meta = _meta(cronjob)
    template = as_dict(as_dict(cronjob.get("spec")).get("jobTemplate"))
    tmeta = as_dict(template.get("metadata"))
    annotations = dict(as_dict(tmeta.get("annotations")))
    annotations[SCHEDULED_ANNOTATION] = scheduled.astimezone(zone).isoformat()
    job_meta: dict[str, Any] = {
        "name": job_name(cronjob, scheduled), "namespace": meta.get("namespace"),
        "labels": dict(as_dict(tmeta.get("labels"))), "annotations": annotations,
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                             "name": meta.get("name"), "uid": meta.get("uid"),
                             "controller": True, "blockOwnerDeletion": True}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
            "spec": dict(as_dict(template.get("spec")))}


def _reference(job: Obj) -> dict[str, Any]:
    meta = _meta(job)
    return {"kind": "Job", "namespace": meta.get("namespace"), "name": meta.get("name"),
            "uid": meta.get("uid"), "apiVersion": "batch/v1",
            "resourceVersion": meta.get("resourceVersion")}


def _owned_by(job: Obj, uid: str) -> bool:
    return any(as_dict(r).get("uid") == uid and as_dict(r).get("controller") is True
               for r in as_list(_meta(job).get("ownerReferences")))


class CronJobReconciler:
    def __init__(self, config: CronJobConfig, clock: base_clock.Clock) -> None:
        self.config = config
        self.clock = clock

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        cronjob = ctx.get(request)
        if cronjob is None or _meta(cronjob).get("deletionTimestamp"):
            return runtime.Result.done()
        try:
            return await self._sync(request, ctx, cronjob)
        except errors.Conflict:
            return runtime.Result(requeue=True)

    async def _sync(self, request: runtime.Request, ctx: runtime.Context,
                    cronjob: Obj) -> runtime.Result:
        spec, old_status = as_dict(cronjob.get("spec")), as_dict(cronjob.get("status"))
        uid = str(_meta(cronjob).get("uid") or "")
        owned = [j for j in ctx.cache_for(JOB).by_index("namespace", request.namespace)
                 if _owned_by(j, uid)]
        by_uid = {str(_meta(j).get("uid")): j for j in owned}
        status: dict[str, Any] = {k: v for k, v in old_status.items()}
        active: list[dict[str, Any]] = []
        last_success = _time(old_status.get("lastSuccessfulTime"))
        events: list[tuple[str, str, str]] = []
        listed = {str(as_dict(r).get("uid")) for r in as_list(old_status.get("active"))}
        for ref in as_list(old_status.get("active")):
            found = by_uid.get(str(as_dict(ref).get("uid")))
            if found is None:
                continue  # deleted by someone: no longer active
            if jobs.finished(found):
                state = "Complete" if jobs.is_true(as_dict(found.get("status")), "Complete") \
                    else "Failed"
                events.append(("Normal", "SawCompletedJob",
                               f"Saw completed job: {_meta(found).get('name')}, "
                               f"status: {state}"))
                done_at = _time(as_dict(found.get("status")).get("completionTime"))
                if state == "Complete" and done_at and (last_success is None
                                                        or done_at > last_success):
                    last_success = done_at
                continue
            active.append(_reference(found))
        for job in owned:  # Jobs it owns that the status lost track of
            if str(_meta(job).get("uid")) not in listed and not jobs.finished(job):
                active.append(_reference(job))
        now = self.clock.now()
        requeue = self.config.max_wait
        schedule_text = str(spec.get("schedule") or "")
        zone = zone_of(cronjob)
        try:
            schedule = cron.parse(schedule_text)
        except cron.CronError as e:
            schedule = None
            events.append(("Warning", "UnparseableSchedule",
                           f"unparseable schedule: {schedule_text!r} : {e}"))
        if zone is None:
            events.append(("Warning", "UnknownTimeZone",
                           f"invalid timeZone: {spec.get('timeZone')!r}"))
        to_create: dict[str, Any] | None = None
        to_replace: list[Mapping[str, Any]] = []
        if schedule is not None and zone is not None and spec.get("suspend") is not True:
            earliest = _time(old_status.get("lastScheduleTime")) or _time(
                _meta(cronjob).get("creationTimestamp")) or now
            deadline = spec.get("startingDeadlineSeconds")
            if isinstance(deadline, int):
                earliest = max(earliest, now - timedelta(seconds=deadline))
            due = most_recent(schedule, zone, earliest, now)
            if due.next is not None:
                requeue = min(requeue, max(0.0, (due.next - now).total_seconds()) + 0.001)
            if due.missed > MAX_MISSED:
                events.append(("Warning", "TooManyMissedTimes",
                               "too many missed start times. Set or decrease "
                               ".spec.startingDeadlineSeconds or check clock skew"))
            if due.time is not None:
                name = job_name(cronjob, due.time)
                exists = any(_meta(j).get("name") == name for j in owned)
                policy = spec.get("concurrencyPolicy") or "Allow"
                if exists:
                    status["lastScheduleTime"] = timeutil.format_time(due.time)
                elif isinstance(deadline, int) and due.time + timedelta(
                        seconds=deadline) < now:
                    events.append(("Warning", "MissSchedule",
                                   "Missed scheduled time to start a job: "
                                   f"{timeutil.format_time(due.time)}"))
                elif policy == "Forbid" and active:
                    events.append(("Normal", "JobAlreadyActive",
                                   "Not starting job because prior execution is running and "
                                   "concurrency policy is Forbid"))
                else:
                    if policy == "Replace":
                        to_replace = [by_uid[str(r["uid"])] for r in active
                                      if str(r["uid"]) in by_uid]
                        active = []
                    to_create = job_for(cronjob, due.time, zone)
                    status["lastScheduleTime"] = timeutil.format_time(due.time)
        for job in to_replace:
            try:
                await ctx.client.delete(JOB, str(_meta(job).get("name")),
                                        namespace=request.namespace,
                                        propagation_policy="Background")
                events.append(("Normal", "SuccessfulDelete",
                               f"Deleted job {_meta(job).get('name')}"))
            except errors.NotFound:
                pass
        if to_create is not None:
            try:
                created = await ctx.client.create(to_create, namespace=request.namespace)
                active.append(_reference(created))
                events.append(("Normal", "SuccessfulCreate",
                               f"Created job {_meta(created).get('name')}"))
            except errors.AlreadyExists:
                pass
            except errors.Forbidden:
                return runtime.Result.done()  # the namespace is going
        status["active"] = active or None
        if last_success is not None:
            status["lastSuccessfulTime"] = timeutil.format_time(last_success)
        status = {k: v for k, v in status.items() if v is not None}
        if status != dict(old_status):
            await ctx.client.update_status({**cronjob, "status": status}, resource=CRONJOB)
        events += await self._clean_history(ctx, request.namespace, spec, owned)
        for type_, reason, message in events:
            await ctx.recorder.event(cronjob, type_, reason, message)  # type: ignore[arg-type]
        return runtime.Result.after(requeue)

    async def _clean_history(self, ctx: runtime.Context, namespace: str,
                             spec: Mapping[str, Any], owned: Iterable[Obj]
                             ) -> list[tuple[str, str, str]]:
        events: list[tuple[str, str, str]] = []
        for kind, name in (("Complete", "successfulJobsHistoryLimit"),
                           ("Failed", "failedJobsHistoryLimit")):
            limit = spec.get(name)
            if not isinstance(limit, int):
                continue
            done = [j for j in owned if jobs.is_true(as_dict(j.get("status")), kind)
                    and not _meta(j).get("deletionTimestamp")]
            done.sort(key=lambda j: (str(as_dict(j.get("status")).get("startTime") or ""),
                                     str(_meta(j).get("creationTimestamp") or "")))
            for job in done[:max(0, len(done) - limit)]:
                name = str(_meta(job).get("name"))
                try:
                    await ctx.client.delete(JOB, name, namespace=namespace,
                                            propagation_policy="Background")
                    events.append(("Normal", "SuccessfulDelete", f"Deleted job {name}"))
                except errors.NotFound:
                    pass
        return events


def _cronjob_of_job(job: Obj) -> Iterable[runtime.Request]:
    namespace = str(_meta(job).get("namespace") or "")
    for ref in as_list(_meta(job).get("ownerReferences")):
        ref = as_dict(ref)
        if ref.get("kind") == "CronJob" and ref.get("controller") is True and ref.get("name"):
            yield runtime.Request(namespace, str(ref["name"]))


def cronjob_controller(config: CronJobConfig | None = None) -> runtime.Controller:
    config = config or CronJobConfig()
    return (runtime.Controller(for_=CRONJOB, reconcile=CronJobReconciler(
                config, config.clock or base_clock.SystemClock()), name="cronjob")
            .watches(JOB, _cronjob_of_job)
            .with_options(workers=config.workers))
