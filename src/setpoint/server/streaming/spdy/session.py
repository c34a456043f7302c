"""The server side of a SPDY/3.1 connection: streams the client opens, read and written.

One task runs :meth:`SpdySession.run`, the only reader of the connection: it decodes frames
and dispatches them. Application tasks take accepted streams with :meth:`accept`, then read
and write them; writes from any task go out whole, in order, one at a time.

Invariants:

* Memory is bounded: at most ``max_streams`` streams are open (more are refused with
  RST_STREAM REFUSED_STREAM), and a stream buffers at most ``stream_buffer_bytes`` (plus one
  frame) that its reader has not taken. Beyond that the session stops reading the
  connection until the reader catches up: backpressure reaches the client through TCP.
* A frame that breaks the protocol resets its stream (RST_STREAM) when only the stream is
  affected, and otherwise ends the connection with GOAWAY; either way the session keeps no
  state from it. No exception leaves :meth:`run` but cancellation.
* The connection ends after ``idle_timeout`` without a frame either way, when one write
  waits longer than ``write_timeout``, when the client closes it, or on :meth:`close`.
  Then every stream ends: readers get ``b""``, writers :class:`StreamClosed`.
* The client's pings are answered; streams it opens with SYN_STREAM are answered with
  SYN_REPLY before anything is written on them.

Flow control: the receive side announces consumed bytes with WINDOW_UPDATE, so a peer that
honours windows never stalls, and tolerates a peer that ignores them (Kubernetes' clients
use spdystream, which implements no flow control at all: it neither sends WINDOW_UPDATE nor
limits what it sends), relying on the bounded buffers above. The send side honours the
peer's windows only with ``honour_send_window``, off by default: a server that waited for
spdystream's WINDOW_UPDATEs would stop after 64 KiB. Priorities are ignored.

Non-guarantees: the session never opens streams itself (nothing served here needs to), and
ignores SETTINGS but for INITIAL_WINDOW_SIZE.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from setpoint.server.streaming.conduit import Conduit
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy import headers as hb

log = logging.getLogger(__name__)

#: how long the goodbye (GOAWAY, close) may take when the connection ends
_GOODBYE_TIMEOUT = 5.0


class StreamClosed(Exception):
    """Writing to a stream that was reset, closed for writing, or whose connection ended."""


class SpdyStream:
    """One stream the client opened: its headers, and both directions."""

    def __init__(self, session: SpdySession, stream_id: int, headers: hb.Headers, *,
                 fin: bool, unidirectional: bool, send_window: int) -> None:
        self._session = session
        self.stream_id = stream_id
        self.headers = headers
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._arrived = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._window_open = asyncio.Event()
        self._window_open.set()
        self._send_window = send_window
        self._unacknowledged = 0
        self._discarding = False
        #: the client sent FIN (or the stream was born with it)
        self.remote_closed = fin
        #: this side sent FIN (or the client allowed no replies)
        self.local_closed = unidirectional
        #: the stream was reset (by either side) or its connection ended
        self.ended = asyncio.Event()

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (names are lowercase)."""
        return hb.first(self.headers, name.lower())

    @property
    def is_reset(self) -> bool:
        return self.ended.is_set() and not (self.remote_closed and self.local_closed)

    # --- reading ---------------------------------------------------------------------------

    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes the client sent (any amount if ``n`` < 0); ``b""`` at the end."""
        while not self._chunks:
            if self.remote_closed or self.ended.is_set():
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        chunk = self._chunks.popleft()
        if 0 < n < len(chunk):
            self._chunks.appendleft(chunk[n:])
            chunk = chunk[:n]
        self._taken(len(chunk))
        await self._session._consumed(self, len(chunk))
        return chunk

    def discard_input(self) -> None:
        """Drop what the client sends from now on (nobody will read it)."""
        self._discarding = True
        self._taken(self._buffered)
        self._chunks.clear()

    def _taken(self, n: int) -> None:
        self._buffered -= n
        if self._buffered < self._session.config.stream_buffer_bytes:
            self._space.set()

    async def _deliver(self, data: bytes) -> None:
        """The reader task hands over a DATA frame's payload (waits while the buffer is full)."""
        if self._discarding:
            await self._session._consumed(self, len(data))
            return
        limit = self._session.config.stream_buffer_bytes
        while self._buffered >= limit and not self.ended.is_set() and not self._discarding:
            self._space.clear()
            await self._space.wait()
        if self.ended.is_set():
            return
        if self._discarding:
            await self._session._consumed(self, len(data))
            return
        self._chunks.append(data)
        self._buffered += len(data)
        self._arrived.set()

    def _on_fin(self) -> None:
        self.remote_closed = True
        self._arrived.set()
        self._check_done()

    # --- writing ---------------------------------------------------------------------------

    async def write(self, data: bytes) -> None:
        """Send ``data`` (in frames of at most ``read_chunk_bytes``)."""
        session = self._session
        chunk = session.config.read_chunk_bytes
        view = memoryview(data)
        while view:
            self._check_writable()
            size = min(len(view), chunk)
            if session.honour_send_window:
                size = await self._reserve_window(size)
            piece = bytes(view[:size])
            view = view[size:]
            await session._send(frames.encode_data(self.stream_id, piece))

    async def close(self) -> None:
        """Half-close: FIN, nothing more will be written (idempotent)."""
        if self.local_closed or self.ended.is_set():
            return
        self.local_closed = True
        with contextlib.suppress(StreamClosed):
            await self._session._send(frames.encode_data(self.stream_id, b"", fin=True))
        self._check_done()

    async def reset(self, status: int = frames.RstStatus.CANCEL) -> None:
        """Abort the stream both ways (RST_STREAM)."""
        if self.ended.is_set():
            return
        self._end()
        with contextlib.suppress(StreamClosed):
            await self._session._send(frames.encode_rst_stream(self.stream_id, status))

    def _check_writable(self) -> None:
        if self.ended.is_set():
            raise StreamClosed(f"stream {self.stream_id} was reset")
        if self.local_closed:
            raise StreamClosed(f"stream {self.stream_id} is closed for writing")

    async def _reserve_window(self, wanted: int) -> int:
        session = self._session
        while True:
            self._check_writable()
            available = min(self._send_window, session._send_window)
            if available > 0:
                size = min(wanted, available)
                self._send_window -= size
                session._send_window -= size
                return size
            # set again by a WINDOW_UPDATE of the stream or the session, SETTINGS, or the end
            self._window_open.clear()
            await self._window_open.wait()

    def _grow_window(self, delta: int) -> bool:
        if self._send_window + delta > frames.MAX_WINDOW:
            return False
        self._send_window += delta
        if self._send_window > 0:
            self._window_open.set()
        return True

    # --- the end ---------------------------------------------------------------------------

    def _end(self) -> None:
        """Reset, or the connection ended: wake everyone, forget the stream."""
        if not self.ended.is_set():
            self.ended.set()
            self._arrived.set()
            self._space.set()
            self._window_open.set()
            self._session._forget(self)

    def _check_done(self) -> None:
        if self.remote_closed and self.local_closed and not self.ended.is_set():
            self.ended.set()
            self._space.set()
            self._window_open.set()
            self._session._forget(self)


Accept = Callable[[SpdyStream], bool]


class SpdySession:
    """A SPDY/3.1 server connection over ``conduit``; ``accept`` vets each new stream."""

    def __init__(self, conduit: Conduit, config: StreamingConfig, accept: Accept, *,
                 honour_send_window: bool = False) -> None:
        self.config = config
        self.honour_send_window = honour_send_window
        self._conduit = conduit
        self._accept_stream = accept
        self._decoder = frames.Decoder(max_payload=config.max_frame_bytes,
                                       max_header_bytes=config.max_header_bytes,
                                       max_header_pairs=config.max_header_pairs)
        self._deflater = hb.Deflater()
        self._streams: dict[int, SpdyStream] = {}
        self._last_id = 0
        self._incoming: deque[SpdyStream] = deque()
        self._arrived = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._deadline: asyncio.Timeout | None = None
        self._stopping = False
        self._broken = False
        self._goaway_sent = False
        self._peer_gone = False
        self._initial_send_window = frames.DEFAULT_WINDOW
        self._send_window = frames.DEFAULT_WINDOW
        self._session_unacknowledged = 0
        #: set once the connection has ended, for whatever reason
        self.closed = asyncio.Event()
        #: why it ended, for logs and tests
        self.close_reason = ""

    @property
    def open_streams(self) -> int:
        return len(self._streams)

    # --- for the application ---------------------------------------------------------------

    async def accept(self) -> SpdyStream | None:
        """The next stream the client opened and ``accept`` admitted; ``None`` once closed."""
        while True:
            if self._incoming:
                return self._incoming.popleft()
            if self.closed.is_set():
                return None
            self._arrived.clear()
            await self._arrived.wait()

    async def close(self, status: int = frames.GoAwayStatus.OK) -> None:
        """Say GOAWAY and end the connection; :meth:`run` returns soon after."""
        if not self.closed.is_set() and not self._goaway_sent and not self._broken:
            await self._goodbye(status)
        self._stop("closed by the server")

    # --- the reader ------------------------------------------------------------------------

    async def run(self) -> None:
        """Read and dispatch frames until the connection ends."""
        loop = asyncio.get_running_loop()
        status: int = frames.GoAwayStatus.OK
        try:
            if self._stopping:
                return
            async with asyncio.timeout_at(loop.time() + self.config.idle_timeout) as deadline:
                self._deadline = deadline
                while not self._stopping:
                    data = await self._conduit.read()
                    if not data:
                        self.close_reason = self.close_reason or "the client closed"
                        break
                    self._touch()
                    self._decoder.feed(data)
                    while not self._stopping:
                        frame = await self._next_frame()
                        if frame is None:
                            break
                        await self._dispatch(frame)
        except TimeoutError:
            if not self._stopping:
                self.close_reason = "idle timeout"
        except frames.ProtocolError as e:
            status = frames.GoAwayStatus.PROTOCOL_ERROR
            self.close_reason = f"protocol error: {e}"
            log.info("SPDY connection closed: %s", self.close_reason)
        except StreamClosed:
            self.close_reason = self.close_reason or "the connection broke"
        except (ConnectionError, OSError) as e:
            self.close_reason = f"connection error: {e}"
        finally:
            self._deadline = None
            await self._shutdown(status)

    async def _next_frame(self) -> frames.Frame | None:
        while True:
            try:
                return self._decoder.next()
            except frames.ProtocolError as e:
                if e.stream_id == 0:
                    raise
                stream = self._streams.get(e.stream_id)
                if stream is not None:
                    stream._end()
                await self._send(frames.encode_rst_stream(e.stream_id, e.status))

    async def _dispatch(self, frame: frames.Frame) -> None:
        if isinstance(frame, frames.Data):
            await self._on_data(frame)
        elif isinstance(frame, frames.SynStream):
            await self._on_syn_stream(frame)
        elif isinstance(frame, frames.RstStream):
            stream = self._streams.get(frame.stream_id)
            if stream is not None:
                stream._end()
        elif isinstance(frame, frames.Ping):
            if frame.ping_id % 2 == 1:  # the client's: echo it; ours are even (none sent)
                await self._send(frames.encode_ping(frame.ping_id))
        elif isinstance(frame, frames.WindowUpdate):
            await self._on_window_update(frame)
        elif isinstance(frame, frames.Settings):
            self._on_settings(frame)
        elif isinstance(frame, frames.HeadersFrame):
            stream = self._streams.get(frame.stream_id)
            if stream is not None and frame.flags & frames.FLAG_FIN:
                stream._on_fin()
        elif isinstance(frame, frames.GoAway):
            self._peer_gone = True
        elif isinstance(frame, frames.SynReply):
            # the server opens no streams, so there is nothing to reply to
            await self._send(frames.encode_rst_stream(frame.stream_id,
                                                      frames.RstStatus.PROTOCOL_ERROR))

    async def _on_syn_stream(self, frame: frames.SynStream) -> None:
        stream_id = frame.stream_id
        if stream_id % 2 == 0 or stream_id <= self._last_id:
            raise frames.ProtocolError(
                f"stream id {stream_id} after {self._last_id} (client ids are odd, increasing)")
        self._last_id = stream_id
        if self._peer_gone or self._stopping or len(self._streams) >= self.config.max_streams:
            await self._send(frames.encode_rst_stream(stream_id,
                                                      frames.RstStatus.REFUSED_STREAM))
            return
        stream = SpdyStream(self, stream_id, frame.headers,
                            fin=bool(frame.flags & frames.FLAG_FIN),
                            unidirectional=bool(frame.flags & frames.FLAG_UNIDIRECTIONAL),
                            send_window=self._initial_send_window)
        if not self._accept_stream(stream):
            await self._send(frames.encode_rst_stream(stream_id,
                                                      frames.RstStatus.REFUSED_STREAM))
            return
        self._streams[stream_id] = stream
        await self._send(lambda deflater: frames.encode_syn_reply(deflater, stream_id))
        self._incoming.append(stream)
        self._arrived.set()
        stream._check_done()

    async def _on_data(self, frame: frames.Data) -> None:
        stream = self._streams.get(frame.stream_id)
        if stream is None:
            if frame.stream_id > self._last_id:
                await self._send(frames.encode_rst_stream(frame.stream_id,
                                                          frames.RstStatus.INVALID_STREAM))
            return  # late data of a stream that ended
        if stream.remote_closed:
            stream._end()
            await self._send(frames.encode_rst_stream(frame.stream_id,
                                                      frames.RstStatus.STREAM_ALREADY_CLOSED))
            return
        if frame.data:
            await stream._deliver(frame.data)
        if frame.flags & frames.FLAG_FIN:
            stream._on_fin()

    async def _on_window_update(self, frame: frames.WindowUpdate) -> None:
        if frame.stream_id == 0:
            if self._send_window + frame.delta > frames.MAX_WINDOW:
                raise frames.ProtocolError("session window beyond 2^31-1")
            self._send_window += frame.delta
            if self._send_window > 0:
                for waiting in self._streams.values():
                    waiting._window_open.set()
            return
        stream = self._streams.get(frame.stream_id)
        if stream is not None and not stream._grow_window(frame.delta):
            stream._end()
            await self._send(frames.encode_rst_stream(frame.stream_id,
                                                      frames.RstStatus.FLOW_CONTROL_ERROR))

    def _on_settings(self, frame: frames.Settings) -> None:
        for _flags, setting, value in frame.entries:
            if setting == frames.SettingId.INITIAL_WINDOW_SIZE and value <= frames.MAX_WINDOW:
                delta = value - self._initial_send_window
                self._initial_send_window = value
                for stream in self._streams.values():
                    stream._send_window += delta
                    if stream._send_window > 0:
                        stream._window_open.set()

    # --- writing ---------------------------------------------------------------------------

    async def _send(self, data: bytes | Callable[[hb.Deflater], bytes]) -> None:
        """Write one frame; ``data`` may be built under the lock (compressed headers)."""
        if self._broken:
            raise StreamClosed("the connection ended")
        async with self._write_lock:
            if self._broken:
                raise StreamClosed("the connection ended")
            payload = data if isinstance(data, bytes) else data(self._deflater)
            try:
                async with asyncio.timeout(self.config.write_timeout):
                    await self._conduit.write(payload)
            except Exception as e:
                self._broken = True
                reason = ("the client did not read for the write timeout"
                          if isinstance(e, TimeoutError) else f"write failed: {e}")
                self._stop(reason)
                raise StreamClosed(reason) from e
        self._touch()

    async def _consumed(self, stream: SpdyStream, n: int) -> None:
        """The application took ``n`` bytes of ``stream``: open the client's windows again."""
        if n <= 0 or self._broken or self.closed.is_set():
            return
        threshold = frames.DEFAULT_WINDOW // 2
        updates = []
        stream._unacknowledged += n
        if stream._unacknowledged >= threshold and not stream.remote_closed:
            updates.append(frames.encode_window_update(stream.stream_id,
                                                       stream._unacknowledged))
            stream._unacknowledged = 0
        self._session_unacknowledged += n
        if self._session_unacknowledged >= threshold:
            updates.append(frames.encode_window_update(0, self._session_unacknowledged))
            self._session_unacknowledged = 0
        for update in updates:
            with contextlib.suppress(StreamClosed):
                await self._send(update)

    # --- the end ---------------------------------------------------------------------------

    def _touch(self) -> None:
        if self._deadline is not None and not self._stopping:
            self._deadline.reschedule(asyncio.get_running_loop().time()
                                      + self.config.idle_timeout)

    def _stop(self, reason: str) -> None:
        """Make the reader end now (from any task)."""
        if not self._stopping:
            self._stopping = True
            self.close_reason = self.close_reason or reason
        if self._deadline is not None:
            with contextlib.suppress(RuntimeError):
                self._deadline.reschedule(asyncio.get_running_loop().time())

    def _forget(self, stream: SpdyStream) -> None:
        if self._streams.get(stream.stream_id) is stream:
            del self._streams[stream.stream_id]

    async def _goodbye(self, status: int) -> None:
        self._goaway_sent = True
        with contextlib.suppress(StreamClosed, TimeoutError):
            async with asyncio.timeout(min(_GOODBYE_TIMEOUT, self.config.write_timeout)):
                await self._send(frames.encode_goaway(self._last_id, status))

    async def _shutdown(self, status: int) -> None:
        self._stopping = True
        if not self._goaway_sent and not self._broken:
            await self._goodbye(status)
        self._broken = True
        for stream in list(self._streams.values()):
            stream._end()
        self._streams.clear()
        self.closed.set()
        self._arrived.set()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_GOODBYE_TIMEOUT):
                await self._conduit.close()
