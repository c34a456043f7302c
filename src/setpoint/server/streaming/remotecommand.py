"""exec and attach: a command's streams between the client and the target.

Two transports, one procedure:

* **WebSocket** (kubectl ≥ 1.30 first, the Python clients): a channel protocol
  (:mod:`.channels`). The server first sends an empty message on the lowest channel it
  writes (stdout, else stderr, else error), as the kubelet does, then the output; at the end
  the status on the error channel and a normal close.
* **SPDY/3.1** (kubectl's fallback, ``X-Stream-Protocol-Version`` v5 down to v1): the client
  opens one stream per channel (header ``streamType``: ``error``, ``stdin``, ``stdout``,
  ``stderr``, ``resize``) within ``stream_creation_timeout``; anything else is refused. At
  the end the status on the error stream, then FIN on every stream (the client waits for
  its stdin stream to end too).

The procedure (:func:`run`): start the command (a failure is the status), copy the client's
stdin to the command (its end, a v5 close signal or a FIN, closes the command's stdin) and
terminal sizes to ``resize``, copy stdout and stderr to the client until they end, wait for
the exit status, report it, and wait up to ``finish_timeout`` for the client to close.
If the client goes away first the session is closed (an exec's command is ended).

Invariants: no task outlives the request; a client that stops reading blocks the copying
(the command blocks on its full pipe) until ``write_timeout`` ends the connection; input
nobody will read is discarded rather than buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server.streaming import channels, status, websocket
from setpoint.server.streaming.conduit import Conduit
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.options import AttachOptions, ExecOptions
from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy.session import SpdySession, SpdyStream, StreamClosed
from setpoint.server.streaming.target import ByteReader, ByteWriter, Session, TerminalSize

log = logging.getLogger(__name__)

#: SPDY subprotocols, most preferred first (v5 is v4 on SPDY: streams close natively)
SPDY_PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
                  "v2.channel.k8s.io", "channel.k8s.io")
_JSON_STATUS = frozenset({"v5.channel.k8s.io", "v4.channel.k8s.io"})
_RESIZE = frozenset({"v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io"})

Options = ExecOptions | AttachOptions
Start = Callable[[], Awaitable[Session]]


class CommandClient(Protocol):
    """The client's end of an exec or attach, whatever carries it."""

    async def read_stdin(self, n: int) -> bytes:
        """The client's input; ``b""`` at its end or the connection's."""

    def stdin_completed(self) -> bool:
        """The client ended its input (after ``b""``), rather than going away."""

    async def read_resize(self, n: int) -> bytes:
        """Terminal sizes as JSON; ``b""`` at their end."""

    def discard_input(self) -> None:
        """Drop stdin and resize data from now on."""

    async def write_output(self, channel: int, data: bytes) -> bool:
        """Send stdout (1) or stderr (2) data; ``False`` once the client is gone."""

    async def close_output(self, channel: int) -> None: ...

    async def finish(self, outcome: status.Status | None) -> None:
        """Report the outcome (``None``: the client is gone) and let the client close."""

    async def gone(self) -> None:
        """Return once the client has gone away."""


async def run(client: CommandClient, start: Start, options: Options,
              config: StreamingConfig) -> None:
    """Run one exec/attach between ``client`` and the session ``start`` returns."""
    command = options.command if isinstance(options, ExecOptions) else ()
    try:
        session = await _start(client, start)
    except errors.ApiError as e:
        await client.finish(status.failed(e))
        return
    except Exception as e:
        log.warning("starting %s failed: %s", list(command) or "attach", e)
        await client.finish(status.internal(f"error executing command in container: {e}"))
        return
    if session is None:
        await client.finish(None)
        return
    outcome: status.Status | None = None
    try:
        outcome = await _supervise(client, session, options, command, config)
    finally:
        if outcome is None:
            # the client went away (or the handler is cancelled): end or detach, bounded
            with contextlib.suppress(Exception):
                async with asyncio.timeout(config.finish_timeout):
                    await session.close()
    await client.finish(outcome)


async def _start(client: CommandClient, start: Start) -> Session | None:
    """The started session, or ``None`` if the client went away first (start is cancelled)."""
    async with asyncio.TaskGroup() as tg:
        starting = tg.create_task(_attempt(start))
        gone = tg.create_task(client.gone())
        await asyncio.wait({starting, gone}, return_when=asyncio.FIRST_COMPLETED)
        gone.cancel()
        if not starting.done():
            starting.cancel()
    if starting.cancelled():
        return None
    result = starting.result()
    if isinstance(result, Exception):
        raise result
    return result


async def _attempt(start: Start) -> Session | Exception:
    try:
        return await start()
    except Exception as e:  # raised by run(), outside the task group
        return e


async def _supervise(client: CommandClient, session: Session, options: Options,
                     command: Sequence[str], config: StreamingConfig) -> status.Status | None:
    """The exit status, or ``None`` if the client went away first."""
    async with asyncio.TaskGroup() as tg:
        essential: set[asyncio.Task[Any]] = set()
        if options.stdout and session.stdout is not None:
            essential.add(tg.create_task(_copy_out(session.stdout, client, channels.STDOUT,
                                                   config)))
        if options.stderr and not options.tty and session.stderr is not None:
            essential.add(tg.create_task(_copy_out(session.stderr, client, channels.STDERR,
                                                   config)))
        exit_task = tg.create_task(_exit_status(session, command))
        essential.add(exit_task)
        helpers = []
        if options.stdin and session.stdin is not None:
            helpers.append(tg.create_task(_copy_in(client, session.stdin, config)))
        else:
            client.discard_input()
        if options.tty:
            helpers.append(tg.create_task(_resizes(client, session, config)))
        gone = tg.create_task(client.gone())
        pending = set(essential)
        while pending and not gone.done():
            done, _ = await asyncio.wait(pending | {gone}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
        # all output delivered and the command exited (even if the client left meanwhile)
        outcome = exit_task.result() if not pending else None
        client.discard_input()
        for task in (*pending, *helpers, gone):
            task.cancel()
    return outcome


async def _exit_status(session: Session, command: Sequence[str]) -> status.Status:
    try:
        return status.exited(await session.wait(), command)
    except errors.ApiError as e:
        return status.failed(e)
    except Exception as e:
        log.warning("waiting for %s failed: %s", list(command) or "attach", e)
        return status.internal(f"error executing command in container: {e}")


async def _copy_out(reader: ByteReader, client: CommandClient, channel: int,
                    config: StreamingConfig) -> None:
    try:
        while True:
            try:
                data = await reader.read(config.read_chunk_bytes)
            except Exception as e:  # a broken pipe, or a target's bug: the output ends
                log.info("reading the command's output failed: %s", e)
                break
            if not data:
                break
            if not await client.write_output(channel, data):
                return
    finally:
        with contextlib.suppress(Exception):
            await client.close_output(channel)


async def _copy_in(client: CommandClient, writer: ByteWriter, config: StreamingConfig) -> None:
    while True:
        data = await client.read_stdin(config.read_chunk_bytes)
        if not data:
            if client.stdin_completed():  # not when the client went away: an attached
                with contextlib.suppress(Exception):  # container's input stays open
                    writer.write_eof()
            return
        try:
            writer.write(data)
            await writer.drain()
        except Exception:
            client.discard_input()  # the command closed its stdin: nobody reads the rest
            return


async def _resizes(client: CommandClient, session: Session, config: StreamingConfig) -> None:
    """Terminal sizes, a stream of JSON objects (``{"Width":80,"Height":24}``)."""
    decoder = json.JSONDecoder()
    buffer = ""
    while True:
        data = await client.read_resize(config.read_chunk_bytes)
        if not data:
            return
        buffer += data.decode("utf-8", "replace")
        while True:
            buffer = buffer.lstrip()
            if not buffer:
                break
            try:
                value, end = decoder.raw_decode(buffer)
            except (ValueError, RecursionError):
                if len(buffer) > config.max_resize_bytes:
                    return  # not JSON, or not one we take: stop listening, as Kubernetes does
                break  # incomplete: wait for the rest
            buffer = buffer[end:]
            size = terminal_size(value)
            if size is None:
                return
            try:
                await session.resize(size)
            except Exception as e:
                log.debug("resizing the terminal failed: %s", e)


def terminal_size(value: object) -> TerminalSize | None:
    """``{"Width": w, "Height": h}`` with 16-bit unsigned values (Go's ``TerminalSize``)."""
    if not isinstance(value, dict):
        return None
    width, height = value.get("Width", 0), value.get("Height", 0)
    for n in (width, height):
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 0xFFFF:
            return None
    return TerminalSize(width=width, height=height)


# --- over WebSocket ------------------------------------------------------------------------


class _WebSocketClient:
    def __init__(self, sock: websocket.ChannelSocket) -> None:
        self._sock = sock

    async def read_stdin(self, n: int) -> bytes:
        return await self._sock.read(channels.STDIN, n)

    def stdin_completed(self) -> bool:
        return self._sock.completed(channels.STDIN)

    async def read_resize(self, n: int) -> bytes:
        return await self._sock.read(channels.RESIZE, n)

    def discard_input(self) -> None:
        self._sock.discard(channels.STDIN)
        self._sock.discard(channels.RESIZE)

    async def write_output(self, channel: int, data: bytes) -> bool:
        return await self._sock.send(channel, data)

    async def close_output(self, channel: int) -> None:
        # the end of the output is the end of the connection: client-go (1.32) knows no
        # close signals from the server and would log every one as an unknown stream
        return None

    async def finish(self, outcome: status.Status | None) -> None:
        if outcome is not None:
            payload = status.encode(outcome, as_json=self._sock.protocol.status_json)
            if payload is not None:
                await self._sock.send(channels.ERROR, payload)
        await self._sock.close()

    async def gone(self) -> None:
        await self._sock.gone.wait()


async def serve_websocket(request: web.Request, options: Options, start: Start,
                          config: StreamingConfig) -> web.StreamResponse:
    ws, name = await websocket.accept(request, channels.REMOTE_COMMAND, config)
    protocol = channels.REMOTE_COMMAND[name]
    readable = {c for c, wanted in ((channels.STDIN, options.stdin),
                                    (channels.RESIZE, options.tty)) if wanted}
    sock = websocket.ChannelSocket(request, ws, protocol, config, readable)
    async with asyncio.TaskGroup() as tg:
        reader = tg.create_task(sock.run())
        try:
            first = (channels.STDOUT if options.stdout else
                     channels.STDERR if options.stderr else channels.ERROR)
            if await sock.send(first, b""):
                await run(_WebSocketClient(sock), start, options, config)
        finally:
            await sock.close()
            reader.cancel()
    return ws


# --- over SPDY -----------------------------------------------------------------------------


class _SpdyClient:
    def __init__(self, session: SpdySession, streams: dict[str, SpdyStream], protocol: str,
                 config: StreamingConfig) -> None:
        self._session = session
        self._streams = streams
        self._protocol = protocol
        self._config = config

    async def _read(self, kind: str, n: int) -> bytes:
        stream = self._streams.get(kind)
        return b"" if stream is None else await stream.read(n)

    async def read_stdin(self, n: int) -> bytes:
        return await self._read("stdin", n)

    def stdin_completed(self) -> bool:
        stream = self._streams.get("stdin")
        return stream is not None and stream.remote_closed

    async def read_resize(self, n: int) -> bytes:
        return await self._read("resize", n)

    def discard_input(self) -> None:
        for kind in ("stdin", "resize"):
            stream = self._streams.get(kind)
            if stream is not None:
                stream.discard_input()

    async def write_output(self, channel: int, data: bytes) -> bool:
        stream = self._streams.get("stdout" if channel == channels.STDOUT else "stderr")
        if stream is None:
            return False
        try:
            await stream.write(data)
        except StreamClosed:
            return False
        return True

    async def close_output(self, channel: int) -> None:
        stream = self._streams.get("stdout" if channel == channels.STDOUT else "stderr")
        if stream is not None:
            await stream.close()

    async def finish(self, outcome: status.Status | None) -> None:
        error = self._streams["error"]
        if outcome is not None:
            payload = status.encode(outcome, as_json=self._protocol in _JSON_STATUS)
            if payload is not None:
                with contextlib.suppress(StreamClosed):
                    await error.write(payload)
        self.discard_input()
        for stream in self._streams.values():
            await stream.close()
        # the client closes once it has read everything; a client that does not is cut off
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._config.finish_timeout):
                await self._session.closed.wait()

    async def gone(self) -> None:
        await self._session.closed.wait()


def expected_streams(options: Options, protocol: str) -> frozenset[str]:
    kinds = {"error"}
    if options.stdin:
        kinds.add("stdin")
    if options.stdout:
        kinds.add("stdout")
    if options.stderr and not options.tty:
        kinds.add("stderr")
    if options.tty and protocol in _RESIZE:
        kinds.add("resize")
    return frozenset(kinds)


async def serve_spdy(conduit: Conduit, protocol: str, options: Options, start: Start,
                     config: StreamingConfig) -> None:
    """Serve one exec/attach on an upgraded connection (the 101 has gone out)."""
    expected = expected_streams(options, protocol)
    streams: dict[str, SpdyStream] = {}

    def admit(stream: SpdyStream) -> bool:
        kind = stream.header("streamtype")
        if kind not in expected or kind in streams:
            return False
        streams[kind] = stream
        return True

    session = SpdySession(conduit, config, admit)
    async with asyncio.TaskGroup() as tg:
        reader = tg.create_task(session.run())
        try:
            try:
                async with asyncio.timeout(config.stream_creation_timeout):
                    received = 0
                    while received < len(expected):
                        if await session.accept() is None:
                            return  # the client went away
                        received += 1
            except TimeoutError:
                log.info("closing an exec: the client opened %s of the streams %s in %ss",
                         sorted(streams), sorted(expected), config.stream_creation_timeout)
                return
            await run(_SpdyClient(session, streams, protocol, config), start, options, config)
        finally:
            await session.close(frames.GoAwayStatus.OK)
            reader.cancel()
