"""What a Job's pods add up to: pure functions the Job controller decides with.

A Job's pods carry the finalizer ``batch.kubernetes.io/job-tracking`` from their creation,
so that a finished pod cannot vanish before it is counted (Kubernetes' pod tracking with
finalizers). :func:`tally` sorts the pods of one Job:

- a pod that finished (``Succeeded``; ``Failed``, or being deleted before it succeeded)
  and still carries the finalizer, whose uid the status does not list yet, is *newly
  terminated*: its uid goes into ``status.uncountedTerminatedPods``;
- a listed uid whose pod is gone or has lost the finalizer is *counted*: it moves from the
  list to ``status.succeeded`` / ``status.failed`` (and ``completedIndexes``);
- listed pods that still carry the finalizer are to be *released* (finalizer removed).

The controller writes the status first, then removes finalizers, so a crash between the
two steps neither loses nor double-counts a pod: the true counts are always
``succeeded + len(uncounted.succeeded)`` and likewise for failures.

Also here: the backoff before a failed Job creates pods again (10 s doubling to 6 min, as
Kubernetes), the indexes of Indexed Jobs (``completedIndexes`` in Kubernetes' ``1-3,5``
form) and the pods a Job wants.

Non-guarantees: ``podFailurePolicy``, ``successPolicy``, ``backoffLimitPerIndex`` and
``maxFailedIndexes`` are not applied.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint.apimachinery.jsonshape import as_dict, as_list

Obj = Mapping[str, Any]

TRACKING_FINALIZER: Final = "batch.kubernetes.io/job-tracking"
INDEX_ANNOTATION: Final = "batch.kubernetes.io/job-completion-index"
INDEX_LABEL: Final = "batch.kubernetes.io/job-completion-index"
INDEX_ENV: Final = "JOB_COMPLETION_INDEX"
DEFAULT_BACKOFF: Final = 10.0
MAX_BACKOFF: Final = 360.0




def meta(obj: Obj) -> Mapping[str, Any]:
    return as_dict(obj.get("metadata"))


def uid_of(obj: Obj) -> str:
    return str(meta(obj).get("uid") or "")


def has_finalizer(pod: Obj) -> bool:
    return TRACKING_FINALIZER in as_list(meta(pod).get("finalizers"))


def phase(pod: Obj) -> str:
    return str(as_dict(pod.get("status")).get("phase") or "")


def is_succeeded(pod: Obj) -> bool:
    return phase(pod) == "Succeeded"


def is_failed(pod: Obj) -> bool:
    """Failed, or being deleted before it succeeded (it will not succeed now)."""
    return phase(pod) == "Failed" or (
        bool(meta(pod).get("deletionTimestamp")) and phase(pod) != "Succeeded")


def is_active(pod: Obj) -> bool:
    return not is_succeeded(pod) and not is_failed(pod)


def is_ready(pod: Obj) -> bool:
    return any(as_dict(c).get("type") == "Ready" and as_dict(c).get("status") == "True"
               for c in as_list(as_dict(pod.get("status")).get("conditions")))


def restarts(pod: Obj) -> int:
    total = 0
    for status in as_list(as_dict(pod.get("status")).get("containerStatuses")):
        count = as_dict(status).get("restartCount")
        if isinstance(count, int) and count > 0:
            total += count
    return total


def index_of(pod: Obj) -> int | None:
    text = as_dict(meta(pod).get("annotations")).get(INDEX_ANNOTATION)
    if isinstance(text, str) and text.isdigit() and len(text) < 10:
        return int(text)
    return None


def owned_by(pod: Obj, uid: str) -> bool:
    return any(as_dict(ref).get("uid") == uid and as_dict(ref).get("controller") is True
               for ref in as_list(meta(pod).get("ownerReferences")))


# --- completed indexes -------------------------------------------------------------------


def parse_indexes(text: Any, limit: int) -> set[int]:
    """``"1-3,5"`` as a set, ignoring what is malformed or not below ``limit``."""
    found: set[int] = set()
    if not isinstance(text, str):
        return found
    for part in text.split(","):
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or len(part) > 21:
            continue
        first, last = int(low), int(high) if high else int(low)
        found.update(range(first, min(last, limit - 1) + 1))
    return found


def format_indexes(indexes: Iterable[int]) -> str:
    ordered = sorted(set(indexes))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


# --- tally -------------------------------------------------------------------------------


@dataclass
class Tally:
    """One Job's pods, sorted (see the module docstring)."""

    active: list[Obj] = field(default_factory=list)
    ready: int = 0
    restarts: int = 0
    #: uids the status lists as terminated and not yet counted, after this tally
    uncounted_succeeded: list[str] = field(default_factory=list)
    uncounted_failed: list[str] = field(default_factory=list)
    #: counts and indexes moved out of the uncounted lists by this tally
    newly_succeeded: int = 0
    newly_failed: int = 0
    newly_completed_indexes: set[int] = field(default_factory=set)
    #: pods whose finalizer can go (their uid is listed)
    release: list[Obj] = field(default_factory=list)
    #: whether a pod failed that was not known to have failed before
    new_failure: bool = False


def tally(status: Mapping[str, Any], pods: Sequence[Obj]) -> Tally:
    out = Tally()
    uncounted = as_dict(status.get("uncountedTerminatedPods"))
    listed_ok = [str(u) for u in as_list(uncounted.get("succeeded"))]
    listed_failed = [str(u) for u in as_list(uncounted.get("failed"))]
    by_uid = {uid_of(p): p for p in pods}
    index_of_uid: dict[str, int | None] = {uid_of(p): index_of(p) for p in pods}
    # listed uids whose pod is gone or released are counted now
    for listed, into_ok in ((listed_ok, True), (listed_failed, False)):
        for uid in listed:
            pod = by_uid.get(uid)
            if pod is not None and has_finalizer(pod):
                (out.uncounted_succeeded if into_ok else out.uncounted_failed).append(uid)
                out.release.append(pod)
                continue
            if into_ok:
                out.newly_succeeded += 1
                index = index_of_uid.get(uid)
                if index is not None:
                    out.newly_completed_indexes.add(index)
            else:
                out.newly_failed += 1
    known = set(listed_ok) | set(listed_failed)
    for pod in pods:
        uid = uid_of(pod)
        if is_active(pod):
            out.active.append(pod)
            out.ready += is_ready(pod)
            out.restarts += restarts(pod)
            continue
        if uid in known or not has_finalizer(pod):
            continue
        if is_succeeded(pod):
            out.uncounted_succeeded.append(uid)
        else:
            out.uncounted_failed.append(uid)
            out.new_failure = True
        out.release.append(pod)
    return out


def backoff_delay(failures: int, base: float = DEFAULT_BACKOFF,
                  maximum: float = MAX_BACKOFF) -> float:
    """Seconds to wait before creating pods again after ``failures`` failures."""
    if failures <= 0:
        return 0.0
    return float(min(maximum, base * 2.0 ** min(failures - 1, 32)))


def missing_indexes(completions: int, completed: set[int], active: Iterable[Obj],
                    wanted: int) -> list[int]:
    """The lowest ``wanted`` indexes neither completed nor held by an active pod."""
    held = {index_of(p) for p in active}
    out: list[int] = []
    for index in range(completions):
        if len(out) >= wanted:
            break
        if index not in completed and index not in held:
            out.append(index)
    return out


def wanted_active(spec: Mapping[str, Any], succeeded: int, completed: int) -> int:
    """How many pods should run now (before backoff), from the spec and the successes.

    ``completed``: for Indexed Jobs, how many indexes have completed (else unused).
    """
    parallelism = spec.get("parallelism")
    parallelism = parallelism if isinstance(parallelism, int) and parallelism >= 0 else 1
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and isinstance(completions, int):
        return max(0, min(parallelism, completions - completed))
    if isinstance(completions, int):
        return max(0, min(parallelism, completions - succeeded))
    return 0 if succeeded > 0 else parallelism
