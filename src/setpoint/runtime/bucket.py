"""A token bucket's arithmetic: the one primitive behind every rate limit of the runtime (the
workqueue's retry limiter, external-API budgets, the Events reconciles publish).

A :class:`Bucket` holds ``tokens``, refilled at ``rate`` per second up to ``burst``, as of
the monotonic time ``at``. It reads no clock: every method takes the caller's ``now``, so
the caller's injected clock (and a test's fake one) is the only time there is.

Invariants: ``tokens <= burst`` after every call; refilling never moves ``at`` backwards (a
``now`` earlier than ``at`` adds nothing); :meth:`take` never leaves fewer than ``-epsilon``
tokens. ``tokens`` may be negative only through :meth:`book`, which lends from the future
(Go's ``rate.Limiter.Reserve``).

Non-guarantees: no waiting, ordering or fairness between callers: that is the caller's
(:class:`setpoint.runtime.budgets.Budget` queues its waiters in arrival order).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Bucket"]


@dataclass(slots=True)
class Bucket:
    """See the module docstring. ``rate > 0`` and ``burst >= 1`` are the caller's to check."""

    rate: float
    burst: float
    tokens: float
    at: float

    @classmethod
    def full(cls, rate: float, burst: float, now: float) -> Bucket:
        """A bucket holding ``burst`` tokens at ``now``."""
        return cls(rate=rate, burst=float(burst), tokens=float(burst), at=now)

    def refill(self, now: float) -> float:
        """Add what ``rate`` earned since ``at`` (at most up to ``burst``); the tokens now."""
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
        return self.tokens

    def take(self, now: float, amount: float = 1.0, *, epsilon: float = 0.0) -> bool:
        """Take ``amount`` tokens if the bucket holds them (``epsilon`` forgives float
        rounding of the refill); False, and nothing taken, if it does not."""
        if self.refill(now) < amount - epsilon:
            return False
        self.tokens -= amount
        return True

    def book(self, now: float) -> float:
        """Take one token whatever the bucket holds, borrowing from the future: the seconds
        until the token taken exists (0 when it already did)."""
        self.refill(now)
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def seconds_until(self, amount: float = 1.0) -> float:
        """From ``at``, how long until the bucket holds ``amount`` tokens (0 if it does)."""
        return max(0.0, (amount - self.tokens) / self.rate)

    def give_back(self, amount: float = 1.0) -> None:
        """Return tokens taken and not used (never above ``burst``)."""
        self.tokens = min(self.burst, self.tokens + amount)

    def resize(self, rate: float, burst: float) -> None:
        """A new rate and size from ``at`` on: what was earned so far stays (refill first);
        tokens above the new ``burst`` are lost at once."""
        self.rate, self.burst = rate, float(burst)
        self.tokens = min(self.tokens, self.burst)
