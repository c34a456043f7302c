"""Whether one kind of dynamic admission is switched on: the latch its hooks share.

Validating policies, mutating policies and admission webhooks each cost nothing until a
configuration of theirs exists. A kind is switched on by the write of one of its
configuration objects through this server (that write's own hook sees it, before the watch
cache does, so the very next write is admitted by it) or by finding one in the watch cache
(written through another server, or before a restart). It stays on for the server's life:
looking up an empty configuration is cheap, a wrong "off" would let a write through unseen.

Invariants: :meth:`AdmissionSwitch.quiet` is True only while the kind is off and for a
resource that is not exempt from admission; once :meth:`AdmissionSwitch.on` has answered
True it always does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from setpoint.admission import matching
from setpoint.registry import watchcache as wc


class AdmissionSwitch:
    """The on/off latch of one kind of dynamic admission (see the module docstring)."""

    def __init__(self, cache: wc.WatchCache, group: str, resources: Collection[str],
                 prefixes: Sequence[str]) -> None:
        self._cache = cache
        self._group = group
        self._resources = frozenset(resources)
        self._prefixes = tuple(prefixes)
        self._on = False

    def on(self) -> bool:
        """Switched on (latching as soon as a configuration is in the cache)."""
        if self._on:
            return True
        for prefix in self._prefixes:
            if self._cache.count(prefix):
                self._on = True
                break
        return self._on

    def exempt(self, group: str, resource: str) -> bool:
        """Whether a write of ``group``/``resource`` is exempt from admission; the write of
        one of this kind's configuration objects switches it on."""
        if (group, resource) not in matching.EXEMPT:
            return False
        if group == self._group and resource in self._resources:
            self._on = True
        return True

    def quiet(self, group: str, resource: str) -> bool:
        """Nothing for this kind to see on a write of ``group``/``resource`` now."""
        return (group, resource) not in matching.EXEMPT and not self.on()
