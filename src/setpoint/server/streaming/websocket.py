"""WebSockets that speak a channel protocol (:mod:`.channels`): negotiation and the socket.

:func:`accept` picks the subprotocol before answering, so a client offering none that is
served gets a plain 400 Status and no 101: client-go treats that as an upgrade failure and
falls back to SPDY, as it does with a server that predates WebSocket streaming.

A :class:`ChannelSocket` has one reader task (:meth:`ChannelSocket.run`) that hands each
message to its channel's :class:`~.inbox.Inbox` (bounded: a consumer that does not keep up
stops the reader, and the client's sends with it) and ignores channels nobody reads, as the
kubelet does. Sends are serialized and bounded by ``write_timeout``. The socket is *gone*
once the client closed it, it failed, or nothing moved either way for ``idle_timeout``;
every inbox has ended by then. Pings are answered by aiohttp.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Mapping

from aiohttp import WSMsgType, web

from setpoint.apimachinery import errors
from setpoint.server.streaming import channels
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.inbox import Inbox

log = logging.getLogger(__name__)


def is_websocket(request: web.Request) -> bool:
    connection = request.headers.get("Connection", "").lower()
    return (request.headers.get("Upgrade", "").strip().lower() == "websocket"
            and "upgrade" in connection)


async def accept(request: web.Request, supported: Collection[str],
                 config: StreamingConfig) -> tuple[web.WebSocketResponse, str]:
    """Answer the upgrade with a subprotocol from ``supported``; ``""`` means none."""
    offers = channels.offered(request.headers.get("Sec-WebSocket-Protocol"))
    chosen = channels.negotiate(offers, supported)
    if chosen is None:
        names = sorted(p for p in supported if p)
        raise errors.BadRequest(
            f"unable to upgrade: requested protocol(s) are not supported: {offers}; "
            f"supports {names}")
    ws = web.WebSocketResponse(protocols=(chosen,) if chosen else (),
                               max_msg_size=config.max_message_bytes, autoping=True,
                               timeout=config.finish_timeout, compress=False)
    if not ws.can_prepare(request).ok:
        raise errors.BadRequest("unable to upgrade: invalid WebSocket handshake")
    await ws.prepare(request)
    return ws, chosen


class ChannelSocket:
    def __init__(self, request: web.Request, ws: web.WebSocketResponse,
                 protocol: channels.ChannelProtocol, config: StreamingConfig,
                 readable: Collection[int]) -> None:
        self.protocol = protocol
        self._request = request
        self._ws = ws
        self._aborted = False
        self._config = config
        self._inboxes: Mapping[int, Inbox] = {
            c: Inbox(config.stream_buffer_bytes) for c in readable}
        self._send_lock = asyncio.Lock()
        self._deadline: asyncio.Timeout | None = None
        #: set once the client closed, the connection failed or went idle
        self.gone = asyncio.Event()
        self.close_reason = ""

    async def run(self) -> None:
        """Receive until the socket closes; never raises but cancellation."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(loop.time() + self._config.idle_timeout) as deadline:
                self._deadline = deadline
                while True:
                    msg = await self._ws.receive()
                    if msg.type in (WSMsgType.BINARY, WSMsgType.TEXT):
                        self._touch()
                        await self._dispatch(msg.data)
                        continue
                    if msg.type == WSMsgType.ERROR:
                        self.close_reason = f"error: {self._ws.exception()}"
                    else:
                        self.close_reason = self.close_reason or "the client closed"
                    break
        except TimeoutError:
            self.close_reason = self.close_reason or "idle timeout"
        except (ConnectionError, OSError) as e:
            self.close_reason = f"connection error: {e}"
        finally:
            self._deadline = None
            self._end()

    async def _dispatch(self, payload: bytes | str) -> None:
        try:
            message = channels.decode(self.protocol, payload)
        except channels.ChannelError as e:
            log.debug("ignoring a malformed channel message: %s", e)
            return
        if message is None:
            return
        inbox = self._inboxes.get(message.channel)
        if inbox is None:
            return
        if message.close:
            inbox.end()
        else:
            await inbox.put(message.data)

    def _touch(self) -> None:
        if self._deadline is not None:
            self._deadline.reschedule(asyncio.get_running_loop().time()
                                      + self._config.idle_timeout)

    def _end(self) -> None:
        for inbox in self._inboxes.values():
            inbox.abort()
        self.gone.set()

    async def read(self, channel: int, n: int = -1) -> bytes:
        """What the client sent on ``channel``; ``b""`` at its end (close signal or gone)."""
        inbox = self._inboxes.get(channel)
        if inbox is None:
            return b""
        return await inbox.read(n)

    def completed(self, channel: int) -> bool:
        """Whether the client closed ``channel`` (v5), rather than the connection ending."""
        inbox = self._inboxes.get(channel)
        return inbox is not None and inbox.completed

    def discard(self, channel: int) -> None:
        inbox = self._inboxes.get(channel)
        if inbox is not None:
            inbox.discard()

    async def send(self, channel: int, data: bytes) -> bool:
        """Send ``data`` on ``channel``; ``False`` once the client is gone."""
        if self.gone.is_set() or self._ws.closed:
            return False
        message = channels.encode(self.protocol, channel, data)
        async with self._send_lock:
            try:
                async with asyncio.timeout(self._config.write_timeout):
                    if isinstance(message, str):
                        await self._ws.send_str(message)
                    else:
                        await self._ws.send_bytes(message)
            except TimeoutError:
                self.close_reason = "the client did not read for the write timeout"
                await self._abort()
                return False
            except (ConnectionError, OSError, RuntimeError) as e:
                self.close_reason = self.close_reason or f"send failed: {e}"
                self._end()
                return False
        self._touch()
        return True

    async def _abort(self) -> None:
        """The client stopped reading: drop the connection, and what it did not take."""
        self._aborted = True
        self._end()
        transport = self._request.transport
        if transport is not None:
            transport.abort()
        if self._deadline is not None:
            with contextlib.suppress(RuntimeError):
                self._deadline.reschedule(asyncio.get_running_loop().time())

    async def close(self) -> None:
        """Close normally (1000) and wait, at most ``finish_timeout``, for the client's close."""
        if not self._aborted:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(self._config.finish_timeout):
                    await self._ws.close()
        self._end()
