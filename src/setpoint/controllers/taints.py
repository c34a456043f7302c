"""Taints and tolerations: which pods a node repels, and for how long it keeps them.

Pure functions over API dicts (``node.spec.taints``, ``pod.spec.tolerations``), with
Kubernetes' matching rules (``Toleration.ToleratesTaint``):

- a toleration with an ``effect`` matches only taints of that effect; without one, every
  effect;
- ``operator: Exists`` with no ``key`` matches every taint; with a key, every taint of that
  key whatever its value;
- ``operator: Equal`` (the default) matches the taint of that key and that exact value (a
  missing value is the empty string).

The scheduler filters on ``NoSchedule`` and ``NoExecute`` taints and prefers nodes with
fewer untolerated ``PreferNoSchedule`` ones; the taint eviction controller deletes a pod from a
node with a ``NoExecute`` taint the pod does not tolerate, at once, or when the smallest
``tolerationSeconds`` of the tolerations that match has passed since the taint's
``timeAdded``.

Invariants: nothing here mutates its arguments; malformed entries (not mappings, a
non-numeric ``tolerationSeconds``) never raise: a malformed toleration tolerates nothing, a
malformed taint is one with empty fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

Obj = Mapping[str, Any]

NO_SCHEDULE: Final = "NoSchedule"
PREFER_NO_SCHEDULE: Final = "PreferNoSchedule"
NO_EXECUTE: Final = "NoExecute"
#: the effects that keep a pod off a node
FILTER_EFFECTS: Final = frozenset({NO_SCHEDULE, NO_EXECUTE})

#: the taints the node lifecycle controller manages (Kubernetes' well-known keys)
NOT_READY: Final = "node.kubernetes.io/not-ready"
UNREACHABLE: Final = "node.kubernetes.io/unreachable"
UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

#: tolerationSeconds beyond this are taken as this (about 31 years: no overflow downstream)
MAX_TOLERATION_SECONDS: Final = 1 << 30


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def items(value: Any) -> list[Obj]:
    """The mappings of a list field (anything else is ignored)."""
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [v for v in value if isinstance(v, Mapping)]


def node_taints(node: Obj) -> list[Obj]:
    spec = node.get("spec")
    return items(spec.get("taints")) if isinstance(spec, Mapping) else []


def pod_tolerations(pod: Obj) -> list[Obj]:
    spec = pod.get("spec")
    return items(spec.get("tolerations")) if isinstance(spec, Mapping) else []


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Whether ``toleration`` matches ``taint`` (Kubernetes' ``ToleratesTaint``)."""
    effect = _str(toleration.get("effect"))
    if effect and effect != _str(taint.get("effect")):
        return False
    key = _str(toleration.get("key"))
    operator = _str(toleration.get("operator")) or "Equal"
    if key and key != _str(taint.get("key")):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and _str(toleration.get("value")) == _str(taint.get("value"))
    return False


def tolerated(taint: Obj, tolerations: Iterable[Obj]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated(taints: Iterable[Obj], tolerations: Sequence[Obj],
                      effects: frozenset[str] = FILTER_EFFECTS) -> Obj | None:
    """The first taint with one of ``effects`` that no toleration matches, or None."""
    for taint in taints:
        if _str(taint.get("effect")) in effects and not tolerated(taint, tolerations):
            return taint
    return None


def untolerated_reason(taint: Obj) -> str:
    """The scheduler's reason for a node kept off by ``taint``."""
    return (f"node(s) had untolerated taint {{{_str(taint.get('key'))}: "
            f"{_str(taint.get('value'))}}}")


def intolerable_preferences(taints: Iterable[Obj], tolerations: Sequence[Obj]) -> int:
    """How many ``PreferNoSchedule`` taints the tolerations leave untolerated (the
    scheduler's TaintToleration score counts them; tolerations with another effect than
    PreferNoSchedule or none do not count here, as in Kubernetes)."""
    preferring = [t for t in tolerations
                  if _str(t.get("effect")) in ("", PREFER_NO_SCHEDULE)]
    return sum(1 for taint in taints
               if _str(taint.get("effect")) == PREFER_NO_SCHEDULE
               and not tolerated(taint, preferring))


def toleration_seconds(toleration: Obj) -> int | None:
    """``tolerationSeconds`` (None: forever); negative counts as 0, as in Kubernetes."""
    seconds = toleration.get("tolerationSeconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return None
    return max(0, min(seconds, MAX_TOLERATION_SECONDS))


def eviction_delay(taints: Iterable[Obj], tolerations: Sequence[Obj],
                   default_tolerations: Sequence[Obj] = ()) -> float | None:
    """How long a pod may stay on a node with ``taints`` (only ``NoExecute`` count),
    counted from each taint's ``timeAdded``: 0 when some taint is not tolerated at all,
    None when every one is tolerated forever, else the smallest ``tolerationSeconds`` of
    the tolerations that match.

    ``default_tolerations`` stand in for tolerations the pod lacks: for a taint none of
    the pod's own tolerations match, the matching defaults apply (what the
    DefaultTolerationSeconds admission plugin would have added to the pod).

    Returns the smallest delay over the taints, ignoring ``timeAdded``; see
    :func:`eviction_deadline` for the absolute time.
    """
    smallest: float | None = None
    for taint in taints:
        if _str(taint.get("effect")) != NO_EXECUTE:
            continue
        delay = _taint_delay(taint, tolerations, default_tolerations)
        if delay is not None:
            smallest = delay if smallest is None else min(smallest, delay)
    return smallest


def _taint_delay(taint: Obj, tolerations: Sequence[Obj],
                 default_tolerations: Sequence[Obj]) -> float | None:
    matching = [t for t in tolerations if tolerates(t, taint)]
    if not matching:
        matching = [t for t in default_tolerations if tolerates(t, taint)]
    if not matching:
        return 0.0
    seconds = [s for s in (toleration_seconds(t) for t in matching) if s is not None]
    # Kubernetes takes the smallest limit among the matching tolerations; none: forever
    return float(min(seconds)) if seconds else None


def eviction_deadline(taints: Iterable[Obj], tolerations: Sequence[Obj], *, now: float,
                      added: Mapping[str, float] | None = None,
                      default_tolerations: Sequence[Obj] = ()) -> float | None:
    """The wall-clock time (seconds since the epoch) the pod is to be evicted at, or None.

    ``added`` maps ``key:effect`` of a taint to the time it was added (``timeAdded``
    parsed); a taint not in it counts as added ``now``.
    """
    deadline: float | None = None
    for taint in taints:
        if _str(taint.get("effect")) != NO_EXECUTE:
            continue
        delay = _taint_delay(taint, tolerations, default_tolerations)
        if delay is None:
            continue
        since = (added or {}).get(taint_id(taint), now)
        when = min(since, now) + delay
        deadline = when if deadline is None else min(deadline, when)
    return deadline


def taint_id(taint: Obj) -> str:
    """``key:effect``: a node has at most one taint of each (Kubernetes validates it)."""
    return f"{_str(taint.get('key'))}:{_str(taint.get('effect'))}"
