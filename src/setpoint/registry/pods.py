"""core/v1 Pod: defaulting, validation, immutability, graceful deletion, columns.

* **Create**: the spec is defaulted as Kubernetes defaults it (:mod:`podspec`), then what
  kube-apiserver's admission adds by default: ``serviceAccountName: default`` and, unless
  ``automountServiceAccountToken`` is false, a projected ``kube-api-access-<xxxxx>`` volume
  (token, ``kube-root-ca.crt``, namespace) mounted read-only at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` in every container (ServiceAccount
  admission); tolerations of ``node.kubernetes.io/not-ready`` and ``unreachable`` for 300 s
  (DefaultTolerationSeconds); ``priority: 0`` and ``preemptionPolicy: PreemptLowerPriority``
  (Priority admission, without PriorityClasses). The status starts as ``phase: Pending`` with
  the pod's QoS class.
* **Update**: the spec is immutable but for ``containers[*].image``,
  ``initContainers[*].image``, ``activeDeadlineSeconds`` (set, or lowered), additions to
  ``tolerations`` and removals from ``schedulingGates``, with Kubernetes' message. The
  status goes through ``/status``; ``spec.nodeName`` through ``/binding`` (see
  :mod:`podactions`).
* **Delete**: graceful, as kube-apiserver does it. A DELETE of a pod bound to a node and not
  finished marks it (``deletionTimestamp`` = now + grace, ``deletionGracePeriodSeconds`` =
  grace, from the request or ``terminationGracePeriodSeconds``) and leaves it for the node's
  agent, which deletes it with grace 0 once its containers are gone; a shorter grace period
  shortens the wait, a longer one changes nothing. An unbound or finished pod goes at once.

Non-guarantees: the ServiceAccount named need not exist (Kubernetes refuses such a pod); no
LimitRange, PodSecurity or ResourceQuota admission; quantities are stored as sent, not in
Kubernetes' canonical form.
"""

from __future__ import annotations

import hashlib
from typing import Any

from setpoint.apimachinery import fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.registry import podprinting, podspec, table
from setpoint.registry.options import DeleteOptions
from setpoint.registry.resources import ResourceInfo, SubresourceInfo, VersionInfo
from setpoint.registry.strategy import meta_of
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
API_ACCESS_PREFIX = "kube-api-access-"
TOKEN_EXPIRATION = 3607
DEFAULT_TOLERATION_SECONDS = 300
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

#: the strategic-merge keys of a pod spec, by dotted path below ``spec`` (Kubernetes' struct
#: tags: ``patchMergeKey``), shared with the kinds that embed a pod template
POD_SPEC_MERGE_KEYS = {
    "volumes": "name",
    "initContainers": "name",
    "containers": "name",
    "ephemeralContainers": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
}
CONTAINER_MERGE_KEYS = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
STATUS_MERGE_KEYS = {
    "status.conditions": "type",
    "status.podIPs": "ip",
    "status.hostIPs": "ip",
    "status.resourceClaimStatuses": "name",
    **{f"status.{group}.{field}": key
       for group in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses")
       for field, key in (("allocatedResourcesStatus", "name"), ("volumeMounts", "mountPath"))},
}


def pod_spec_merge_keys(prefix: str) -> dict[str, str]:
    """The merge keys of a pod spec at ``prefix`` (``spec``, ``spec.template.spec``)."""
    keys = {f"{prefix}.{k}": v for k, v in POD_SPEC_MERGE_KEYS.items()}
    for group in ("initContainers", "containers", "ephemeralContainers"):
        keys.update({f"{prefix}.{group}.{k}": v for k, v in CONTAINER_MERGE_KEYS.items()})
    return keys




def qos_class(spec: Obj) -> str:
    """Guaranteed, Burstable or BestEffort, from the containers' requests and limits."""
    containers = [as_dict(c) for c in [*as_list(spec.get("initContainers")),
                                     *as_list(spec.get("containers"))]]
    any_set = False
    guaranteed = True
    for container in containers:
        resources = as_dict(container.get("resources"))
        requests, limits = as_dict(resources.get("requests")), as_dict(resources.get("limits"))
        for name in ("cpu", "memory"):
            if name in requests or name in limits:
                any_set = True
            if name not in limits or requests.get(name, limits.get(name)) != limits.get(name):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _access_volume_name(uid: str) -> str:
    digest = hashlib.sha256(uid.encode()).digest()
    return API_ACCESS_PREFIX + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _admit_service_account(spec: Obj, uid: str) -> None:
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec["serviceAccount"] = "default"
    if spec.get("automountServiceAccountToken") is False:
        return
    containers = [as_dict(c) for c in [*as_list(spec.get("initContainers")),
                                     *as_list(spec.get("containers"))]]
    if any(as_dict(m).get("mountPath") == SERVICE_ACCOUNT_MOUNT
           for c in containers for m in as_list(c.get("volumeMounts"))):
        return  # the pod mounts something of its own there
    name = _access_volume_name(uid)
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        volumes = spec["volumes"] = []
    volumes.append({"name": name, "projected": {"defaultMode": podspec.DEFAULT_MODE, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                              "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}})
    for container in containers:
        mounts = container.get("volumeMounts")
        if not isinstance(mounts, list):
            mounts = container["volumeMounts"] = []
        mounts.append({"name": name, "readOnly": True, "mountPath": SERVICE_ACCOUNT_MOUNT})


def _admit_tolerations(spec: Obj) -> None:
    tolerations = spec.get("tolerations")
    if not isinstance(tolerations, list):
        tolerations = []
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        if any(as_dict(t).get("key") == key and as_dict(t).get("effect") in ("NoExecute", None, "")
               for t in tolerations) or any(
                as_dict(t).get("operator") == "Exists" and not as_dict(t).get("key")
                for t in tolerations):
            continue
        tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS})
    spec["tolerations"] = tolerations


_IMMUTABLE_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)")


def _without_seconds(toleration: Any) -> Obj:
    return {k: v for k, v in as_dict(toleration).items() if k != "tolerationSeconds"}


def validate_spec_update(new: Obj, old: Obj, path: FieldPath) -> list[FieldError]:
    """Kubernetes' pod update rules for ``spec`` (both already defaulted)."""
    errs: list[FieldError] = []
    munged = deep_copy(new)
    for group in ("containers", "initContainers"):
        new_list, old_list = as_list(munged.get(group)), as_list(old.get(group))
        if len(new_list) == len(old_list):
            for n, o in zip(new_list, old_list, strict=True):
                if isinstance(n, dict) and isinstance(o, dict) and n.get("image"):
                    n["image"] = o.get("image")
    new_deadline, old_deadline = new.get("activeDeadlineSeconds"), old.get(
        "activeDeadlineSeconds")
    if new_deadline is not None:
        if old_deadline is not None and old_deadline < new_deadline:
            errs.append(fields.invalid(path.child("activeDeadlineSeconds"), new_deadline,
                                       "must be less than or equal to previous value"))
    elif old_deadline is not None:
        errs.append(fields.invalid(path.child("activeDeadlineSeconds"), None,
                                   "must not update from a positive integer to nil value"))
    munged["activeDeadlineSeconds"] = old_deadline
    if old_deadline is None:
        munged.pop("activeDeadlineSeconds", None)
    new_tolerations = [_without_seconds(t) for t in as_list(new.get("tolerations"))]
    for i, toleration in enumerate(as_list(old.get("tolerations"))):
        if _without_seconds(toleration) not in new_tolerations:
            errs.append(fields.forbidden(path.child("tolerations").index(i),
                                         "existing toleration can not be modified except its "
                                         "tolerationSeconds"))
    munged["tolerations"] = old.get("tolerations")
    if "tolerations" not in old:
        munged.pop("tolerations", None)
    old_gates = [as_dict(g).get("name") for g in as_list(old.get("schedulingGates"))]
    for gate in as_list(new.get("schedulingGates")):
        if as_dict(gate).get("name") not in old_gates:
            errs.append(fields.forbidden(path.child("schedulingGates"),
                                         "only deletion is allowed, but found new scheduling "
                                         f"gate '{as_dict(gate).get('name')}'"))
    munged["schedulingGates"] = old.get("schedulingGates")
    if "schedulingGates" not in old:
        munged.pop("schedulingGates", None)
    if munged != old:
        changed = sorted(k for k in set(munged) | set(old) if munged.get(k) != old.get(k))
        errs.append(fields.forbidden(path, _IMMUTABLE_MESSAGE + "\n  changed: " +
                                     ", ".join(f"spec.{k}" for k in changed)))
    return errs


class PodStrategy(TypedStrategy):
    type_key = ("v1", "Pod")
    return_deleted_object = True
    known_fields = frozenset({"spec", "status"})
    allow_unconditional_update = True
    selectable_fields = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                         "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                         "status.podIP", "status.nominatedNodeName")
    merge_keys = {**pod_spec_merge_keys("spec"), **STATUS_MERGE_KEYS}

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if isinstance(spec, dict):
            podspec.default_pod_spec(spec)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            spec = obj["spec"] = {}
        _admit_service_account(spec, str(meta_of(obj).get("uid", "")))
        _admit_tolerations(spec)
        if spec.get("priority") is None and not spec.get("priorityClassName"):
            spec["priority"] = 0
        if spec.get("preemptionPolicy") is None:
            spec["preemptionPolicy"] = "PreemptLowerPriority"
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        if subresource == "binding":
            return  # the binding wrote spec.nodeName and a condition on a copy of ``old``
        if subresource == "status":
            status = new.get("status")
            meta = new.get("metadata")
            new.clear()
            new.update(deep_copy(old))
            new["status"] = status if status is not None else {}
            if isinstance(meta, dict):  # labels and annotations may change through /status
                for key in ("labels", "annotations"):
                    if key in meta:
                        new["metadata"][key] = meta[key]
                    else:
                        new["metadata"].pop(key, None)
            return
        new["status"] = deep_copy(old.get("status", {}))

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate(obj, version)
        errs += podspec.validate_pod_spec(obj.get("spec"), FieldPath.root("spec"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        errs += validate_spec_update(as_dict(new.get("spec")), as_dict(old.get("spec")),
                                     FieldPath.root("spec"))
        return errs

    def validate_subresource_update(self, new: Obj, old: Obj, version: VersionInfo,
                                    subresource: str) -> list[FieldError]:
        if subresource == "binding":
            return self.validate(new, version)
        if subresource == "status":
            errs = super().validate_update(new, old, version)
            errs += _validate_status(as_dict(new.get("status")), FieldPath.root("status"))
            return errs
        return self.validate_update(new, old, version)

    def grace_period(self, obj: Obj, opts: DeleteOptions) -> int | None:
        spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
        grace = opts.grace_period_seconds
        if grace is None:
            given = spec.get("terminationGracePeriodSeconds")
            grace = given if isinstance(given, int) else podspec.DEFAULT_TERMINATION_GRACE_PERIOD
        if grace < 0:
            grace = 1  # as kube-apiserver: negative means as soon as possible, gracefully
        if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
            return 0  # nobody is running it: nothing to wait for
        return grace

    def blocks_deletion(self, obj: Obj) -> bool:
        grace = meta_of(obj).get("deletionGracePeriodSeconds")
        return isinstance(grace, int) and grace > 0

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
        labels["spec.nodeName"] = str(spec.get("nodeName") or "")
        labels["spec.restartPolicy"] = str(spec.get("restartPolicy") or "")
        labels["spec.schedulerName"] = str(spec.get("schedulerName") or "")
        labels["spec.serviceAccountName"] = str(spec.get("serviceAccountName") or "")
        labels["spec.hostNetwork"] = "true" if spec.get("hostNetwork") is True else "false"
        labels["status.phase"] = str(status.get("phase") or "")
        labels["status.podIP"] = str(status.get("podIP") or "")
        labels["status.nominatedNodeName"] = str(status.get("nominatedNodeName") or "")
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return podprinting.pod_columns()


PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def _validate_status(status: Obj, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    phase = status.get("phase")
    if phase and phase not in PHASES:
        errs.append(fields.not_supported(path.child("phase"), phase, PHASES))
    for name in ("containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses"):
        for i, cs in enumerate(as_list(status.get(name))):
            restarts = as_dict(cs).get("restartCount")
            if isinstance(restarts, int) and restarts < 0:
                errs.append(fields.invalid(path.child(name).index(i).child("restartCount"),
                                           restarts, "must be greater than or equal to 0"))
    return errs


def pod_resource() -> tuple[ResourceInfo, type[PodStrategy]]:
    return (ResourceInfo(group="", resource="pods", kind="Pod", singular="pod",
                         namespaced=True,
                         versions=(VersionInfo("v1", storage=True, status=True),),
                         short_names=("po",), categories=("all",),
                         extra_subresources=(
                             SubresourceInfo("binding", ("create",), "Binding", "", "v1"),
                             SubresourceInfo("eviction", ("create",), "Eviction", "policy",
                                             "v1"),
                             # served by the pod's node agent (server/nodeproxy.py)
                             SubresourceInfo("attach", ("create", "get"), "PodAttachOptions",
                                             "", "v1"),
                             SubresourceInfo("exec", ("create", "get"), "PodExecOptions",
                                             "", "v1"),
                             SubresourceInfo("log", ("get",), "Pod", "", "v1"),
                             SubresourceInfo("portforward", ("create", "get"),
                                             "PodPortForwardOptions", "", "v1"))),
            PodStrategy)
