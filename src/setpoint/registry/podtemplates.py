"""What the kinds that embed a pod template share: a label selector over a pod template.

One module for the six kinds (ReplicaSet, Deployment, StatefulSet, DaemonSet, Job, CronJob),
as Kubernetes has one ``ValidateLabelSelector`` and one ``ValidatePodTemplateSpec``:

* :func:`validate_selector` checks a ``metav1.LabelSelector`` as ``ValidateLabelSelector``
  does (qualified keys, label values, known operators with the values they take).
* :func:`validate_controller_selector`: the selector of a controller of long-running pods —
  required, valid, and not empty (``empty selector is invalid for deployment``; Kubernetes
  says ``deployment`` for ReplicaSets too).
* :func:`validate_template` a ``PodTemplateSpec``: its labels, its pod spec, the restart
  policies the owning kind allows, that the selector selects it, and (for ReplicaSets,
  Deployments, StatefulSets and DaemonSets) no ``activeDeadlineSeconds``.
* :func:`validate_controller` all of that for the four controllers of long-running pods.
* :func:`default_template` defaults a template's pod spec as a Pod's is defaulted (but for
  what only a Pod gets, ``enableServiceLinks``) and drops its ``null`` members as Go's
  decoding does, so that templates compare equal when they mean the same.
* :func:`selector_string`, :func:`wide_columns`: the selector in the query syntax (the
  ``/scale`` subresource's ``status.selector``, the SELECTOR column) and ``-o wide``'s
  CONTAINERS IMAGES SELECTOR.

Invariants: pure; validation never raises on malformed input (wrong types are reported, or
were refused earlier by Go-typed decoding).

Non-guarantees: the pod spec is checked as :mod:`podspec` checks pods (not every rule of
Kubernetes' pod validation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from setpoint.apimachinery import errors, fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsonshape import as_dict, as_list
from setpoint.apimachinery.selectors import LabelSelector
from setpoint.registry import podspec, table

Obj = dict[str, Any]

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_SELECTOR_MISMATCH = "`selector` does not match template `labels`"

#: the word of ``empty selector is invalid for …`` and the kind named by ``activeDeadlineSeconds
#: in … is not Supported``, for each controller of long-running pods (as Kubernetes has them)
CONTROLLERS: dict[str, tuple[str, str]] = {
    "ReplicaSet": ("deployment", "ReplicaSet"),
    "Deployment": ("deployment", "ReplicaSet"),
    "StatefulSet": ("statefulset", "StatefulSet"),
    "DaemonSet": ("daemonset", "DaemonSet"),
}




def _labels(where: FieldPath, labels: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in sorted(labels, key=str):
        value = labels[key]
        errs.extend(fields.invalid(where, key, p) for p in validation.is_qualified_name(str(key)))
        if isinstance(value, str):
            errs.extend(fields.invalid(where, value, p)
                        for p in validation.is_valid_label_value(value))
    return errs


def validate_selector(selector: Any, path: FieldPath) -> list[FieldError]:
    """``ValidateLabelSelector``: matchLabels as labels, each expression's key, operator
    and values."""
    selector = as_dict(selector)
    errs = _labels(path.child("matchLabels"), as_dict(selector.get("matchLabels")))
    for i, expr in enumerate(as_list(selector.get("matchExpressions"))):
        expr = as_dict(expr)
        where = path.child("matchExpressions").index(i)
        op, values = expr.get("operator"), as_list(expr.get("values"))
        if op in ("In", "NotIn") and not values:
            errs.append(fields.required(where.child("values"),
                                        "must be specified when `operator` is 'In' or "
                                        "'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            errs.append(fields.forbidden(where.child("values"),
                                         "may not be specified when `operator` is 'Exists' "
                                         "or 'DoesNotExist'"))
        elif op not in _OPERATORS:
            errs.append(fields.invalid(where.child("operator"), op,
                                       "not a valid selector operator"))
        key = str(expr.get("key") or "")
        errs.extend(fields.invalid(where.child("key"), key, p)
                    for p in validation.is_qualified_name(key))
    if not errs and selector_of(selector) is None:
        errs.append(fields.invalid(path, selector, "invalid label selector"))
    return errs


def validate_controller_selector(selector: Any, path: FieldPath, kind: str
                                 ) -> list[FieldError]:
    """The selector of a controller of long-running pods (a key of :data:`CONTROLLERS`)."""
    if selector is None:
        return [fields.required(path, "")]
    errs = validate_selector(selector, path)
    matcher = selector_of(selector)
    if matcher is not None and matcher.empty:
        errs.append(fields.invalid(path, selector,
                                   f"empty selector is invalid for {CONTROLLERS[kind][0]}"))
    return errs


def selector_of(selector: Any) -> LabelSelector | None:
    """The selector as a matcher, or None when it is missing or malformed."""
    if not isinstance(selector, dict):
        return None
    try:
        return LabelSelector.from_dict(selector)
    except errors.ApiError:
        return None


def validate_template(template: Any, selector: Any, path: FieldPath, *,
                      restart_policies: Iterable[str], owner: str | None = None
                      ) -> list[FieldError]:
    """A pod template selected by ``selector`` (None: no selector check). ``owner`` (a key
    of :data:`CONTROLLERS`) forbids ``activeDeadlineSeconds`` as that kind does."""
    if not isinstance(template, dict):
        return [fields.required(path, "")]
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    errs: list[FieldError] = []
    matcher = selector_of(selector)
    if matcher is not None and not matcher.empty and not matcher.matches(
            {str(k): str(v) for k, v in labels.items()}):
        errs.append(fields.invalid(path.child("metadata").child("labels"), labels,
                                   _SELECTOR_MISMATCH))
    errs += _labels(path.child("metadata").child("labels"), labels)
    spec_path = path.child("spec")
    spec = template.get("spec")
    errs += podspec.validate_pod_spec(spec, spec_path)
    allowed = tuple(restart_policies)
    restart = as_dict(spec).get("restartPolicy")
    if restart in podspec.RESTART_POLICIES and restart not in allowed:
        errs.append(fields.not_supported(spec_path.child("restartPolicy"), restart, allowed))
    if owner is not None and as_dict(spec).get("activeDeadlineSeconds") is not None:
        errs.append(fields.forbidden(
            spec_path.child("activeDeadlineSeconds"),
            f"activeDeadlineSeconds in {CONTROLLERS[owner][1]} is not Supported"))
    return errs


def validate_controller(spec: Obj, path: FieldPath, kind: str) -> list[FieldError]:
    """``spec.selector`` and ``spec.template`` of a ReplicaSet, Deployment, StatefulSet or
    DaemonSet: a required, non-empty selector that selects a template of pods that always
    restart and have no deadline."""
    selector = spec.get("selector")
    errs = validate_controller_selector(selector, path.child("selector"), kind)
    errs += validate_template(spec.get("template"), selector, path.child("template"),
                              restart_policies=("Always",), owner=kind)
    return errs


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


def default_template(template: Any) -> None:
    """Default a template (in place): ``null`` members dropped, its pod spec defaulted as a
    Pod's but for ``enableServiceLinks`` (a Pod's own default, not a template's)."""
    if not isinstance(template, dict):
        return
    drop_nulls(template)
    pod = template.get("spec")
    if isinstance(pod, dict):
        links = "enableServiceLinks" in pod
        podspec.default_pod_spec(pod)
        if not links:
            pod.pop("enableServiceLinks", None)


def selector_string(selector: Any) -> str:
    """The selector in the query syntax ("" when missing or malformed)."""
    matcher = selector_of(selector)
    return str(matcher) if matcher is not None else ""


def format_selector(selector: Any) -> str:
    """``kubectl``'s rendering of a LabelSelector (``<none>`` when empty)."""
    return selector_string(selector) or "<none>"


def containers_of(template: Any) -> list[Obj]:
    return [as_dict(c) for c in as_list(as_dict(as_dict(template).get("spec")).get("containers"))]


def containers_and_images(template: Any) -> tuple[str, str]:
    """The CONTAINERS and IMAGES cells of a workload's wide output."""
    containers = containers_of(template)
    return (",".join(str(c.get("name") or "") for c in containers),
            ",".join(str(c.get("image") or "") for c in containers))


def spec_template(obj: Obj) -> Any:
    return as_dict(obj.get("spec")).get("template")


def spec_selector(obj: Obj) -> Any:
    return as_dict(obj.get("spec")).get("selector")


def wide_columns(template_of: Callable[[Obj], Any] = spec_template,
                 selector_of_obj: Callable[[Obj], Any] = spec_selector) -> list[table.Column]:
    """CONTAINERS IMAGES SELECTOR, as ``-o wide`` shows them for workload kinds."""
    def containers(obj: Obj, now: datetime) -> str:
        return containers_and_images(template_of(obj))[0]

    def images(obj: Obj, now: datetime) -> str:
        return containers_and_images(template_of(obj))[1]

    def selector(obj: Obj, now: datetime) -> str:
        return format_selector(selector_of_obj(obj))

    return [
        table.Column("Containers", "string", containers, priority=1,
                     description="Names of each container in the template."),
        table.Column("Images", "string", images, priority=1,
                     description="Images referenced by each container in the template."),
        table.Column("Selector", "string", selector, priority=1,
                     description="Selector that selects the pods."),
    ]
