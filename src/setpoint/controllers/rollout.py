"""The arithmetic of ReplicaSets and Deployments, pure: what the controllers decide.

* :func:`fenceposts`: ``maxSurge`` rounded up and ``maxUnavailable`` rounded down against
  the desired replicas; both 0 makes ``maxUnavailable`` 1 (Kubernetes' ``ResolveFenceposts``).
* :func:`new_replicas` and :func:`scale_down_old`: one step of a rolling update. Whatever
  the pods do, a step never asks for more than ``replicas + maxSurge`` pods in all, and never
  scales down a ReplicaSet's available pods below ``replicas - maxUnavailable`` available.
* :func:`template_hash`: the ``pod-template-hash`` of a template (FNV-1a over its canonical
  JSON and the collision count, encoded in Kubernetes' safe alphabet).
* :func:`deletion_order`: which pods of a ReplicaSet go first (unscheduled, pending, not ready,
  ready for less time, restarted more, newer).
* :func:`pod_ready_since`, :func:`is_available`: readiness and availability with
  ``minReadySeconds``.

Invariants: no I/O, no clock (``now`` is passed in); malformed objects count as nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from setpoint.apimachinery import intstr, timeutil

Obj = Mapping[str, Any]

HASH_LABEL: Final = "pod-template-hash"
REVISION: Final = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS: Final = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS: Final = "deployment.kubernetes.io/max-replicas"
_SAFE: Final = "bcdfghjklmnpqrstvwxz2456789"


def _d(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def fenceposts(max_surge: Any, max_unavailable: Any, desired: int) -> tuple[int, int]:
    surge = intstr.scaled(max_surge, desired, round_up=True)
    unavailable = intstr.scaled(max_unavailable, desired, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


@dataclass(frozen=True, slots=True)
class Sets:
    """What one step of a rolling update needs to know of a ReplicaSet."""

    replicas: int  # spec.replicas
    available: int  # status.availableReplicas


def new_replicas(desired: int, surge: int, new: Sets, olds: Sequence[Sets]) -> int:
    """The new ReplicaSet's replicas after one step (``NewRSNewReplicas``)."""
    if new.replicas > desired:
        return desired
    total = new.replicas + sum(o.replicas for o in olds)
    most = desired + surge
    if total >= most:
        return new.replicas
    return new.replicas + min(most - total, desired - new.replicas)


def scale_down_old(desired: int, unavailable: int, new: Sets, olds: Sequence[Sets]
                   ) -> list[int]:
    """The old ReplicaSets' replicas after one step (in the order given, oldest first):
    unavailable pods go first, then available ones as far as the minimum allows."""
    replicas = [o.replicas for o in olds]
    total = new.replicas + sum(replicas)
    least = desired - unavailable
    new_unavailable = max(new.replicas - new.available, 0)
    budget = total - least - new_unavailable
    if budget <= 0:
        return replicas
    # first the pods that are not available: scaling them down costs no availability
    for i, old in enumerate(olds):
        if budget <= 0:
            break
        gone = min(budget, max(replicas[i] - old.available, 0))
        replicas[i] -= gone
        budget -= gone
    available = new.available + sum(min(o.available, r) for o, r in zip(olds, replicas,
                                                                           strict=True))
    room = available - least
    for i in range(len(olds)):
        if room <= 0:
            break
        gone = min(room, replicas[i])
        replicas[i] -= gone
        room -= gone
    return replicas


def max_revision(sets: Sequence[Obj]) -> int:
    return max((revision_of(s) for s in sets), default=0)


def revision_of(obj: Obj) -> int:
    text = _d(_d(obj.get("metadata")).get("annotations")).get(REVISION)
    try:
        return int(text) if isinstance(text, str) and len(text) < 19 else 0
    except ValueError:
        return 0


def without_hash(template: Any) -> dict[str, Any]:
    """A copy of a pod template without its ``pod-template-hash`` label."""
    out = copy.deepcopy(dict(_d(template)))
    meta = dict(_d(out.get("metadata")))
    labels = {k: v for k, v in _d(meta.get("labels")).items() if k != HASH_LABEL}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    out["metadata"] = meta
    return out


def same_template(a: Any, b: Any) -> bool:
    return without_hash(a) == without_hash(b)


def template_hash(template: Any, collision_count: int = 0) -> str:
    data = orjson.dumps(without_hash(template), option=orjson.OPT_SORT_KEYS)
    if collision_count:
        data += str(collision_count).encode()
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[ord(ch) % len(_SAFE)] for ch in str(value))


# --- pods ------------------------------------------------------------------------------------


def is_active(pod: Obj) -> bool:
    """Counted by a ReplicaSet: not finished, not being deleted."""
    phase = _d(pod.get("status")).get("phase")
    return phase not in ("Succeeded", "Failed") and \
        not _d(pod.get("metadata")).get("deletionTimestamp")


def pod_ready_since(pod: Obj) -> datetime | None:
    """When the pod became Ready, or None when it is not Ready."""
    for condition in _l(_d(pod.get("status")).get("conditions")):
        condition = _d(condition)
        if condition.get("type") == "Ready":
            if condition.get("status") != "True":
                return None
            try:
                return timeutil.parse_time(str(condition.get("lastTransitionTime")))
            except ValueError:
                return datetime.min.replace(tzinfo=UTC)
    return None


def is_available(pod: Obj, min_ready_seconds: int, now: datetime) -> bool:
    since = pod_ready_since(pod)
    if since is None:
        return False
    return min_ready_seconds <= 0 or (now - since).total_seconds() >= min_ready_seconds


def _restarts(pod: Obj) -> int:
    return sum(count(_d(c).get("restartCount"))
               for c in _l(_d(pod.get("status")).get("containerStatuses")))


_PHASE_RANK: Final = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_key(pod: Obj) -> tuple[Any, ...]:
    spec, status, meta = _d(pod.get("spec")), _d(pod.get("status")), _d(pod.get("metadata"))
    since = pod_ready_since(pod)
    cost_text = _d(meta.get("annotations")).get("controller.kubernetes.io/pod-deletion-cost")
    try:
        cost = int(cost_text) if isinstance(cost_text, str) and len(cost_text) < 12 else 0
    except ValueError:
        cost = 0
    created = str(meta.get("creationTimestamp") or "")
    return (1 if spec.get("nodeName") else 0,
            _PHASE_RANK.get(str(status.get("phase")), 0),
            0 if since is None else 1,
            cost,
            # ready for less time first: later ready times sort first
            -(since.timestamp() if since is not None else 0.0),
            -_restarts(pod),
            # newer first: invert the timestamp's characters
            tuple(-ord(c) for c in created))


def deletion_order(pods: Sequence[Obj]) -> list[Obj]:
    """``pods`` in the order a ReplicaSet deletes them, first to go first."""
    return sorted(pods, key=_deletion_key)
