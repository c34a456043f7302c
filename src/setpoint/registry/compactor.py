"""Periodic compaction of storage history, as Kubernetes' API server does it.

:func:`compact_periodically` reads the store's current revision at every tick and compacts to
the revision it read at the previous tick. So at least one ``interval`` of history always
stays watchable (a watch cache that fell behind, a paged list's continue token, a watch from
a recent resourceVersion outside the cache's window), while history older than that stops
growing without bound.

Invariants:

* Never compacts beyond a revision read one full ``interval`` earlier: everything written in
  the last ``interval`` stays in history.
* Several servers on one store may all run it: compacting to or below the compacted
  revision is a no-op, so they need no coordination (Kubernetes coordinates with a key only
  to spare etcd the duplicate requests).
* A tick that cannot reach storage is skipped (logged) and the loop carries on; the next
  successful tick compacts to the last revision read, which is older, so still safe.

Non-guarantees: the first compaction happens after two ticks; ticks follow the event loop's
clock, not wall-clock time; compaction frees space only as the backend does (etcd keeps its
file size until defragmented).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

from setpoint.storage import interface as st

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 300.0
"""Seconds between ticks: Kubernetes' ``--etcd-compaction-interval`` default (5 minutes)."""


async def compact_periodically(backend: st.Backend, interval: float = DEFAULT_INTERVAL, *,
                               sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
                               ) -> NoReturn:
    """Every ``interval`` seconds, compact ``backend`` to the revision read one tick before.

    Runs until cancelled. ``sleep`` is injectable for tests.
    """
    if interval <= 0:
        raise ValueError(f"compaction interval must be positive, got {interval}")
    previous: int | None = None
    while True:
        try:
            current = await backend.current_revision()
            if previous is not None and previous > 0:
                await backend.compact(previous)
                log.debug("compacted storage history up to revision %d", previous)
            previous = current
        except st.Unavailable as e:
            log.warning("compaction skipped, storage unavailable: %s", e)
        except st.StorageError:
            log.exception("compaction failed; trying again next interval")
        await sleep(interval)
