"""port-forward: TCP connections into the pod, over three wire protocols.

* **SPDY/3.1** (``X-Stream-Protocol-Version: portforward.k8s.io``), and the same SPDY inside
  WebSocket binary messages (subprotocol ``SPDY/3.1+portforward.k8s.io``, kubectl ≥ 1.31's
  first choice). Each local connection of the client opens two streams with the headers
  ``port``, ``requestID`` and ``streamType`` (``error`` or ``data``); once both of a request
  are open (within ``stream_creation_timeout``) the server connects to the port and copies
  both ways, passing half-closes on (the client's FIN closes the pod connection's write
  side, the pod's end is a FIN on the data stream). A failure is a message on the error
  stream; the server then ends both streams. Streams with missing or invalid headers, or a
  second stream of a kind for one request, are refused.
* **WebSocket channels** (the Python client; ``v4.channel.k8s.io``, ``v4.base64.channel.k8s.io``
  or none): the ports are in the query (``ports=8080,9090``); port *i* has data channel
  ``2i`` and error channel ``2i+1``, both opened with the port in two little-endian bytes.
  One connection per port, made at once; the socket closes when every port's connection has
  ended (the protocol has no half-close).

Invariants: a connection's copying ends when the pod's end has (its FIN, then the data
stream's), or when the client resets its stream or goes away; nothing outlives the request;
each direction holds at most one chunk (reading waits for writing: backpressure both ways).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server.streaming import channels, options, websocket
from setpoint.server.streaming.conduit import Conduit, WebSocketConduit
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.options import PortForwardOptions
from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy.session import SpdySession, SpdyStream, StreamClosed
from setpoint.server.streaming.target import ByteReader, ByteWriter, StreamTarget

log = logging.getLogger(__name__)

SPDY_PROTOCOLS = ("portforward.k8s.io",)


def _failure(port: int, error: BaseException) -> bytes:
    detail = error.message if isinstance(error, errors.ApiError) else (str(error) or
                                                                       type(error).__name__)
    return f"error forwarding port {port} to pod: {detail}".encode()


async def _close_writer(writer: ByteWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        async with asyncio.timeout(5.0):
            await writer.wait_closed()


# --- SPDY ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pair:
    request_id: str
    data: SpdyStream | None = None
    error: SpdyStream | None = None
    complete: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def port(self) -> int:
        stream = self.data or self.error
        assert stream is not None
        return int(stream.header("port") or 0)


class _Pairs:
    """Matches the client's streams into (data, error) pairs by ``requestID``."""

    def __init__(self) -> None:
        self.by_request: dict[str, _Pair] = {}
        self.by_stream: dict[int, _Pair] = {}

    def admit(self, stream: SpdyStream) -> bool:
        port = stream.header("port")
        kind = stream.header("streamtype")
        if port is None or kind not in ("data", "error"):
            return False
        try:
            options.parse_port(port)
        except errors.ApiError:
            return False
        request_id = stream.header("requestid")
        if request_id is None:
            # clients before request ids: a pair's streams are consecutive odd ids
            request_id = str(stream.stream_id if kind == "error" else stream.stream_id - 2)
        pair = self.by_request.get(request_id)
        if pair is None:
            pair = self.by_request[request_id] = _Pair(request_id)
        if getattr(pair, kind) is not None:
            return False
        other = pair.error if kind == "data" else pair.data
        if other is not None and other.header("port") != port:
            return False
        setattr(pair, kind, stream)
        self.by_stream[stream.stream_id] = pair
        if pair.data is not None and pair.error is not None:
            pair.complete.set()
        return True

    def forget(self, pair: _Pair) -> None:
        if self.by_request.get(pair.request_id) is pair:
            del self.by_request[pair.request_id]
        for stream in (pair.data, pair.error):
            if stream is not None:
                self.by_stream.pop(stream.stream_id, None)


async def serve_spdy(conduit: Conduit, target: StreamTarget, config: StreamingConfig) -> None:
    """Serve port-forward streams on a SPDY connection until the client closes it."""
    pairs = _Pairs()
    session = SpdySession(conduit, config, pairs.admit)
    running: set[asyncio.Task[None]] = set()
    async with asyncio.TaskGroup() as tg:
        reader = tg.create_task(session.run())
        try:
            while (stream := await session.accept()) is not None:
                pair = pairs.by_stream.get(stream.stream_id)
                if pair is None or (pair.data is not stream and pair.error is not stream):
                    continue
                if _first_of(pair, stream):
                    task = tg.create_task(_serve_pair(pair, pairs, target, config))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            for task in running:
                task.cancel()
            await session.close(frames.GoAwayStatus.OK)
            reader.cancel()


def _first_of(pair: _Pair, stream: SpdyStream) -> bool:
    """Whether ``stream`` is the first of its pair to be taken (the pair's task starts)."""
    others = [s for s in (pair.data, pair.error) if s is not None and s is not stream]
    return not others or others[0].stream_id > stream.stream_id


async def _serve_pair(pair: _Pair, pairs: _Pairs, target: StreamTarget,
                      config: StreamingConfig) -> None:
    try:
        try:
            async with asyncio.timeout(config.stream_creation_timeout):
                await pair.complete.wait()
        except TimeoutError:
            if pair.error is not None:
                with contextlib.suppress(StreamClosed):
                    await pair.error.write(b"timed out waiting for streams")
            return
        finally:
            pairs.forget(pair)
        assert pair.data is not None
        assert pair.error is not None
        await _forward(pair.port, pair.data, pair.error, target, config)
    finally:
        for stream in (pair.data, pair.error):
            if stream is not None:
                stream.discard_input()
                await stream.close()


async def _forward(port: int, data: SpdyStream, error: SpdyStream, target: StreamTarget,
                   config: StreamingConfig) -> None:
    try:
        reader, writer = await target.port_forward(port)
    except Exception as e:
        with contextlib.suppress(StreamClosed):
            await error.write(_failure(port, e))
        return
    try:
        async with asyncio.TaskGroup() as tg:
            up = tg.create_task(_client_to_pod(data, writer, config))
            down = tg.create_task(_pod_to_client(reader, data, config))
            ended = tg.create_task(data.ended.wait())
            # the pod's end of the connection ends the forwarding (as containerd's does); the
            # client's FIN only closes the pod connection's write side
            await asyncio.wait({down, ended}, return_when=asyncio.FIRST_COMPLETED)
            for task in (up, down, ended):
                task.cancel()
    finally:
        await _close_writer(writer)


async def _client_to_pod(data: SpdyStream, writer: ByteWriter, config: StreamingConfig) -> None:
    while chunk := await data.read(config.read_chunk_bytes):
        try:
            writer.write(chunk)
            await writer.drain()
        except Exception:
            data.discard_input()
            return
    with contextlib.suppress(Exception):
        writer.write_eof()


async def _pod_to_client(reader: ByteReader, data: SpdyStream, config: StreamingConfig) -> None:
    try:
        while True:
            try:
                chunk = await reader.read(config.read_chunk_bytes)
            except Exception:  # reset by the pod's end: the connection is over
                chunk = b""
            if not chunk:
                break
            await data.write(chunk)
    except StreamClosed:
        return
    await data.close()


# --- WebSocket channels --------------------------------------------------------------------


async def serve_channels(request: web.Request, opts: PortForwardOptions, target: StreamTarget,
                         config: StreamingConfig) -> web.StreamResponse:
    if not opts.ports:
        raise errors.BadRequest('query parameter "ports" is required')
    ws, name = await websocket.accept(request, channels.PORT_FORWARD, config)
    protocol = channels.PORT_FORWARD[name]
    sock = websocket.ChannelSocket(request, ws, protocol, config,
                                   {2 * i for i in range(len(opts.ports))})
    async with asyncio.TaskGroup() as tg:
        reader = tg.create_task(sock.run())
        forwards: list[asyncio.Task[None]] = []
        try:
            for i, port in enumerate(opts.ports):
                prefix = channels.port_prefix(port)
                if not (await sock.send(2 * i, prefix) and await sock.send(2 * i + 1, prefix)):
                    return ws
            forwards = [tg.create_task(_forward_channel(sock, 2 * i, port, target, config))
                        for i, port in enumerate(opts.ports)]
            gone = tg.create_task(sock.gone.wait())
            await asyncio.wait({gone, *forwards}, return_when=asyncio.FIRST_COMPLETED)
            while not gone.done() and not all(f.done() for f in forwards):
                await asyncio.wait({gone, *(f for f in forwards if not f.done())},
                                   return_when=asyncio.FIRST_COMPLETED)
            gone.cancel()
        finally:
            for task in forwards:
                task.cancel()
            await sock.close()
            reader.cancel()
    return ws


async def _forward_channel(sock: websocket.ChannelSocket, channel: int, port: int,
                           target: StreamTarget, config: StreamingConfig) -> None:
    try:
        reader, writer = await target.port_forward(port)
    except Exception as e:
        sock.discard(channel)
        await sock.send(channel + 1, _failure(port, e))
        return
    try:
        async with asyncio.TaskGroup() as tg:
            up = tg.create_task(_channel_to_pod(sock, channel, writer, config))
            down = tg.create_task(_pod_to_channel(reader, sock, channel, port, config))
            await down
            up.cancel()
    finally:
        sock.discard(channel)
        await _close_writer(writer)


async def _channel_to_pod(sock: websocket.ChannelSocket, channel: int, writer: ByteWriter,
                          config: StreamingConfig) -> None:
    while chunk := await sock.read(channel, config.read_chunk_bytes):
        try:
            writer.write(chunk)
            await writer.drain()
        except Exception:
            sock.discard(channel)
            return


async def _pod_to_channel(reader: ByteReader, sock: websocket.ChannelSocket, channel: int,
                          port: int, config: StreamingConfig) -> None:
    while True:
        try:
            chunk = await reader.read(config.read_chunk_bytes)
        except Exception as e:
            # the pod's end failed (a node's agent reports a port it could not connect to
            # this way): the port's error channel says so, as the kubelet's does, and the
            # client closes that port's connection (its other ports go on)
            await sock.send(channel + 1, _failure(port, e))
            return
        if not chunk or not await sock.send(channel, chunk):
            return


# --- the SPDY tunnel in WebSocket messages -------------------------------------------------


async def serve_tunnel(request: web.Request, target: StreamTarget,
                       config: StreamingConfig) -> web.StreamResponse:
    ws, _ = await websocket.accept(request, (channels.SPDY_TUNNEL,), config)
    await serve_spdy(WebSocketConduit(ws), target, config)
    return ws
