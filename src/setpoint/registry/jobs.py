"""batch/v1 Job: defaulting, the generated selector, validation, immutability, columns.

* **Defaults** (``SetDefaults_Job``): ``parallelism`` 1 (and ``completions`` 1 when neither
  is given), ``backoffLimit`` 6, ``completionMode: NonIndexed``, ``suspend: false``,
  ``podReplacementPolicy: TerminatingOrFailed`` (``Failed`` with a pod failure policy), the
  Job's labels from the template's when it has none, and the pod spec defaults.
* **Create**: unless ``manualSelector: true``, the selector is generated
  (``batch.kubernetes.io/controller-uid: <uid>``) and the template gets the labels
  ``controller-uid``, ``batch.kubernetes.io/controller-uid``, ``job-name`` and
  ``batch.kubernetes.io/job-name``; a selector the user wrote that is not the generated one
  is refused (```selector` not auto-generated``). The status is cleared.
* **Validation**: counts non-negative, ``completionMode`` NonIndexed or Indexed (Indexed
  needs ``completions``), the template's ``restartPolicy`` Never or OnFailure, the selector
  selects the template. **Update**: the template, selector, completionMode and
  completions are immutable (``field is immutable``).

Columns: NAME STATUS COMPLETIONS DURATION AGE, wide CONTAINERS IMAGES SELECTOR.

Non-guarantees: the mutable scheduling directives of suspended Jobs, elastic Indexed Jobs
and ``successPolicy`` are not accepted as updates; ``podFailurePolicy`` is stored and
validated only for its shape (the controller does not apply it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from setpoint.apimachinery import fields, timeutil
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import pods, podtemplates, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
COMPLETION_MODES = ("NonIndexed", "Indexed")
RESTART_POLICIES = ("OnFailure", "Never")
DEFAULT_BACKOFF_LIMIT = 6
MAX_INT32 = 2147483647
#: the most completions (and parallelism) an Indexed Job may have
MAX_INDEXED = 100000
_IMMUTABLE = ("template", "selector", "completionMode", "completions")




def default_job_spec(spec: Obj) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = MAX_INT32 if spec.get("backoffLimitPerIndex") is not None \
            else DEFAULT_BACKOFF_LIMIT
    if not spec.get("completionMode"):
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if not spec.get("podReplacementPolicy"):
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") \
            else "TerminatingOrFailed"
    template = spec.get("template")
    podtemplates.default_template(template)


def _non_negative(spec: Obj, name: str, path: FieldPath) -> list[FieldError]:
    value = spec.get(name)
    if isinstance(value, int) and value < 0:
        return [fields.invalid(path.child(name), value, "must be greater than or equal to 0")]
    return []


def validate_job_spec(spec: Obj, path: FieldPath, *, check_selector: bool = True
                      ) -> list[FieldError]:
    errs: list[FieldError] = []
    for name in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        errs += _non_negative(spec, name, path)
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= 0:
        errs.append(fields.invalid(path.child("activeDeadlineSeconds"), deadline,
                                   "must be greater than 0"))
    mode = spec.get("completionMode")
    if mode is not None and mode not in COMPLETION_MODES:
        errs.append(fields.not_supported(path.child("completionMode"), mode,
                                         COMPLETION_MODES))
    elif mode == "Indexed" and spec.get("completions") is None:
        errs.append(fields.required(path.child("completions"),
                                    "when completion mode is Indexed"))
    elif mode == "Indexed":
        for name in ("completions", "parallelism"):
            value = spec.get(name)
            if isinstance(value, int) and value > MAX_INDEXED:
                errs.append(fields.invalid(path.child(name), value,
                                           f"must be less than or equal to {MAX_INDEXED} when "
                                           "completion mode is Indexed"))
    if check_selector:
        if spec.get("selector") is None:
            errs.append(fields.required(path.child("selector")))
        else:
            errs += podtemplates.validate_selector(spec.get("selector"),
                                                   path.child("selector"))
    errs += podtemplates.validate_template(
        spec.get("template"), spec.get("selector") if check_selector else None,
        path.child("template"), restart_policies=RESTART_POLICIES)
    return errs


def generate_selector(obj: Obj) -> None:
    """The labels and selector of a Job whose selector is not manual (at create)."""
    meta, spec = meta_of(obj), obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector") is True:
        return
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    template = spec.get("template")
    if isinstance(template, dict):
        tmeta = template.setdefault("metadata", {})
        if isinstance(tmeta, dict):
            labels = tmeta.get("labels")
            labels = dict(labels) if isinstance(labels, dict) else {}
            labels.update({LEGACY_CONTROLLER_UID_LABEL: uid, CONTROLLER_UID_LABEL: uid,
                           LEGACY_JOB_NAME_LABEL: name, JOB_NAME_LABEL: name})
            tmeta["labels"] = labels
    if spec.get("selector") is None:
        spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}


class JobStrategy(TypedStrategy):
    type_key = ("batch/v1", "Job")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = False
    merge_keys = {**pods.pod_spec_merge_keys("spec.template.spec"),
                  "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        default_job_spec(spec)
        meta = obj.get("metadata")
        labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
        if isinstance(meta, dict) and not meta.get("labels") and labels:
            meta["labels"] = dict(labels)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        obj.setdefault("spec", {})
        generate_selector(obj)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        spec = as_dict(obj.get("spec"))
        path = FieldPath.root("spec")
        errs += validate_job_spec(spec, path)
        if spec.get("manualSelector") is not True and spec.get("selector") is not None:
            uid = str(meta_of(obj).get("uid") or "")
            labels = as_dict(as_dict(spec.get("selector")).get("matchLabels"))
            if labels.get(CONTROLLER_UID_LABEL) != uid and \
                    labels.get(LEGACY_CONTROLLER_UID_LABEL) != uid:
                errs.append(fields.invalid(path.child("selector"), spec.get("selector"),
                                           "`selector` not auto-generated"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
        for name in _IMMUTABLE:
            if new_spec.get(name) != old_spec.get(name):
                errs.append(fields.invalid(FieldPath.root("spec").child(name),
                                           new_spec.get(name), "field is immutable"))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        status, path = as_dict(new.get("status")), FieldPath.root("status")
        for name in ("active", "succeeded", "failed", "ready", "terminating"):
            errs += _non_negative(status, name, path)
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return job_columns()


def _has_condition(status: Obj, kind: str) -> bool:
    return any(as_dict(c).get("type") == kind and as_dict(c).get("status") == "True"
               for c in as_list(status.get("conditions")))


def job_status(obj: Obj) -> str:
    status = as_dict(obj.get("status"))
    if _has_condition(status, "Complete"):
        return "Complete"
    if _has_condition(status, "Failed"):
        return "Failed"
    if meta_of(obj).get("deletionTimestamp"):
        return "Terminating"
    if _has_condition(status, "Suspended"):
        return "Suspended"
    if _has_condition(status, "FailureTarget"):
        return "FailureTarget"
    return "Running"


def job_completions(obj: Obj) -> str:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    succeeded = status.get("succeeded") or 0
    completions = spec.get("completions")
    if isinstance(completions, int):
        return f"{succeeded}/{completions}"
    parallelism = spec.get("parallelism") or 0
    if isinstance(parallelism, int) and parallelism > 1:
        return f"{succeeded}/1 of {parallelism}"
    return f"{succeeded}/1"


def _time(value: Any) -> datetime | None:
    try:
        return timeutil.parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def job_duration(obj: Obj, now: datetime) -> str:
    status = as_dict(obj.get("status"))
    start, end = _time(status.get("startTime")), _time(status.get("completionTime"))
    if start is None:
        return ""
    return timeutil.human_duration(((end or now) - start).total_seconds())


def job_columns() -> list[table.Column]:
    return [
        table.name_column(),
        table.Column("Status", "string", lambda o, now: job_status(o),
                     description="Status of the job."),
        table.Column("Completions", "string", lambda o, now: job_completions(o),
                     description="The completion status of the job."),
        table.Column("Duration", "string", job_duration,
                     description="Time required to complete the job."),
        table.age_column(),
        *podtemplates.wide_columns(),
    ]


def job_resource() -> tuple[ResourceInfo, type[JobStrategy]]:
    return (ResourceInfo(group="batch", resource="jobs", kind="Job", singular="job",
                         namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         categories=("all",)),
            JobStrategy)
