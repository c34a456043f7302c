"""One write at a time per object, within one server.

Concurrent writes of one object without a precondition are retried on a fresh read when
they lose their compare-and-swap (:mod:`setpoint.registry.store`). Without more, N writers of
one object make N rounds in which one wins and all others read and compute again: O(N²)
work, and seconds for a few hundred writers. :class:`KeyLocks` queues the writers of a key in
this server instead, so each computes once on the state its predecessor left; only writes
through other servers on the same storage still make it retry.

Invariants: a key has an entry only while some task holds or waits for its lock, so the
table is bounded by the writes in flight; locks are FIFO (asyncio's); a cancelled waiter
leaves the queue. Non-guarantee: no ordering across servers (storage's compare-and-swap
stays the arbiter).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class KeyLocks:
    """A lock per key, created on demand and dropped when nobody holds or awaits it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            _, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def __len__(self) -> int:
        """Keys with a writer holding or awaiting their lock."""
        return len(self._locks)
