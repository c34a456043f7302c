"""Poll cadence: reconcile every object again every ``interval`` seconds, give or take jitter.

A controller whose objects stand for something outside the cluster cannot watch that
something: it must look again now and then, or a queue deleted behind its back stays deleted.
With ``Controller.with_options(poll=PollConfig(interval=60, jitter=0.2))`` the engine, after
each reconcile of an object that ends without a retry or a ``requeue_after`` of its own,
schedules the next one for ``interval · (1 ± jitter)`` seconds later (uniformly drawn from
the manager's injected random source), with the trigger ``poll``.

The jitter spreads a crowd: a thousand objects reconciled within the same second (the
initial list, a burst of creates) come round again spread over ``2 · jitter · interval``
seconds instead of all at once, and every round draws afresh, so they never fall back into
lockstep. With a :class:`~setpoint.runtime.budgets.Budget` in front of the upstream, the
polls of any number of objects also stay within the budget's rate.

Invariants: one pending poll per object at most (the work queue keeps only the earliest
delay of a key); a poll is scheduled only for an object the controller's cache still holds
when its reconcile ends, so deleted objects stop being polled; every delay lies in
``[interval · (1 - jitter), interval · (1 + jitter)]``.

Non-guarantees: a change that reconciles an object between polls does not push its next
poll back (the earlier delay wins); polls are dropped with the rest of the delayed work when
the controller stops (its next start reconciles everything anyway).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

#: the shortest poll interval, in seconds
MIN_INTERVAL = 0.001
#: the longest poll interval (a week), in seconds
MAX_INTERVAL = 7 * 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PollConfig:
    """Reconcile each object every ``interval`` seconds ± ``jitter`` (a fraction, 0..1)."""

    interval: float
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.interval)
                and MIN_INTERVAL <= self.interval <= MAX_INTERVAL):
            raise ValueError(f"poll interval must be in [{MIN_INTERVAL}, {MAX_INTERVAL}] s")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter < 1.0):
            raise ValueError("poll jitter must be a fraction in [0, 1)")

    def next_delay(self, rng: random.Random) -> float:
        """The delay before the next poll: uniform in ``interval · [1 - jitter, 1 + jitter]``."""
        if self.jitter == 0.0:
            return self.interval
        return self.interval * (1.0 + rng.uniform(-self.jitter, self.jitter))
