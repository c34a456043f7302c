"""A byte pipe to the client, whatever carries it.

SPDY runs over an upgraded HTTP/1.1 connection (``Upgrade: SPDY/3.1``) or, for kubectl's
port-forward since 1.31, inside WebSocket binary messages; :class:`Conduit` is what the SPDY
session needs from either: read what arrived, write, close.

:class:`UpgradedConduit` takes over an aiohttp connection after a 101 response. aiohttp
itself only switches protocols for WebSocket, so the conduit installs itself as the
connection's payload parser (the hook aiohttp's own WebSocket support uses) before the 101
goes out; every byte the client sends afterwards comes here. It buffers at most
``buffer_limit`` bytes: beyond, the socket is not read until the session catches up.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Protocol

from aiohttp import WSMsgType, web


class Conduit(Protocol):
    async def read(self) -> bytes:
        """What the client sent next; ``b""`` once it closed its side."""

    async def write(self, data: bytes) -> None:
        """Hand ``data`` to the connection (waits while the client does not read)."""

    async def close(self) -> None:
        """End the connection (idempotent)."""


class _Feed:
    """What aiohttp feeds with the connection's bytes after the switch (duck-typed parser)."""

    def __init__(self, transport: asyncio.Transport, limit: int) -> None:
        self._transport = transport
        self._limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._eof = False
        self._paused = False
        self._arrived = asyncio.Event()

    # called by aiohttp's protocol
    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if data and not self._eof:
            self._chunks.append(bytes(data))
            self._size += len(data)
            self._arrived.set()
            if self._size > self._limit and not self._paused:
                self._paused = True
                with contextlib.suppress(RuntimeError, AttributeError, NotImplementedError):
                    self._transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self._eof = True
        self._arrived.set()

    async def read(self) -> bytes:
        while not self._chunks:
            if self._eof:
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        chunk = self._chunks.popleft()
        self._size -= len(chunk)
        if self._paused and self._size <= self._limit // 2:
            self._paused = False
            with contextlib.suppress(RuntimeError, AttributeError, NotImplementedError):
                self._transport.resume_reading()
        return chunk


class UpgradedConduit:
    """The raw connection of ``request`` after ``response`` (a 101) switched protocols."""

    def __init__(self, request: web.Request, response: web.StreamResponse,
                 feed: _Feed) -> None:
        self._request = request
        self._response = response
        self._feed = feed
        self._closed = False

    @classmethod
    async def switch(cls, request: web.Request, headers: dict[str, str], *,
                     buffer_limit: int) -> UpgradedConduit:
        """Answer ``101 Switching Protocols`` with ``headers`` and take the connection."""
        transport = request.transport
        if transport is None:
            raise ConnectionResetError("the client went away before the upgrade")
        response = web.StreamResponse(status=101, headers=headers)
        response.force_close()
        feed = _Feed(transport, buffer_limit)
        # before the 101 leaves: the client's first frame may arrive right after it
        request.protocol.set_parser(feed)  # type: ignore[arg-type]
        request.protocol.keep_alive(False)
        await response.prepare(request)
        return cls(request, response, feed)

    @property
    def response(self) -> web.StreamResponse:
        """The 101 the handler returns (after the connection has ended)."""
        return self._response

    async def read(self) -> bytes:
        if self._closed:
            return b""
        return await self._feed.read()

    async def write(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionResetError("the connection is closed")
        await self._response.write(data)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._feed.feed_eof()
        transport = self._request.transport
        if transport is not None:
            transport.close()  # after what is buffered has been sent


class WebSocketConduit:
    """Bytes in WebSocket binary messages (kubectl's SPDY-over-WebSocket tunnel)."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self._ws = ws

    async def read(self) -> bytes:
        while True:
            msg = await self._ws.receive()
            if msg.type == WSMsgType.BINARY:
                if msg.data:
                    return bytes(msg.data)
                continue
            # text is not part of the tunnel; closing, closed and errors end it
            return b""

    async def write(self, data: bytes) -> None:
        if self._ws.closed:
            raise ConnectionResetError("the WebSocket is closed")
        await self._ws.send_bytes(data)

    async def close(self) -> None:
        await self._ws.close()


class _Watch:
    """A parser that only notices the end of the connection (and drops what it is sent)."""

    def __init__(self) -> None:
        self.ended = asyncio.Event()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        return False, b""

    def feed_eof(self) -> None:
        self.ended.set()


def watch_disconnection(request: web.Request) -> asyncio.Event:
    """An event set when the client of ``request`` closes its connection.

    aiohttp tells a handler nothing when its client goes away (unless handlers are
    cancelled, which setpoint's server does not do); a streaming response that waits for
    data to send would never notice. This takes the rest of the connection's input (a client
    waiting for a streamed response sends nothing more on it; the connection is not reused).
    """
    watch = _Watch()
    if request.transport is None or request.transport.is_closing():
        watch.ended.set()
        return watch.ended
    request.protocol.set_parser(watch)  # type: ignore[arg-type]
    return watch.ended
