"""Status conditions: ``status.conditions``, as ``metav1.Condition`` defines them.

A condition is ``{type, status, reason, message, lastTransitionTime, observedGeneration}``;
``status`` is ``"True"``, ``"False"`` or ``"Unknown"``. :func:`set_condition` is the pure
list update (controller-runtime's ``meta.SetStatusCondition``); :func:`set_conditions` writes
conditions to an object's ``/status`` with a merge patch, retrying on conflict.

Invariants:

- ``lastTransitionTime`` changes **only when** ``status`` changes; a new reason or message
  alone keeps the old time.
- Conditions keep their order; a new type is appended. At most one condition per type.
- :func:`set_conditions` writes nothing when the conditions would not change (so it can be
  called on every reconcile without causing update events), fills ``observedGeneration``
  from ``metadata.generation`` when not given, and sends the ``resourceVersion`` it read: a
  concurrent writer makes it re-read the object and recompute, up to ``attempts`` times.

Non-guarantees: a merge patch replaces the whole ``conditions`` list, so conditions written
by another controller between our read and our write are kept only because the conflict check
forces a re-read. Objects are never mutated: the functions return new lists and objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from setpoint import client as sp_client
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, regexp, timeutil
from setpoint.client import api as client_api

Obj = Mapping[str, Any]
Status = Literal["True", "False", "Unknown"]

TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"

#: metav1.Condition's reason pattern
_REASON = regexp.Regexp(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_MESSAGE: Final = 32768


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """One condition to set; ``status`` also accepts a bool."""

    type: str
    status: Status | bool
    reason: str
    message: str = ""
    observed_generation: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, bool):
            object.__setattr__(self, "status", TRUE if self.status else FALSE)
        if self.status not in (TRUE, FALSE, UNKNOWN):
            raise ValueError(f"a condition status is True, False or Unknown, not "
                             f"{self.status!r}")
        if not self.type:
            raise ValueError("a condition needs a type")
        if not _REASON.search(self.reason) or len(self.reason) > 1024:
            raise ValueError(f"a condition reason is CamelCase ({_REASON.pattern}), not "
                             f"{self.reason!r}")
        if len(self.message) > MAX_MESSAGE:
            raise ValueError(f"a condition message is at most {MAX_MESSAGE} characters")


def conditions_of(obj: Obj) -> list[dict[str, Any]]:
    """A copy of ``status.conditions`` (empty when absent)."""
    found = (obj.get("status") or {}).get("conditions") or []
    return [dict(c) for c in found if isinstance(c, Mapping)]


def get_condition(obj_or_conditions: Obj | Sequence[Obj], type_: str) -> dict[str, Any] | None:
    """The condition of ``type_`` of an object (or in a list of conditions), or None."""
    items = (conditions_of(obj_or_conditions) if isinstance(obj_or_conditions, Mapping)
             else obj_or_conditions)
    for c in items:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(obj: Obj, type_: str) -> bool:
    found = get_condition(obj, type_)
    return found is not None and found.get("status") == TRUE


def set_condition(conditions: Sequence[Obj], condition: Condition, *,
                  now: datetime) -> list[dict[str, Any]]:
    """``conditions`` with ``condition`` set (a new list; see the module invariants)."""
    out = [dict(c) for c in conditions]
    entry: dict[str, Any] = {"type": condition.type, "status": condition.status,
                             "reason": condition.reason, "message": condition.message,
                             "lastTransitionTime": timeutil.format_time(now)}
    if condition.observed_generation is not None:
        entry["observedGeneration"] = condition.observed_generation
    for i, existing in enumerate(out):
        if existing.get("type") != condition.type:
            continue
        if existing.get("status") == condition.status and existing.get("lastTransitionTime"):
            entry["lastTransitionTime"] = existing["lastTransitionTime"]
        out[i] = entry
        return out
    out.append(entry)
    return out


def remove_condition(conditions: Sequence[Obj], type_: str) -> list[dict[str, Any]]:
    return [dict(c) for c in conditions if c.get("type") != type_]


def resource_of(obj: Obj) -> tuple[str, str]:
    """``(apiVersion, kind)`` of an object, for the client to resolve."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not (isinstance(api_version, str) and api_version and isinstance(kind, str) and kind):
        raise ValueError("the object needs apiVersion and kind (or pass resource=)")
    return api_version, kind


def _with_generation(obj: Obj, condition: Condition) -> Condition:
    if condition.observed_generation is not None:
        return condition
    generation = (obj.get("metadata") or {}).get("generation")
    if not isinstance(generation, int):
        return condition
    return Condition(type=condition.type, status=condition.status, reason=condition.reason,
                     message=condition.message, observed_generation=generation)


def updated_conditions(obj: Obj, conditions: Sequence[Condition], *,
                       now: datetime) -> list[dict[str, Any]]:
    """``obj``'s conditions with ``conditions`` set (observedGeneration filled in)."""
    current = conditions_of(obj)
    for condition in conditions:
        current = set_condition(current, _with_generation(obj, condition), now=now)
    return current


async def set_conditions(client: sp_client.Client, obj: Obj, *conditions: Condition,
                         resource: client_api.ResourceLike | None = None,
                         clock: base_clock.Clock | None = None, attempts: int = 5,
                         field_manager: str | None = None) -> dict[str, Any]:
    """Write ``conditions`` to ``obj``'s status; returns the object as stored.

    Returns ``obj`` (as a dict) unchanged, without a request, when nothing would change.
    Raises ``Conflict`` when every attempt met a concurrent write, ``NotFound`` when the
    object is gone.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    clock = clock or base_clock.SystemClock()
    metadata = obj.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str) or not name:
        raise ValueError("the object has no metadata.name")
    ref = resource if resource is not None else resource_of(obj)
    current: Obj = obj
    last: errors.Conflict | None = None
    for _ in range(attempts):
        wanted = updated_conditions(current, conditions, now=clock.now())
        if wanted == conditions_of(current):
            return dict(current)
        patch = {"metadata": {"resourceVersion": (current.get("metadata") or {}).get(
                     "resourceVersion")},
                 "status": {"conditions": wanted}}
        try:
            return await client.patch_status(ref, name, patch, namespace=namespace,
                                             field_manager=field_manager)
        except errors.Conflict as e:
            last = e
            current = await client.get(ref, name, namespace=namespace)
    assert last is not None
    raise last
