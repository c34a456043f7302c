"""apps/v1 StatefulSet: defaulting, validation, status and scale, columns.

* **Defaults** (Kubernetes' ``SetDefaults_StatefulSet``): ``replicas: 1``,
  ``podManagementPolicy: OrderedReady``, ``updateStrategy: {type: RollingUpdate,
  rollingUpdate: {partition: 0}}``, ``revisionHistoryLimit: 10``,
  ``persistentVolumeClaimRetentionPolicy`` Retain when deleted and when scaled; the template's
  pod spec as a Pod's; each claim template ``volumeMode: Filesystem`` and ``status.phase:
  Pending``.
* **Validation**: counts not negative; ``podManagementPolicy`` OrderedReady or Parallel;
  ``updateStrategy.type`` RollingUpdate or OnDelete, ``rollingUpdate`` only with
  RollingUpdate, ``partition`` not negative; ``ordinals.start`` not negative; the retention
  policy Retain or Delete; ``serviceName``, when given, a DNS-1123 label (it becomes the pods'
  ``subdomain``); the selector and template as a ReplicaSet's, where the names of
  ``volumeClaimTemplates`` count as volumes the containers may mount.
* **Update**: only ``replicas``, ``ordinals``, ``template``, ``updateStrategy``,
  ``revisionHistoryLimit``, ``persistentVolumeClaimRetentionPolicy`` and ``minReadySeconds``
  may change (``spec: Forbidden: updates to statefulset spec for fields other than ...``).
* **Create** clears the status (``status: {replicas: 0, availableReplicas: 0}``) and sets
  ``generation: 1``; a spec change bumps it.
* **Subresources**: ``/status``, ``/scale``.
* **Columns**: NAME READY AGE, wide CONTAINERS IMAGES.

Non-guarantees: ``volumeClaimTemplates`` are stored and validated only for their names (there
is no PersistentVolumeClaim kind); ``updateStrategy.rollingUpdate.maxUnavailable`` (a
Kubernetes alpha field) is kept but not acted on.

The controller is :mod:`setpoint.controllers.statefulset`.
"""

from __future__ import annotations

import copy
from typing import Any

from setpoint.apimachinery import fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import pods, podtemplates, table, workloads
from setpoint.registry.resources import ResourceInfo, ScaleSpec, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy
from setpoint.registry.workloads import as_dict, as_list

Obj = dict[str, Any]

SCALE = ScaleSpec(".spec.replicas", ".status.replicas")
SPEC = FieldPath.root("spec")
STATUS = FieldPath.root("status")
POLICIES = ("OrderedReady", "Parallel")
UPDATE_STRATEGIES = ("RollingUpdate", "OnDelete")
RETENTION = ("Retain", "Delete")
#: the spec fields an update may change
MUTABLE = ("replicas", "ordinals", "template", "updateStrategy", "revisionHistoryLimit",
           "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
IMMUTABLE_MESSAGE = ("updates to statefulset spec for fields other than 'replicas', "
                     "'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', "
                     "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
                     "forbidden")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def default_statefulset(spec: Obj) -> None:
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if not spec.get("podManagementPolicy"):
        spec["podManagementPolicy"] = "OrderedReady"
    strategy = spec.get("updateStrategy")
    if not isinstance(strategy, dict):
        strategy = spec["updateStrategy"] = {}
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            rolling = strategy["rollingUpdate"] = {}
        if rolling.get("partition") is None:
            rolling["partition"] = 0
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    retention = spec.get("persistentVolumeClaimRetentionPolicy")
    if not isinstance(retention, dict):
        retention = spec["persistentVolumeClaimRetentionPolicy"] = {}
    for name in ("whenDeleted", "whenScaled"):
        if not retention.get(name):
            retention[name] = "Retain"
    for claim in as_list(spec.get("volumeClaimTemplates")):
        if isinstance(claim, dict):
            default_claim(claim)
    podtemplates.default_template(spec.get("template"))


def default_claim(claim: Obj) -> None:
    """A claim template defaulted as Kubernetes defaults a PersistentVolumeClaim (and as Go
    encodes its struct members: ``resources: {}``)."""
    spec = claim.get("spec")
    if not isinstance(spec, dict):
        spec = claim["spec"] = {}
    spec.setdefault("volumeMode", "Filesystem")
    spec.setdefault("resources", {})
    status = claim.get("status")
    if not isinstance(status, dict):
        status = claim["status"] = {}
    status.setdefault("phase", "Pending")


def claim_names(spec: Obj) -> list[str]:
    """The names of the spec's ``volumeClaimTemplates``."""
    return [str(name) for claim in as_list(spec.get("volumeClaimTemplates"))
            if (name := as_dict(as_dict(claim).get("metadata")).get("name"))]


def _with_claim_volumes(spec: Obj) -> Obj:
    """A copy of ``spec`` whose template lists its claims as volumes (for validation)."""
    names = claim_names(spec)
    template = spec.get("template")
    if not names or not isinstance(template, dict) or not isinstance(template.get("spec"),
                                                                      dict):
        return spec
    out = dict(spec)
    out["template"] = copy.deepcopy(template)
    pod = out["template"]["spec"]
    volumes = as_list(pod.get("volumes"))
    have = {as_dict(v).get("name") for v in volumes}
    pod["volumes"] = [*volumes, *({"name": n, "emptyDir": {}} for n in names
                                  if n not in have)]
    return out


def validate_spec(spec: Obj) -> list[FieldError]:
    errs = workloads.validate_counts(spec, SPEC, ("replicas", "minReadySeconds",
                                                  "revisionHistoryLimit"))
    policy = spec.get("podManagementPolicy")
    if policy not in POLICIES:
        errs.append(fields.not_supported(SPEC.child("podManagementPolicy"), policy, POLICIES))
    strategy = as_dict(spec.get("updateStrategy"))
    where = SPEC.child("updateStrategy")
    kind = strategy.get("type")
    if kind not in UPDATE_STRATEGIES:
        errs.append(fields.not_supported(where.child("type"), kind, UPDATE_STRATEGIES))
    rolling = strategy.get("rollingUpdate")
    if kind == "OnDelete" and rolling is not None:
        errs.append(fields.invalid(where.child("rollingUpdate"), rolling,
                                   "only allowed for updateStrategy 'RollingUpdate'"))
    errs += workloads.validate_counts(as_dict(rolling), where.child("rollingUpdate"),
                                      ("partition",))
    errs += workloads.validate_counts(as_dict(spec.get("ordinals")), SPEC.child("ordinals"),
                                      ("start",))
    retention = as_dict(spec.get("persistentVolumeClaimRetentionPolicy"))
    for name in ("whenDeleted", "whenScaled"):
        value = retention.get(name)
        if value not in RETENTION:
            errs.append(fields.not_supported(
                SPEC.child("persistentVolumeClaimRetentionPolicy").child(name), value,
                RETENTION))
    service = spec.get("serviceName")
    if isinstance(service, str) and service:
        errs.extend(fields.invalid(SPEC.child("serviceName"), service, m)
                    for m in validation.is_dns1123_label(service))
    for i, name in enumerate(claim_names(spec)):
        errs.extend(fields.invalid(
            SPEC.child("volumeClaimTemplates").index(i).child("metadata").child("name"), name,
            m) for m in validation.is_dns1123_subdomain(name))
    errs += podtemplates.validate_controller(_with_claim_volumes(spec), SPEC,
                                             "StatefulSet")
    return errs


def validate_status(status: Obj) -> list[FieldError]:
    errs = workloads.validate_counts(status, STATUS, (
        "replicas", "readyReplicas", "currentReplicas", "updatedReplicas",
        "availableReplicas", "observedGeneration", "collisionCount"))
    replicas = _int(status.get("replicas"))
    for name in ("readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"):
        if _int(status.get(name)) > replicas:
            errs.append(fields.invalid(STATUS.child(name), _int(status.get(name)),
                                       "cannot be greater than status.replicas"))
    if _int(status.get("availableReplicas")) > _int(status.get("readyReplicas")):
        errs.append(fields.invalid(STATUS.child("availableReplicas"),
                                   _int(status.get("availableReplicas")),
                                   "cannot be greater than status.readyReplicas"))
    return errs


class StatefulSetStrategy(TypedStrategy):
    type_key = ("apps/v1", "StatefulSet")
    known_fields = frozenset({"spec", "status"})
    uses_generation = True
    allow_unconditional_update = True
    merge_keys = {**pods.pod_spec_merge_keys("spec.template.spec"),
                  "status.conditions": "type"}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_statefulset(spec)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        obj["status"] = {"replicas": 0, "availableReplicas": 0}

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += validate_spec(as_dict(obj.get("spec")))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        new_spec, old_spec = as_dict(new.get("spec")), as_dict(old.get("spec"))
        rest_new = {k: v for k, v in new_spec.items() if k not in MUTABLE}
        rest_old = {k: v for k, v in old_spec.items() if k not in MUTABLE}
        if rest_new != rest_old:
            errs.append(fields.forbidden(SPEC, IMMUTABLE_MESSAGE))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        errs += validate_status(as_dict(new.get("status")))
        return errs

    def scale_selector(self, obj: Obj) -> str | None:
        return podtemplates.selector_string(as_dict(obj.get("spec")).get("selector"))

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return statefulset_columns()


def statefulset_columns() -> list[table.Column]:
    def ready(obj: Obj, now: Any) -> str:
        return (f"{_int(as_dict(obj.get('status')).get('readyReplicas'))}/"
                f"{_int(as_dict(obj.get('spec')).get('replicas'))}")

    return [table.name_column(),
            table.Column("Ready", "string", ready,
                         description="Number of the pod with ready state"),
            table.age_column(),
            *podtemplates.wide_columns()[:2]]


def statefulset_resource() -> tuple[ResourceInfo, type[StatefulSetStrategy]]:
    return (ResourceInfo(group="apps", resource="statefulsets", kind="StatefulSet",
                         singular="statefulset", namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True, scale=SCALE),),
                         short_names=("sts",), categories=("all",)),
            StatefulSetStrategy)
