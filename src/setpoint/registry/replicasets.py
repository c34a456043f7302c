"""apps/v1 ReplicaSet: defaulting, validation, status and scale, columns.

* **Defaults**: ``replicas: 1``; the template's pod spec as a Pod's (see
  :func:`setpoint.registry.podtemplates.default_template`).
* **Validation**: ``replicas`` and ``minReadySeconds`` not negative; the selector and template
  (:func:`~setpoint.registry.podtemplates.validate_controller`); the selector is
  immutable (apps/v1); through ``/status`` the counts are checked as Kubernetes checks them.
* **Create** clears the status (``status: {replicas: 0}``) and sets ``generation: 1``; a
  spec change bumps the generation.
* **Subresources**: ``/status``; ``/scale`` (autoscaling/v1 Scale whose ``status.selector`` is
  the selector in the query syntax).
* **Columns**: NAME DESIRED CURRENT READY AGE, wide CONTAINERS IMAGES SELECTOR.

The controller that makes pods of it is :mod:`setpoint.controllers.replicaset`.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import pods, podtemplates, table, workloads
from setpoint.registry.resources import ResourceInfo, ScaleSpec, VersionInfo
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy
from setpoint.registry.workloads import as_dict

Obj = dict[str, Any]

SCALE = ScaleSpec(".spec.replicas", ".status.replicas")
SPEC = FieldPath.root("spec")
STATUS = FieldPath.root("status")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def wide_columns() -> list[table.Column]:
    return podtemplates.wide_columns()


class ReplicaSetStrategy(TypedStrategy):
    type_key = ("apps/v1", "ReplicaSet")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = True
    merge_keys = {**pods.pod_spec_merge_keys("spec.template.spec"),
                  "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        if spec.get("replicas") is None:
            spec["replicas"] = 1
        podtemplates.default_template(spec.get("template"))

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        obj["status"] = {"replicas": 0}

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        spec = as_dict(obj.get("spec"))
        errs += workloads.validate_counts(spec, SPEC, ("replicas", "minReadySeconds"))
        errs += podtemplates.validate_controller(spec, SPEC, "ReplicaSet")
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
        def count(part: str, name: str) -> Any:
            return lambda o, now: _int(as_dict(o.get(part)).get(name))

        return [table.name_column(),
                table.Column("Desired", "integer", count("spec", "replicas"),
                             description="Number of desired pods."),
                table.Column("Current", "integer", count("status", "replicas"),
                             description="Number of actively running pods."),
                table.Column("Ready", "integer", count("status", "readyReplicas"),
                             description="Number of ready pods."),
                table.age_column(), *wide_columns()]


def replica_set_resource() -> tuple[ResourceInfo, type[ReplicaSetStrategy]]:
    return (ResourceInfo(group="apps", resource="replicasets", kind="ReplicaSet",
                         singular="replicaset", namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True, scale=SCALE),),
                         short_names=("rs",), categories=("all",)),
            ReplicaSetStrategy)


def name_of(obj: Obj) -> str:
    return str(meta_of(obj).get("name") or "")
