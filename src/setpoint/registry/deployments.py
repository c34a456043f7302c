"""apps/v1 Deployment: defaulting, validation, status and scale, columns.

* **Defaults** (Kubernetes' ``SetDefaults_Deployment``): ``replicas: 1``, ``strategy.type:
  RollingUpdate`` with ``maxUnavailable: 25%`` and ``maxSurge: 25%``,
  ``revisionHistoryLimit: 10``, ``progressDeadlineSeconds: 600``; the template's pod spec as a
  Pod's.
* **Validation**: counts not negative; ``progressDeadlineSeconds`` greater than
  ``minReadySeconds``; the strategy (``Recreate`` takes no ``rollingUpdate``; ``maxSurge`` and
  ``maxUnavailable`` are non-negative integers or percentages, ``maxUnavailable`` at most
  100%, not both 0); the selector and template as a ReplicaSet's; the selector is immutable.
* **Create** clears the status and sets ``generation: 1``; a spec change bumps it (``paused``
  included, as in Kubernetes).
* **Subresources**: ``/status``, ``/scale``.
* **Columns**: NAME READY UP-TO-DATE AVAILABLE AGE, wide CONTAINERS IMAGES SELECTOR.

The controller is :mod:`setpoint.controllers.deployment`.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import fields, intstr
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import pods, podtemplates, replicasets, table, workloads
from setpoint.registry.resources import ResourceInfo, ScaleSpec, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy
from setpoint.registry.workloads import as_dict

Obj = dict[str, Any]

SCALE = ScaleSpec(".spec.replicas", ".status.replicas")
SPEC = FieldPath.root("spec")
STATUS = FieldPath.root("status")
STRATEGIES = ("Recreate", "RollingUpdate")
DEFAULT_SURGE = "25%"
DEFAULT_UNAVAILABLE = "25%"
DEFAULT_HISTORY = 10
DEFAULT_PROGRESS_DEADLINE = 600


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def default_deployment(spec: Obj) -> None:
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = spec.get("strategy")
    if not isinstance(strategy, dict):
        strategy = spec["strategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = DEFAULT_UNAVAILABLE
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = DEFAULT_SURGE
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = DEFAULT_HISTORY
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = DEFAULT_PROGRESS_DEADLINE
    podtemplates.default_template(spec.get("template"))


def _validate_strategy(strategy: Obj, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = strategy.get("type")
    rolling = strategy.get("rollingUpdate")
    if kind not in STRATEGIES:
        errs.append(fields.not_supported(path.child("type"), kind, STRATEGIES))
    if kind == "Recreate" and rolling is not None:
        errs.append(fields.forbidden(path.child("rollingUpdate"),
                                     "may not be specified when strategy `type` is 'Recreate'"))
    if kind != "RollingUpdate":
        return errs
    if not isinstance(rolling, dict):
        return [*errs, fields.required(path.child("rollingUpdate"),
                                       "this should be defaulted and never be nil")]
    where = path.child("rollingUpdate")
    unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
    errs.extend(fields.invalid(where.child("maxUnavailable"), unavailable, m)
                for m in intstr.percent_errors(unavailable))
    if intstr.over_100_percent(unavailable):
        errs.append(fields.invalid(where.child("maxUnavailable"), unavailable,
                                   "must not be greater than 100%"))
    errs.extend(fields.invalid(where.child("maxSurge"), surge, m)
                for m in intstr.percent_errors(surge))
    if intstr.is_zero(unavailable) and intstr.is_zero(surge):
        errs.append(fields.invalid(where.child("maxUnavailable"), unavailable,
                                   "may not be 0 when `maxSurge` is 0"))
    return errs


def validate_deployment_spec(spec: Obj) -> list[FieldError]:
    errs = workloads.validate_counts(spec, SPEC, ("replicas", "minReadySeconds",
                                                  "revisionHistoryLimit",
                                                  "progressDeadlineSeconds"))
    errs += podtemplates.validate_controller(spec, SPEC, "Deployment")
    errs += _validate_strategy(as_dict(spec.get("strategy")), SPEC.child("strategy"))
    deadline = spec.get("progressDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= _int(spec.get("minReadySeconds")):
        errs.append(fields.invalid(SPEC.child("progressDeadlineSeconds"), deadline,
                                   "must be greater than minReadySeconds"))
    return errs


class DeploymentStrategy(TypedStrategy):
    type_key = ("apps/v1", "Deployment")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = True
    merge_keys = {**pods.pod_spec_merge_keys("spec.template.spec"),
                  "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_deployment(spec)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        obj["status"] = {}

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += validate_deployment_spec(as_dict(obj.get("spec")))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        errs += workloads.immutable_selector(as_dict(new.get("spec")),
                                             as_dict(old.get("spec")), SPEC)
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        errs += workloads.validate_replica_status(as_dict(new.get("status")), STATUS)
        return errs

    def scale_selector(self, obj: Obj) -> str | None:
        return podtemplates.selector_string(as_dict(obj.get("spec")).get("selector"))

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def ready(obj: Obj, now: Any) -> str:
            return (f"{_int(as_dict(obj.get('status')).get('readyReplicas'))}/"
                    f"{_int(as_dict(obj.get('spec')).get('replicas'))}")

        def count(name: str) -> Any:
            return lambda o, now: _int(as_dict(o.get("status")).get(name))

        return [table.name_column(),
                table.Column("Ready", "string", ready,
                             description="Number of the pod with ready state"),
                table.Column("Up-to-date", "integer", count("updatedReplicas"),
                             description="Total number of non-terminated pods targeted by "
                                         "this deployment that have the desired template "
                                         "spec."),
                table.Column("Available", "integer", count("availableReplicas"),
                             description="Total number of available pods (ready for at least "
                                         "minReadySeconds) targeted by this deployment."),
                table.age_column(), *replicasets.wide_columns()]


def deployment_resource() -> tuple[ResourceInfo, type[DeploymentStrategy]]:
    return (ResourceInfo(group="apps", resource="deployments", kind="Deployment",
                         singular="deployment", namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True, scale=SCALE),),
                         short_names=("deploy",), categories=("all",)),
            DeploymentStrategy)
