"""What the apps/v1 kinds share besides their pod template (see :mod:`podtemplates`):
non-negative counts, replica status, an immutable selector.

* :func:`validate_counts` checks the non-negative integers of a spec or a status.
* :func:`validate_replica_status`: a ReplicaSet's or Deployment's status counts
  (``ValidateReplicaSetStatus``).
* :func:`immutable_selector`: ``spec.selector`` may not change on update.

Invariants: pure; validation never raises on malformed input (wrong types are reported, or
were refused earlier by Go-typed decoding).
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import fields, validation
from setpoint.apimachinery.fields import FieldError, FieldPath

Obj = dict[str, Any]


def as_dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


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
