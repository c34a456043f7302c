"""apps/v1 DaemonSet: defaulting, validation, immutability, columns.

* **Defaults**: ``updateStrategy`` RollingUpdate with ``maxUnavailable: 1`` and
  ``maxSurge: 0``, ``revisionHistoryLimit: 10``, and the pod spec defaults.
* **Validation**: a non-empty selector that selects the template, the template's
  ``restartPolicy`` Always, ``updateStrategy.type`` RollingUpdate or OnDelete,
  ``minReadySeconds`` non-negative. **Update**: the selector is immutable.

Columns: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE, wide CONTAINERS
IMAGES SELECTOR.

Non-guarantees: ``maxUnavailable`` and ``maxSurge`` are checked for their type, not for
the combinations Kubernetes refuses (both zero).
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict
from setpoint.registry import pods, podtemplates, table
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")



class DaemonSetStrategy(TypedStrategy):
    type_key = ("apps/v1", "DaemonSet")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = False
    merge_keys = {**pods.pod_spec_merge_keys("spec.template.spec"),
                  "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        strategy = spec.get("updateStrategy")
        if not isinstance(strategy, dict):
            strategy = spec["updateStrategy"] = {}
        if not strategy.get("type"):
            strategy["type"] = "RollingUpdate"
        if strategy["type"] == "RollingUpdate":
            rolling = strategy.get("rollingUpdate")
            if not isinstance(rolling, dict):
                rolling = strategy["rollingUpdate"] = {}
            rolling.setdefault("maxUnavailable", 1)
            rolling.setdefault("maxSurge", 0)
        if spec.get("revisionHistoryLimit") is None:
            spec["revisionHistoryLimit"] = 10
        podtemplates.default_template(spec.get("template"))

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        spec, path = as_dict(obj.get("spec")), FieldPath.root("spec")
        errs += podtemplates.validate_controller(spec, path, "DaemonSet")
        kind = as_dict(spec.get("updateStrategy")).get("type")
        if kind not in UPDATE_STRATEGIES:
            errs.append(fields.not_supported(path.child("updateStrategy").child("type"), kind,
                                             UPDATE_STRATEGIES))
        for name in ("minReadySeconds", "revisionHistoryLimit"):
            value = spec.get(name)
            if isinstance(value, int) and value < 0:
                errs.append(fields.invalid(path.child(name), value,
                                           "must be greater than or equal to 0"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        new_sel = as_dict(new.get("spec")).get("selector")
        if new_sel != as_dict(old.get("spec")).get("selector"):
            errs.append(fields.invalid(FieldPath.root("spec").child("selector"), new_sel,
                                       "field is immutable"))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        status, path = as_dict(new.get("status")), FieldPath.root("status")
        for name in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled",
                     "numberReady", "updatedNumberScheduled", "numberAvailable",
                     "numberUnavailable"):
            value = status.get(name)
            if isinstance(value, int) and value < 0:
                errs.append(fields.invalid(path.child(name), value,
                                           "must be greater than or equal to 0"))
        return errs

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return daemonset_columns()


def node_selector_text(obj: Obj) -> str:
    chosen = as_dict(as_dict(as_dict(as_dict(obj.get("spec")).get("template")).get("spec")).get(
        "nodeSelector"))
    return ",".join(f"{k}={chosen[k]}" for k in sorted(chosen)) or "<none>"


def daemonset_columns() -> list[table.Column]:
    def count(name: str) -> Any:
        return lambda o, now: int(as_dict(o.get("status")).get(name) or 0)

    return [
        table.name_column(),
        table.Column("Desired", "integer", count("desiredNumberScheduled"),
                     description="The total number of nodes that should be running the "
                                 "daemon pod (including nodes correctly running the daemon "
                                 "pod)."),
        table.Column("Current", "integer", count("currentNumberScheduled"),
                     description="The number of nodes that are running at least 1 daemon "
                                 "pod and are supposed to run the daemon pod."),
        table.Column("Ready", "integer", count("numberReady"),
                     description="The number of nodes that should be running the daemon pod "
                                 "and have one or more of the daemon pod running with a "
                                 "Ready Condition."),
        table.Column("Up-to-date", "integer", count("updatedNumberScheduled"),
                     description="The total number of nodes that are running updated daemon "
                                 "pod"),
        table.Column("Available", "integer", count("numberAvailable"),
                     description="The number of nodes that should be running the daemon pod "
                                 "and have one or more of the daemon pod running and "
                                 "available (ready for at least spec.minReadySeconds)"),
        table.Column("Node Selector", "string", lambda o, now: node_selector_text(o),
                     description="NodeSelector is a selector which must be true for the pod "
                                 "to fit on a node."),
        table.age_column(),
        *podtemplates.wide_columns(),
    ]


def daemonset_resource() -> tuple[ResourceInfo, type[DaemonSetStrategy]]:
    return (ResourceInfo(group="apps", resource="daemonsets", kind="DaemonSet",
                         singular="daemonset", namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("ds",), categories=("all",)),
            DaemonSetStrategy)
