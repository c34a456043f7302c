"""Why a reconcile ran: the triggers a work queue merges into each pending key.

A work queue holds keys, not events (see :mod:`setpoint.runtime.queue`): many changes to one
object collapse into one reconcile. The reconcile still deserves to know *why* it runs, for
logs, metrics and debugging, never for deciding what to do (reconciles stay level-based).
Whoever adds a key may say why with a :class:`Trigger`; the queue merges the triggers of every
add while the key waits (deduplicated, in arrival order) and hands them over with the key.
The engine makes them visible to the reconcile through :func:`current_triggers` (a context
variable, so concurrent reconciles each see their own, in a worker thread as well) and
:attr:`setpoint.runtime.Context.triggers`.

The causes (:data:`CAUSES`):

==================  ========================================================================
``initial``         the object was in the cache when the controller started (or took over
                    the lease): the initial full reconcile
``add``             a watch saw it created (``watch`` says which watch, ``object`` which
``update``          object: for ``owns`` and ``watches`` the child or the mapped object,
``delete``          not the one reconciled)
``resync``          the resync period replayed the cache (``setpoint run --resync``)
``requeue_after``   the previous reconcile returned ``Result.after(s)`` (``detail``: ``s``)
``requeue``         the previous reconcile returned ``Result(requeue=True)``
``retry``           the previous reconcile raised (``detail``: the exception's type)
``external``        someone asked: :meth:`setpoint.runtime.Manager.reconcile_now`
``poll``            the controller's poll cadence came round (:mod:`setpoint.runtime.polling`)
``reconcile_now``   someone set a new value of the annotation ``setpoint.dev/reconcile-now``
                    on the object (``detail``: the value; see :mod:`setpoint.runtime.handlers`)
==================  ========================================================================

Invariants: a :class:`Trigger` is immutable and hashable; a merged set keeps at most
:data:`MAX_TRIGGERS` distinct triggers (the first ones) and counts every add it merged, so
memory per pending key is bounded whatever the event rate.

Non-guarantees: a key added without a trigger (older callers, a custom handler) reconciles
with whatever else was merged, possibly nothing; triggers of a delayed add travel with the
delay and are merged when it expires; an empty tuple means "unknown", not "no reason".
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Final

CAUSE_INITIAL: Final = "initial"
CAUSE_ADD: Final = "add"
CAUSE_UPDATE: Final = "update"
CAUSE_DELETE: Final = "delete"
CAUSE_RESYNC: Final = "resync"
CAUSE_REQUEUE_AFTER: Final = "requeue_after"
CAUSE_REQUEUE: Final = "requeue"
CAUSE_RETRY: Final = "retry"
CAUSE_EXTERNAL: Final = "external"
CAUSE_POLL: Final = "poll"
CAUSE_RECONCILE_NOW: Final = "reconcile_now"
#: every cause, in the order metrics list them (a fixed set: bounded label values)
CAUSES: Final = (CAUSE_INITIAL, CAUSE_ADD, CAUSE_UPDATE, CAUSE_DELETE, CAUSE_RESYNC,
                 CAUSE_REQUEUE_AFTER, CAUSE_REQUEUE, CAUSE_RETRY, CAUSE_EXTERNAL, CAUSE_POLL,
                 CAUSE_RECONCILE_NOW)

#: distinct triggers kept per pending key; further ones are counted, not kept
MAX_TRIGGERS: Final = 16
#: the longest ``detail`` kept (longer ones are cut)
MAX_DETAIL: Final = 200


@dataclass(frozen=True, slots=True)
class Trigger:
    """One reason a key was added to a work queue."""

    #: one of :data:`CAUSES`
    cause: str
    #: the watch that saw the event: ``"for Book"``, ``"owns ConfigMap"``, ``"watches Secret"``
    watch: str = ""
    #: the key (``namespace/name``) of the object the event was about
    object: str = ""
    #: anything else: the delay of a requeue, the exception of a retry, a caller's reason
    detail: str = ""

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown trigger cause {self.cause!r} (one of {CAUSES})")
        if len(self.detail) > MAX_DETAIL:
            object.__setattr__(self, "detail", self.detail[:MAX_DETAIL - 1] + "…")

    def as_dict(self) -> dict[str, str]:
        """The non-empty fields (for JSON and logs)."""
        out = {"cause": self.cause}
        for name in ("watch", "object", "detail"):
            value = getattr(self, name)
            if value:
                out[name] = value
        return out

    def __str__(self) -> str:
        parts = [self.cause]
        if self.watch:
            parts.append(f"by {self.watch}")
        if self.object:
            parts.append(f"of {self.object}")
        if self.detail:
            parts.append(f"({self.detail})")
        return " ".join(parts)


class Merged:
    """The triggers merged into one pending key: distinct ones in arrival order (at most
    :data:`MAX_TRIGGERS`), and how many adds were merged in all."""

    __slots__ = ("count", "triggers")

    def __init__(self) -> None:
        self.triggers: dict[Trigger, None] = {}
        self.count = 0

    def add(self, trigger: Trigger) -> None:
        self.count += 1
        if len(self.triggers) < MAX_TRIGGERS:
            self.triggers[trigger] = None

    def merge(self, other: Merged) -> None:
        self.count += other.count
        for trigger in other.triggers:
            if len(self.triggers) >= MAX_TRIGGERS:
                break
            self.triggers[trigger] = None

    def freeze(self) -> tuple[Trigger, ...]:
        return tuple(self.triggers)


_current: contextvars.ContextVar[tuple[Trigger, ...]] = contextvars.ContextVar(
    "setpoint_reconcile_triggers", default=())


def current_triggers() -> tuple[Trigger, ...]:
    """The triggers of the reconcile running in this task (or its worker thread); ``()``
    outside a reconcile."""
    return _current.get()


def set_current(triggers: tuple[Trigger, ...]) -> contextvars.Token[tuple[Trigger, ...]]:
    return _current.set(triggers)


def reset_current(token: contextvars.Token[tuple[Trigger, ...]]) -> None:
    _current.reset(token)
