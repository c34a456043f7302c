"""The SPDY session against a scripted client over an in-memory conduit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy import headers as hb
from setpoint.server.streaming.spdy.session import SpdySession, SpdyStream, StreamClosed


class MemoryConduit:
    """The server's end; the test plays the client with ``inbound`` and ``outbound``."""

    def __init__(self) -> None:
        self.inbound: asyncio.Queue[bytes] = asyncio.Queue()
        self.outbound: asyncio.Queue[bytes] = asyncio.Queue()
        self.gate = asyncio.Event()
        self.gate.set()
        self.closed = asyncio.Event()

    async def read(self) -> bytes:
        if self.closed.is_set():
            return b""
        return await self.inbound.get()

    async def write(self, data: bytes) -> None:
        await self.gate.wait()
        if self.closed.is_set():
            raise ConnectionResetError("closed")
        self.outbound.put_nowait(data)

    async def close(self) -> None:
        self.closed.set()
        self.inbound.put_nowait(b"")


@dataclass
class Client:
    conduit: MemoryConduit
    deflater: hb.Deflater = field(default_factory=hb.Deflater)
    decoder: frames.Decoder = field(default_factory=lambda: frames.Decoder(
        max_payload=(1 << 24) - 1, max_header_bytes=1 << 16, max_header_pairs=64))

    def send(self, *wire: bytes) -> None:
        for data in wire:
            self.conduit.inbound.put_nowait(data)

    def syn(self, stream_id: int, headers: dict[str, str] | None = None, *,
            fin: bool = False) -> None:
        self.send(frames.encode_syn_stream(self.deflater, stream_id, headers or {}, fin=fin))

    async def frame(self) -> frames.Frame:
        while True:
            frame = self.decoder.next()
            if frame is not None:
                return frame
            self.decoder.feed(await self.conduit.outbound.get())

    async def frames_until(self, done: Callable[[frames.Frame], bool]) -> list[frames.Frame]:
        got = []
        while True:
            got.append(await self.frame())
            if done(got[-1]):
                return got


@dataclass
class Running:
    session: SpdySession
    client: Client
    conduit: MemoryConduit
    task: asyncio.Task[None]
    refused: set[str]


def make(config: StreamingConfig | None = None, **kwargs: object) -> Running:
    conduit = MemoryConduit()
    refused: set[str] = set()

    def accept(stream: SpdyStream) -> bool:
        return stream.header("streamtype") not in refused

    session = SpdySession(conduit, config or StreamingConfig(), accept, **kwargs)  # type: ignore[arg-type]
    task = asyncio.get_running_loop().create_task(session.run())
    return Running(session, Client(conduit), conduit, task, refused)


@pytest.fixture
async def spdy() -> AsyncIterator[Running]:
    running = make()
    yield running
    await running.session.close()
    await running.task
    assert running.session.closed.is_set()


async def until(condition: Callable[[], bool]) -> None:
    """Wait for a state of the session that it signals with no event of its own."""
    while not condition():  # noqa: ASYNC110
        await asyncio.sleep(0.001)


async def test_a_stream_is_replied_to_then_read_to_its_end(spdy: Running) -> None:
    spdy.client.syn(1, {"streamtype": "stdin", "Port": "80"})
    reply = await spdy.client.frame()
    assert reply == frames.SynReply(1, 0, ())
    stream = await spdy.session.accept()
    assert stream is not None
    assert stream.header("streamType") == "stdin"
    assert stream.header("port") == "80"
    spdy.client.send(frames.encode_data(1, b"hello "), frames.encode_data(1, b"world", fin=True))
    assert await stream.read() == b"hello "
    assert await stream.read(3) == b"wor"
    assert await stream.read() == b"ld"
    assert await stream.read() == b""
    await stream.write(b"answer")
    await stream.close()
    assert await spdy.client.frame() == frames.Data(1, 0, b"answer")
    assert await spdy.client.frame() == frames.Data(1, frames.FLAG_FIN, b"")
    await until(lambda: spdy.session.open_streams == 0)  # both sides closed: forgotten


async def test_refused_and_excess_streams_are_reset() -> None:
    spdy = make(StreamingConfig(max_streams=2))
    spdy.refused.add("bogus")
    spdy.client.syn(1, {"streamtype": "bogus"})
    assert await spdy.client.frame() == frames.RstStream(1, frames.RstStatus.REFUSED_STREAM)
    spdy.client.syn(3, {"streamtype": "a"})
    spdy.client.syn(5, {"streamtype": "b"})
    spdy.client.syn(7, {"streamtype": "c"})
    got = [await spdy.client.frame() for _ in range(3)]
    assert got == [frames.SynReply(3, 0, ()), frames.SynReply(5, 0, ()),
                   frames.RstStream(7, frames.RstStatus.REFUSED_STREAM)]
    assert spdy.session.open_streams == 2
    await spdy.session.close()
    await spdy.task


async def test_the_clients_pings_are_answered(spdy: Running) -> None:
    spdy.client.send(frames.encode_ping(2), frames.encode_ping(5))
    assert await spdy.client.frame() == frames.Ping(5)  # even ids are the server's: ignored


async def test_stream_ids_must_increase(spdy: Running) -> None:
    spdy.client.syn(5)
    assert await spdy.client.frame() == frames.SynReply(5, 0, ())
    spdy.client.syn(3)
    assert await spdy.client.frame() == frames.GoAway(5, frames.GoAwayStatus.PROTOCOL_ERROR)
    await spdy.task
    assert spdy.conduit.closed.is_set()
    assert "stream id 3 after 5" in spdy.session.close_reason


async def test_garbage_ends_the_connection_with_goaway(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    spdy.client.send(b"\x80\x02\x00\x01" + b"\x00" * 20)  # SPDY/2
    assert await spdy.client.frame() == frames.GoAway(1, frames.GoAwayStatus.PROTOCOL_ERROR)
    await spdy.task
    assert await stream.read() == b""
    with pytest.raises(StreamClosed):
        await stream.write(b"x")
    assert await spdy.session.accept() is None


async def test_data_for_unknown_or_finished_streams(spdy: Running) -> None:
    spdy.client.send(frames.encode_data(9, b"never opened"))
    assert await spdy.client.frame() == frames.RstStream(9, frames.RstStatus.INVALID_STREAM)
    spdy.client.syn(11, fin=True)
    assert await spdy.client.frame() == frames.SynReply(11, 0, ())
    spdy.client.send(frames.encode_data(11, b"after fin"))
    assert await spdy.client.frame() == frames.RstStream(
        11, frames.RstStatus.STREAM_ALREADY_CLOSED)
    # a SYN_REPLY from the client answers nothing the server opened
    spdy.client.send(frames.encode_syn_reply(spdy.client.deflater, 13))
    assert await spdy.client.frame() == frames.RstStream(13, frames.RstStatus.PROTOCOL_ERROR)


async def test_a_reset_ends_the_stream_both_ways(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    reading = asyncio.ensure_future(stream.read())
    spdy.client.send(frames.encode_rst_stream(1, frames.RstStatus.CANCEL))
    assert await reading == b""
    assert stream.is_reset
    with pytest.raises(StreamClosed, match="reset"):
        await stream.write(b"x")


async def test_headers_with_fin_close_the_clients_side(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    spdy.client.send(frames.encode_headers(spdy.client.deflater, 1, {"x": "y"}, fin=True))
    assert await stream.read() == b""
    assert stream.remote_closed


async def test_consumed_bytes_reopen_the_clients_windows(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    spdy.client.send(frames.encode_data(1, b"x" * 40_000))
    assert len(await stream.read()) == 40_000
    updates = {await spdy.client.frame(), await spdy.client.frame()}
    assert updates == {frames.WindowUpdate(1, 40_000), frames.WindowUpdate(0, 40_000)}


async def test_a_peer_that_ignores_windows_is_served_all_the_same(spdy: Running) -> None:
    # spdystream (kubectl) sends without regard to windows: 200 KiB on a 64 KiB window
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    payload = bytes(range(256)) * 800
    for i in range(0, len(payload), 16_000):
        spdy.client.send(frames.encode_data(1, payload[i:i + 16_000]))
    spdy.client.send(frames.encode_data(1, b"", fin=True))
    received = bytearray()
    while chunk := await stream.read():
        received += chunk
    assert bytes(received) == payload


async def test_sending_does_not_wait_for_windows_by_default(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    await stream.write(b"y" * 200_000)  # returns without any WINDOW_UPDATE
    total = 0
    while total < 200_000:
        frame = await spdy.client.frame()
        assert isinstance(frame, frames.Data)
        assert len(frame.data) <= StreamingConfig().read_chunk_bytes
        total += len(frame.data)


async def test_with_honoured_windows_sending_waits_for_window_updates() -> None:
    spdy = make(honour_send_window=True)
    spdy.client.send(frames.encode_settings([(frames.SettingId.INITIAL_WINDOW_SIZE, 10_000)]))
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    writing = asyncio.ensure_future(stream.write(b"z" * 25_000))
    got = 0
    while got < 10_000:
        frame = await spdy.client.frame()
        assert isinstance(frame, frames.Data)
        got += len(frame.data)
    assert got == 10_000  # the stream's window, exactly
    for _ in range(5):
        await asyncio.sleep(0)
    assert spdy.conduit.outbound.empty()
    assert not writing.done()
    spdy.client.send(frames.encode_window_update(1, 100_000))
    while got < 25_000:
        frame = await spdy.client.frame()
        assert isinstance(frame, frames.Data)
        got += len(frame.data)
    await writing
    # the session window (64 KiB) bounds it too
    writing = asyncio.ensure_future(stream.write(b"w" * 60_000))
    while got < 65_536:
        frame = await spdy.client.frame()
        assert isinstance(frame, frames.Data)
        got += len(frame.data)
    assert got == 65_536
    spdy.client.send(frames.encode_window_update(0, 100_000))
    await writing
    await spdy.session.close()
    await spdy.task


async def test_a_full_stream_buffer_stops_reading_the_connection() -> None:
    spdy = make(StreamingConfig(stream_buffer_bytes=4096))
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    chunks = [bytes([i]) * 1024 for i in range(32)]
    spdy.client.send(*(frames.encode_data(1, c) for c in chunks))
    await until(lambda: stream._buffered >= 4096)
    for _ in range(5):
        await asyncio.sleep(0)
    # the reader stopped: most of what the client sent is still in the pipe
    assert spdy.conduit.inbound.qsize() >= 32 - 4 - 2
    received = b"".join([await stream.read() for _ in range(32)])
    assert received == b"".join(chunks)
    await spdy.session.close()
    await spdy.task


async def test_discarded_input_is_dropped_without_stopping_the_connection() -> None:
    spdy = make(StreamingConfig(stream_buffer_bytes=1024))
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    stream.discard_input()
    spdy.client.send(*(frames.encode_data(1, b"x" * 1024) for _ in range(40)),
                     frames.encode_ping(1))
    frame = await spdy.client.frame()
    while not isinstance(frame, frames.Ping):  # window updates for what was dropped
        assert isinstance(frame, frames.WindowUpdate)
        frame = await spdy.client.frame()
    assert stream._buffered == 0
    await spdy.session.close()
    await spdy.task


async def test_an_idle_connection_is_closed() -> None:
    spdy = make(StreamingConfig(idle_timeout=0.05))
    spdy.client.syn(1)
    await spdy.task
    assert spdy.session.close_reason == "idle timeout"
    got = await spdy.client.frames_until(lambda f: isinstance(f, frames.GoAway))
    assert got[-1] == frames.GoAway(1, frames.GoAwayStatus.OK)
    assert spdy.conduit.closed.is_set()


async def test_a_client_that_does_not_read_is_cut_off_after_the_write_timeout() -> None:
    spdy = make(StreamingConfig(write_timeout=0.05))
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    spdy.conduit.gate.clear()  # the client stops reading
    with pytest.raises(StreamClosed, match="write timeout"):
        await stream.write(b"output nobody reads")
    await spdy.task
    assert spdy.conduit.closed.is_set()
    assert stream.ended.is_set()


async def test_close_says_goaway_with_the_last_stream() -> None:
    spdy = make()
    spdy.client.syn(1)
    spdy.client.syn(3)
    await spdy.client.frame()
    await spdy.client.frame()
    await spdy.session.close()
    await spdy.task
    assert await spdy.client.frame() == frames.GoAway(3, frames.GoAwayStatus.OK)
    assert spdy.conduit.closed.is_set()


async def test_a_goaway_from_the_client_refuses_new_streams(spdy: Running) -> None:
    spdy.client.send(frames.encode_goaway(0))
    spdy.client.syn(1)
    assert await spdy.client.frame() == frames.RstStream(1, frames.RstStatus.REFUSED_STREAM)


async def test_the_client_closing_ends_every_stream(spdy: Running) -> None:
    spdy.client.syn(1)
    await spdy.client.frame()
    stream = await spdy.session.accept()
    assert stream is not None
    spdy.client.send(b"")  # EOF
    await spdy.task
    assert spdy.session.close_reason == "the client closed"
    assert await stream.read() == b""
    assert await spdy.session.accept() is None
