"""What the kinds that embed a pod template share: label selectors, templates, wide columns.

:func:`validate_selector` checks a ``metav1.LabelSelector`` as ``ValidateLabelSelector``
does (qualified keys, label values, known operators with the values they take);
:func:`validate_template` a ``PodTemplateSpec`` (its labels, its pod spec, the restart
policies the owning kind allows, and that the selector selects it).

Non-guarantees: the pod spec is checked as :mod:`podspec` checks pods (not every rule of
Kubernetes' pod validation).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from setpoint.apimachinery import errors, fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.selectors import LabelSelector
from setpoint.registry import podspec, table

Obj = dict[str, Any]

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_SELECTOR_MISMATCH = "`selector` does not match template `labels`"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def validate_selector(selector: Any, path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    selector = _dict(selector)
    for key, value in _dict(selector.get("matchLabels")).items():
        where = path.child("matchLabels")
        errs.extend(fields.invalid(where, key, p) for p in validation.is_qualified_name(key))
        if isinstance(value, str):
            errs.extend(fields.invalid(where, value, p)
                        for p in validation.is_valid_label_value(value))
    for i, expr in enumerate(_list(selector.get("matchExpressions"))):
        expr = _dict(expr)
        where = path.child("matchExpressions").index(i)
        op, values = expr.get("operator"), _list(expr.get("values"))
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
    return errs


def selector_of(selector: Any) -> LabelSelector | None:
    """The selector as a matcher, or None when it is malformed."""
    try:
        return LabelSelector.from_dict(_dict(selector))
    except errors.ApiError:
        return None


def validate_template(template: Any, selector: Any, path: FieldPath, *,
                      restart_policies: Iterable[str]) -> list[FieldError]:
    """A pod template selected by ``selector`` (None: no selector check)."""
    if not isinstance(template, dict):
        return [fields.required(path)]
    errs: list[FieldError] = []
    labels = _dict(_dict(template.get("metadata")).get("labels"))
    for key, value in labels.items():
        where = path.child("metadata").child("labels")
        errs.extend(fields.invalid(where, key, p) for p in validation.is_qualified_name(key))
        if isinstance(value, str):
            errs.extend(fields.invalid(where, value, p)
                        for p in validation.is_valid_label_value(value))
    if selector is not None:
        matcher = selector_of(selector)
        if matcher is not None and not matcher.empty and not matcher.matches(
                {str(k): str(v) for k, v in labels.items()}):
            errs.append(fields.invalid(path.child("metadata").child("labels"), labels,
                                       _SELECTOR_MISMATCH))
    spec_path = path.child("spec")
    spec = template.get("spec")
    errs += podspec.validate_pod_spec(spec, spec_path)
    allowed = tuple(restart_policies)
    restart = _dict(spec).get("restartPolicy")
    if restart in podspec.RESTART_POLICIES and restart not in allowed:
        errs.append(fields.not_supported(spec_path.child("restartPolicy"), restart, allowed))
    return errs


def default_template(template: Any) -> None:
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        podspec.default_pod_spec(template["spec"])


def format_selector(selector: Any) -> str:
    """``kubectl``'s rendering of a LabelSelector (``<none>`` when empty)."""
    matcher = selector_of(selector)
    text = str(matcher) if matcher is not None else ""
    return text or "<none>"


def containers_of(template: Any) -> list[Obj]:
    return [_dict(c) for c in _list(_dict(_dict(template).get("spec")).get("containers"))]


def wide_columns(template_of: Any, selector_of_obj: Any) -> list[table.Column]:
    """CONTAINERS IMAGES SELECTOR, as ``-o wide`` shows them for workload kinds."""
    def containers(obj: Obj, now: datetime) -> str:
        return ",".join(str(c.get("name") or "") for c in containers_of(template_of(obj)))

    def images(obj: Obj, now: datetime) -> str:
        return ",".join(str(c.get("image") or "") for c in containers_of(template_of(obj)))

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
