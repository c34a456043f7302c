"""What the apps/v1 kinds share: a label selector over a pod template, and their status.

* :func:`default_template` defaults a pod template's spec as a Pod's is defaulted (but for
  what only a Pod gets, ``enableServiceLinks``) and drops its ``null`` members as Go's
  decoding does, so that templates compare equal when they mean the same.
* :func:`validate_selector_and_template`: ``spec.selector`` is required, not empty, a valid
  ``metav1.LabelSelector`` that selects ``spec.template.metadata.labels``; the template's pod
  spec is valid, ``restartPolicy: Always`` and without ``activeDeadlineSeconds`` (Kubernetes'
  ``ValidatePodTemplateSpecForReplicaSet``).
* :func:`validate_counts` checks the non-negative integers of a spec or a status.
* :func:`selector_string` is the selector in the query syntax (the ``/scale`` subresource's
  ``status.selector``, the SELECTOR column).

Invariants: pure; validation never raises on malformed input (wrong types are reported, or
were refused earlier by Go-typed decoding).
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import errors, fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.selectors import LabelSelector
from setpoint.registry import podspec

Obj = dict[str, Any]


def as_dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def drop_nulls(value: Any) -> None:
    """Remove ``null`` members of objects at every depth (in place): Go decodes them to zero
    values that are left out when encoded (``metadata: {creationTimestamp: null}``, which
    kubectl sends in a template it takes from a ReplicaSet)."""
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            drop_nulls(item)
    elif isinstance(value, list):
        for item in value:
            drop_nulls(item)


def default_template(spec: Obj) -> None:
    """Default ``spec.template.spec`` (in place) as a Pod's spec, ``null`` members dropped."""
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    drop_nulls(template)
    pod = template.get("spec")
    if isinstance(pod, dict):
        links = "enableServiceLinks" in pod
        podspec.default_pod_spec(pod)
        if not links:
            pod.pop("enableServiceLinks", None)


def parse_selector(selector: Any) -> LabelSelector | None:
    """The selector, or None when it is missing or not a valid one."""
    if not isinstance(selector, dict):
        return None
    try:
        return LabelSelector.from_dict(selector)
    except errors.ApiError:
        return None


def selector_string(selector: Any) -> str:
    parsed = parse_selector(selector)
    return str(parsed) if parsed is not None else ""


def _selector_errors(selector: Any, path: FieldPath, kind: str) -> tuple[
        LabelSelector | None, list[FieldError]]:
    if selector is None:
        return None, [fields.required(path, "")]
    try:
        parsed = LabelSelector.from_dict(as_dict(selector))
    except errors.ApiError as e:
        return None, [fields.invalid(path, selector, str(e))]
    errs: list[FieldError] = []
    labels = as_dict(as_dict(selector).get("matchLabels"))
    for key in sorted(labels):
        errs.extend(fields.invalid(path.child("matchLabels"), key, m)
                    for m in validation.is_qualified_name(str(key)))
        errs.extend(fields.invalid(path.child("matchLabels"), labels[key], m)
                    for m in validation.is_valid_label_value(str(labels[key])))
    if parsed.empty:
        errs.append(fields.invalid(path, selector, f"empty selector is invalid for {kind}"))
    return parsed, errs


def validate_selector_and_template(spec: Obj, path: FieldPath, kind: str) -> list[FieldError]:
    selector, errs = _selector_errors(spec.get("selector"), path.child("selector"), kind)
    template = spec.get("template")
    where = path.child("template")
    if not isinstance(template, dict):
        return [*errs, fields.required(where, "")]
    meta = as_dict(template.get("metadata"))
    labels = as_dict(meta.get("labels"))
    if selector is not None and not selector.empty and not selector.matches(
            {str(k): str(v) for k, v in labels.items()}):
        errs.append(fields.invalid(where.child("metadata").child("labels"), labels,
                                   "`selector` does not match template `labels`"))
    for key in sorted(labels):
        errs.extend(fields.invalid(where.child("metadata").child("labels"), key, m)
                    for m in validation.is_qualified_name(str(key)))
    pod = template.get("spec")
    errs += podspec.validate_pod_spec(pod, where.child("spec"))
    pod = as_dict(pod)
    policy = pod.get("restartPolicy")
    if policy != "Always":
        errs.append(fields.not_supported(where.child("spec").child("restartPolicy"), policy,
                                         ["Always"]))
    if pod.get("activeDeadlineSeconds") is not None:
        errs.append(fields.forbidden(where.child("spec").child("activeDeadlineSeconds"),
                                     "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errs


def validate_counts(obj: Obj, path: FieldPath, names: tuple[str, ...]) -> list[FieldError]:
    errs: list[FieldError] = []
    for name in names:
        value = obj.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            errs.append(fields.invalid(path.child(name), value,
                                       "must be greater than or equal to 0"))
    return errs


def validate_replica_status(status: Obj, path: FieldPath) -> list[FieldError]:
    """A ReplicaSet's or Deployment's status counts: non-negative, ready <= replicas,
    available <= ready (``ValidateReplicaSetStatus``)."""
    errs = validate_counts(status, path, ("replicas", "fullyLabeledReplicas", "readyReplicas",
                                          "availableReplicas", "observedGeneration",
                                          "updatedReplicas", "unavailableReplicas",
                                          "terminatingReplicas"))

    def count(name: str) -> int:
        value = status.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    if count("readyReplicas") > count("replicas"):
        errs.append(fields.invalid(path.child("readyReplicas"), count("readyReplicas"),
                                   "cannot be greater than status.replicas"))
    if count("availableReplicas") > count("replicas"):
        errs.append(fields.invalid(path.child("availableReplicas"), count("availableReplicas"),
                                   "cannot be greater than status.replicas"))
    if count("availableReplicas") > count("readyReplicas"):
        errs.append(fields.invalid(path.child("availableReplicas"), count("availableReplicas"),
                                   "cannot be greater than readyReplicas"))
    return errs


def immutable_selector(new: Obj, old: Obj, path: FieldPath) -> list[FieldError]:
    selector = new.get("selector")
    if selector != old.get("selector"):
        return [fields.invalid(path.child("selector"), selector, validation.FIELD_IMMUTABLE)]
    return []


def containers_and_images(obj: Obj) -> tuple[str, str]:
    """The CONTAINERS and IMAGES cells of a workload's wide output."""
    containers = [as_dict(c) for c in as_list(as_dict(as_dict(
        as_dict(obj.get("spec")).get("template")).get("spec")).get("containers"))]
    return (",".join(str(c.get("name") or "") for c in containers),
            ",".join(str(c.get("image") or "") for c in containers))
