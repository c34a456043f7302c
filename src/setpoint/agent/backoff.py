"""CrashLoopBackOff: how long a failed container waits before it is started again.

The kubelet's per-container backoff (``flowcontrol.Backoff`` with 10 s initial and 5 min
maximum): the first exit restarts at once and sets the delay to 10 s; every later exit waits
the current delay, counted from the exit, then doubles it (10 s, 20 s, 40 s, ... 5 min). An
exit more than twice the maximum (10 minutes) after the previous restart starts over at 10 s,
so a container that ran for 10 minutes is not punished for an old crash loop.

Pure: times are monotonic seconds passed in by the caller (its injected clock), so tests drive
the whole sequence without sleeping. The state is two floats and persists with the pod.

>>> b = Backoff()
>>> b.in_backoff(exited_at=100.0, now=100.0)   # the first exit restarts at once
False
>>> b.restarted(exited_at=100.0, now=100.0); b.delay
10.0
>>> b.in_backoff(exited_at=105.0, now=110.0), b.ready_at(exited_at=105.0)
(True, 115.0)
>>> format_duration(160.0), format_duration(300.0)
('2m40s', '5m0s')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Backoff", "format_duration"]


@dataclass(slots=True)
class Backoff:
    initial: float = 10.0
    maximum: float = 300.0
    #: The current delay; 0 before the first restart.
    delay: float = 0.0
    #: When the delay last changed (monotonic seconds).
    last_update: float = 0.0

    def _expired(self, exited_at: float) -> bool:
        return exited_at - self.last_update > 2 * self.maximum

    def in_backoff(self, *, exited_at: float, now: float) -> bool:
        """Whether a container that exited at ``exited_at`` must still wait at ``now``."""
        if self.delay <= 0 or self._expired(exited_at):
            return False
        return now - exited_at < self.delay

    def ready_at(self, *, exited_at: float) -> float:
        """When the wait for an exit at ``exited_at`` ends."""
        if self.delay <= 0 or self._expired(exited_at):
            return exited_at
        return exited_at + self.delay

    def restarted(self, *, exited_at: float, now: float) -> None:
        """Record a restart after an exit at ``exited_at``: the next delay grows."""
        if self.delay <= 0 or self._expired(exited_at):
            self.delay = self.initial
        else:
            self.delay = min(self.delay * 2, self.maximum)
        self.last_update = now

    def to_json(self) -> dict[str, Any]:
        return {"delay": self.delay, "lastUpdate": self.last_update}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None, *, initial: float = 10.0,
                  maximum: float = 300.0) -> Backoff:
        data = data or {}
        return cls(initial=initial, maximum=maximum, delay=float(data.get("delay", 0.0)),
                   last_update=float(data.get("lastUpdate", 0.0)))


def format_duration(seconds: float) -> str:
    """Go's ``time.Duration.String`` for whole-second-ish durations (``1m20s``, ``5m0s``)."""
    total = round(seconds, 3)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{sec_text}"
    if minutes:
        return f"{int(minutes)}m{sec_text}"
    return sec_text
