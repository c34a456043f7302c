"""batch/v1 CronJob: defaulting, schedule and time-zone validation, columns.

* **Defaults**: ``concurrencyPolicy: Allow``, ``suspend: false``,
  ``successfulJobsHistoryLimit: 3``, ``failedJobsHistoryLimit: 1``, and the pod spec
  defaults of the job template (not the Job's own defaults: the controller's Job gets them
  when it is created).
* **Validation**: the schedule parses as cron does (:mod:`setpoint.apimachinery.cron`) and
  has no ``TZ=``/``CRON_TZ=`` (``cannot use TZ or CRON_TZ in schedule, use timeZone field
  instead``; an update may keep one that an older object had); ``timeZone`` names a zone
  of the system's tz database (``unknown time zone X``; ``Local`` is refused);
  ``concurrencyPolicy`` Allow, Forbid or Replace; counts non-negative; the name at most 52
  characters (the controller appends ``-<minutes>``); the job template is a valid Job spec
  without a selector (it is generated per Job).

Columns: NAME SCHEDULE TIMEZONE SUSPEND ACTIVE LAST SCHEDULE AGE, wide CONTAINERS IMAGES
SELECTOR.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime
from typing import Any

from setpoint.apimachinery import cron, fields, regexp, timeutil, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict
from setpoint.registry import jobs, pods, podtemplates, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
MAX_NAME_LENGTH = 52
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
_ZONE_PART = regexp.Regexp(r"^[A-Za-z\.\-_0-9+]{1,14}$")



def load_zone(name: str) -> zoneinfo.ZoneInfo | None:
    """The zone ``name`` of the system's tz database, or None."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None


def validate_time_zone(zone: Any, path: FieldPath) -> list[FieldError]:
    if zone is None:
        return []
    if not isinstance(zone, str) or not zone:
        return [fields.invalid(path, zone, "timeZone must be nil or non-empty string")]
    for part in zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.fullmatch(part):
            return [fields.invalid(path, zone, f"unknown time zone {zone}")]
    if zone.lower() == "local":
        return [fields.invalid(path, zone, "timeZone must be an explicit time zone as "
                               "defined in https://www.iana.org/time-zones")]
    if load_zone(zone) is None:
        return [fields.invalid(path, zone, f"unknown time zone {zone}")]
    return []


def validate_schedule(schedule: Any, path: FieldPath, *, allow_tz: bool) -> list[FieldError]:
    if not isinstance(schedule, str) or not schedule:
        return [fields.required(path)]
    errs: list[FieldError] = []
    text = schedule
    if allow_tz and (text.startswith("TZ=") or text.startswith("CRON_TZ=")):
        text = text.split(None, 1)[1] if " " in text else ""
    try:
        cron.parse(text)
    except cron.CronError as e:
        if "TZ" not in schedule:
            errs.append(fields.invalid(path, schedule, str(e)))
    if not allow_tz and "TZ" in schedule:
        errs.append(fields.invalid(path, schedule, "cannot use TZ or CRON_TZ in schedule, "
                                   "use timeZone field instead"))
    return errs


class CronJobStrategy(TypedStrategy):
    type_key = ("batch/v1", "CronJob")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = False
    merge_keys = pods.pod_spec_merge_keys("spec.jobTemplate.spec.template.spec")

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if not spec.get("concurrencyPolicy"):
            spec["concurrencyPolicy"] = "Allow"
        if spec.get("suspend") is None:
            spec["suspend"] = False
        if spec.get("successfulJobsHistoryLimit") is None:
            spec["successfulJobsHistoryLimit"] = DEFAULT_SUCCESSFUL_HISTORY
        if spec.get("failedJobsHistoryLimit") is None:
            spec["failedJobsHistoryLimit"] = DEFAULT_FAILED_HISTORY
        job_spec = as_dict(as_dict(spec.get("jobTemplate")).get("spec"))
        podtemplates.default_template(job_spec.get("template"))

    def check_name(self, name: str) -> list[str]:
        problems = validation.is_dns1123_subdomain(name)
        if len(name) > MAX_NAME_LENGTH:
            problems.append(f"must be no more than {MAX_NAME_LENGTH} characters")
        return problems

    def _validate(self, obj: Obj, *, allow_tz: bool) -> list[FieldError]:
        spec, path = as_dict(obj.get("spec")), FieldPath.root("spec")
        errs = validate_schedule(spec.get("schedule"), path.child("schedule"),
                                 allow_tz=allow_tz)
        errs += validate_time_zone(spec.get("timeZone"), path.child("timeZone"))
        if allow_tz and spec.get("timeZone") is not None and "TZ" in str(
                spec.get("schedule")):
            errs.append(fields.invalid(path.child("schedule"), spec.get("schedule"),
                                       "cannot use both timeZone field and TZ or CRON_TZ in "
                                       "schedule"))
        policy = spec.get("concurrencyPolicy")
        if policy not in CONCURRENCY_POLICIES:
            errs.append(fields.not_supported(path.child("concurrencyPolicy"), policy,
                                             CONCURRENCY_POLICIES))
        for name in ("startingDeadlineSeconds", "successfulJobsHistoryLimit",
                     "failedJobsHistoryLimit"):
            value = spec.get(name)
            if isinstance(value, int) and value < 0:
                errs.append(fields.invalid(path.child(name), value,
                                           "must be greater than or equal to 0"))
        template_path = path.child("jobTemplate").child("spec")
        job_spec = as_dict(as_dict(spec.get("jobTemplate")).get("spec"))
        errs += jobs.validate_job_spec(job_spec, template_path, check_selector=False)
        if job_spec.get("selector") is not None:
            errs.append(fields.invalid(template_path.child("selector"),
                                       job_spec.get("selector"),
                                       "`selector` will be auto-generated"))
        return errs

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + self._validate(obj, allow_tz=False)

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = TypedStrategy.validate(self, new, version)
        errs += validation.validate_object_meta_update(new.get("metadata") or {},
                                                       old.get("metadata") or {})
        allow_tz = "TZ" in str(as_dict(old.get("spec")).get("schedule") or "")
        return errs + self._validate(new, allow_tz=allow_tz)

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        return validation.validate_object_meta_update(new.get("metadata") or {},
                                                      old.get("metadata") or {})

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return cronjob_columns()


def _last_schedule(obj: Obj, now: datetime) -> str:
    value = as_dict(obj.get("status")).get("lastScheduleTime")
    if not isinstance(value, str):
        return "<none>"
    try:
        then = timeutil.parse_time(value)
    except ValueError:
        return "<invalid>"
    return timeutil.human_duration((now - then).total_seconds())


def cronjob_columns() -> list[table.Column]:
    def spec(o: Obj) -> Obj:
        return as_dict(o.get("spec"))

    def template(o: Obj) -> Any:
        return as_dict(as_dict(spec(o).get("jobTemplate")).get("spec")).get("template")

    def selector(o: Obj) -> Any:
        return as_dict(as_dict(spec(o).get("jobTemplate")).get("spec")).get("selector")

    return [
        table.name_column(),
        table.Column("Schedule", "string", lambda o, now: str(spec(o).get("schedule") or ""),
                     description="The schedule in Cron format, see "
                                 "https://en.wikipedia.org/wiki/Cron."),
        table.Column("Timezone", "string",
                     lambda o, now: str(spec(o).get("timeZone") or "<none>"),
                     description="The time zone name for the given schedule."),
        table.Column("Suspend", "boolean", lambda o, now: spec(o).get("suspend") is True,
                     description="This flag tells the controller to suspend subsequent "
                                 "executions."),
        table.Column("Active", "integer", lambda o, now: len(
            as_dict(o.get("status")).get("active") or []),
                     description="A list of pointers to currently running jobs."),
        table.Column("Last Schedule", "string", _last_schedule,
                     description="Information when was the last time the job was "
                                 "successfully scheduled."),
        table.age_column(),
        *podtemplates.wide_columns(template, selector),
    ]


def cronjob_resource() -> tuple[ResourceInfo, type[CronJobStrategy]]:
    return (ResourceInfo(group="batch", resource="cronjobs", kind="CronJob",
                         singular="cronjob", namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("cj",), categories=("all",)),
            CronJobStrategy)

