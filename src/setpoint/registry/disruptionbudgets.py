"""policy/v1 PodDisruptionBudget: validation, status, columns.

* **Validation** (Kubernetes' ``ValidatePodDisruptionBudgetSpec``): ``minAvailable`` and
  ``maxUnavailable`` are not both set; each is a non-negative integer or a percent string of
  at most 100%; the selector is a valid label selector (an empty one selects every pod of the
  namespace, a missing one none); ``unhealthyPodEvictionPolicy`` is ``IfHealthyBudget`` or
  ``AlwaysAllow`` when set. The spec may change after creation (as since Kubernetes 1.15).
* **No defaults**: policy/v1 leaves a budget with neither field as it is (it then allows
  every healthy pod to go; the disruption controller computes ``desiredHealthy: 0``).
* **Create** clears the status and sets ``generation: 1``; a spec change bumps the
  generation, so the eviction subresource refuses evictions until the disruption controller
  has observed it.
* **/status**: the counts (``disruptionsAllowed``, ``currentHealthy``, ``desiredHealthy``,
  ``expectedPods``) are non-negative; conditions have a type, a status True/False/Unknown
  and a reason.
* **Columns**: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE (``N/A`` for the
  field not set), as kubectl shows them.

policy/v1beta1 is not served (Kubernetes stopped serving it in 1.25).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from setpoint.apimachinery import fields, intstr, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import podtemplates, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy
from setpoint.registry.workloads import as_dict, as_list, validate_counts

Obj = dict[str, Any]

SPEC: Final = FieldPath.root("spec")
STATUS: Final = FieldPath.root("status")
#: ``spec.unhealthyPodEvictionPolicy`` values
IF_HEALTHY_BUDGET: Final = "IfHealthyBudget"
ALWAYS_ALLOW: Final = "AlwaysAllow"
EVICTION_POLICIES: Final = (ALWAYS_ALLOW, IF_HEALTHY_BUDGET)
CONDITION_STATUSES: Final = ("True", "False", "Unknown")


def _int_or_percent(value: Any, path: FieldPath) -> list[FieldError]:
    errs = [fields.invalid(path, value, m) for m in intstr.percent_errors(value)]
    if intstr.over_100_percent(value):
        errs.append(fields.invalid(path, value, "must not be greater than 100%"))
    return errs


def validate_spec(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    least, most = spec.get("minAvailable"), spec.get("maxUnavailable")
    if least is not None and most is not None:
        errs.append(fields.invalid(SPEC, spec, "minAvailable and maxUnavailable cannot be "
                                               "both set"))
    if least is not None:
        errs += _int_or_percent(least, SPEC.child("minAvailable"))
    if most is not None:
        errs += _int_or_percent(most, SPEC.child("maxUnavailable"))
    selector = spec.get("selector")
    if selector is not None:
        errs += podtemplates.validate_selector(selector, SPEC.child("selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        errs.append(fields.not_supported(SPEC.child("unhealthyPodEvictionPolicy"), policy,
                                         EVICTION_POLICIES))
    return errs


def validate_conditions(conditions: Any, path: FieldPath) -> list[FieldError]:
    """``metav1.Condition`` entries: type, status and reason required, types unique."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, raw in enumerate(as_list(conditions)):
        cond, where = as_dict(raw), path.index(i)
        kind = cond.get("type")
        if not isinstance(kind, str) or not kind:
            errs.append(fields.required(where.child("type"), "must be set"))
        else:
            errs.extend(fields.invalid(where.child("type"), kind, m)
                        for m in validation.is_qualified_name(kind))
            if kind in seen:
                errs.append(fields.duplicate(where.child("type"), kind))
            seen.add(kind)
        if cond.get("status") not in CONDITION_STATUSES:
            errs.append(fields.not_supported(where.child("status"), cond.get("status"),
                                             CONDITION_STATUSES))
        if not cond.get("reason"):
            errs.append(fields.required(where.child("reason"), "must be set"))
        generation = cond.get("observedGeneration")
        if isinstance(generation, int) and generation < 0:
            errs.append(fields.invalid(where.child("observedGeneration"), generation,
                                       "must be greater than or equal to zero"))
    return errs


def cell(value: Any) -> str:
    """A MIN AVAILABLE / MAX UNAVAILABLE cell: the value, or ``N/A``."""
    return "N/A" if value is None else str(value)


class PodDisruptionBudgetStrategy(TypedStrategy):
    type_key = ("policy/v1", "PodDisruptionBudget")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = True
    merge_keys = {"status.conditions": "type"}

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += validate_spec(as_dict(obj.get("spec")))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        status = as_dict(new.get("status"))
        errs += validate_counts(status, STATUS, ("disruptionsAllowed", "currentHealthy",
                                                 "desiredHealthy", "expectedPods"))
        errs += validate_conditions(status.get("conditions"), STATUS.child("conditions"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def spec_cell(name: str) -> Any:
            return lambda o, now: cell(as_dict(o.get("spec")).get(name))

        def allowed(obj: Obj, now: datetime) -> int:
            value = as_dict(obj.get("status")).get("disruptionsAllowed")
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        return [table.name_column(),
                table.Column("Min Available", "string", spec_cell("minAvailable"),
                             description="The minimum number of pods that must be "
                                         "available."),
                table.Column("Max Unavailable", "string", spec_cell("maxUnavailable"),
                             description="The maximum number of pods that may be "
                                         "unavailable."),
                table.Column("Allowed Disruptions", "integer", allowed,
                             description="Calculated number of pods that may be disrupted "
                                         "at this time."),
                table.age_column()]


def pdb_resource() -> tuple[ResourceInfo, type[PodDisruptionBudgetStrategy]]:
    return (ResourceInfo(group="policy", resource="poddisruptionbudgets",
                         kind="PodDisruptionBudget", singular="poddisruptionbudget",
                         namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("pdb",)),
            PodDisruptionBudgetStrategy)
