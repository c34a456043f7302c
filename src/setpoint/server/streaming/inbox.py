"""A bounded byte queue between the task that receives and the task that consumes.

``put`` waits while ``limit`` bytes are unread, so a consumer that does not keep up stops
the receiver (and through it the connection) instead of growing memory; one ``put`` may
exceed the limit by its own size. ``end`` marks the end of input (readers drain what is left,
then get ``b""``), ``abort`` the end of the connection (the same for readers, but
``completed`` stays false: the sender did not say it was done); ``discard`` drops what is
buffered and everything after (nobody will read it), which also releases a waiting ``put``.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Inbox:
    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._ended = False
        self._completed = False
        self._discarding = False
        self._arrived = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()

    @property
    def buffered(self) -> int:
        return self._size

    @property
    def ended(self) -> bool:
        return self._ended

    @property
    def completed(self) -> bool:
        """The sender ended its input (rather than going away)."""
        return self._completed

    async def put(self, data: bytes) -> None:
        while self._size >= self._limit and not (self._ended or self._discarding):
            self._space.clear()
            await self._space.wait()
        if self._ended or self._discarding or not data:
            return
        self._chunks.append(data)
        self._size += len(data)
        self._arrived.set()

    def end(self) -> None:
        if not self._ended:
            self._completed = True
        self.abort()

    def abort(self) -> None:
        self._ended = True
        self._arrived.set()
        self._space.set()

    def discard(self) -> None:
        self._discarding = True
        self._chunks.clear()
        self._size = 0
        self._space.set()

    async def read(self, n: int = -1) -> bytes:
        while not self._chunks:
            if self._ended or self._discarding:
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        chunk = self._chunks.popleft()
        if 0 < n < len(chunk):
            self._chunks.appendleft(chunk[n:])
            chunk = chunk[:n]
        self._size -= len(chunk)
        if self._size < self._limit:
            self._space.set()
        return chunk
