"""The recent reconciles of each object: why each ran and how it ended, bounded.

A :class:`ReconcileHistory` belongs to one manager. The engines record every reconcile
(:meth:`ReconcileHistory.record`): when it started (wall-clock time), its triggers (see
:mod:`setpoint.runtime.triggers`), how many adds were merged into it, the result label
(``success``, ``error``, ``requeue``, ``requeue_after``), how long it took, and the error's
one-line description. The manager serves it as JSON on ``/debug/reconciles`` (beside
``/metrics``), so "why does this object keep reconciling?" has an answer without a debugger.

Invariants: memory is bounded by :class:`HistoryConfig`: at most ``max_objects`` objects
(over all controllers; the least recently reconciled one is forgotten first) and
``per_object`` entries each (the oldest goes first); every string kept is bounded (keys by the
API's name limits, details by :data:`~setpoint.runtime.triggers.MAX_DETAIL`, errors by
:data:`MAX_ERROR`). Reading returns copies (plain JSON-ready dicts).

Non-guarantees: the history is in memory only and starts empty with each process; an object
forgotten by the bound leaves no trace; times are the clock's, so a test's fake clock shows
its own.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Final

from setpoint.runtime import triggers as rttriggers

#: the longest error description kept
MAX_ERROR: Final = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryConfig:
    """How much reconcile history a manager keeps."""

    #: objects remembered, over all controllers (the least recently reconciled goes first)
    max_objects: int = 1000
    #: reconciles remembered per object (the oldest goes first)
    per_object: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.max_objects <= 1_000_000:
            raise ValueError("max_objects must be between 1 and 1,000,000")
        if not 1 <= self.per_object <= 1000:
            raise ValueError("per_object must be between 1 and 1000")


@dataclass(frozen=True, slots=True)
class Entry:
    """One reconcile of one object."""

    started: str  # RFC 3339, UTC
    triggers: tuple[rttriggers.Trigger, ...]
    merged: int
    result: str
    seconds: float
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"started": self.started,
                               "triggers": [t.as_dict() for t in self.triggers],
                               "merged": self.merged, "result": self.result,
                               "seconds": round(self.seconds, 6)}
        if self.error:
            out["error"] = self.error
        return out


class ReconcileHistory:
    """The last reconciles of the most recently reconciled objects; see the module docstring."""

    def __init__(self, config: HistoryConfig | None = None) -> None:
        self.config = config or HistoryConfig()
        self._entries: OrderedDict[tuple[str, str], deque[Entry]] = OrderedDict()

    def record(self, controller: str, key: str, entry: Entry) -> None:
        """Remember one reconcile of ``key`` by ``controller``."""
        if len(entry.error) > MAX_ERROR:
            entry = Entry(entry.started, entry.triggers, entry.merged, entry.result,
                          entry.seconds, entry.error[:MAX_ERROR - 1] + "…")
        slot = (controller, key)
        entries = self._entries.get(slot)
        if entries is None:
            entries = self._entries[slot] = deque(maxlen=self.config.per_object)
            while len(self._entries) > self.config.max_objects:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(slot)
        entries.append(entry)

    def __len__(self) -> int:
        """Objects remembered."""
        return len(self._entries)

    def of(self, controller: str, key: str) -> list[dict[str, Any]]:
        """The remembered reconciles of one object, oldest first (``[]`` when none)."""
        return [e.as_dict() for e in self._entries.get((controller, key), ())]

    def controllers(self) -> dict[str, int]:
        """Each controller with remembered objects, and how many."""
        counts: dict[str, int] = {}
        for controller, _ in self._entries:
            counts[controller] = counts.get(controller, 0) + 1
        return dict(sorted(counts.items()))

    def latest(self, controller: str) -> dict[str, dict[str, Any]]:
        """The last reconcile of each remembered object of ``controller``, by key."""
        return {key: entries[-1].as_dict()
                for (name, key), entries in sorted(self._entries.items())
                if name == controller and entries}
