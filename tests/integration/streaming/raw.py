"""A scripted SPDY/3.1 client over a real TCP connection, for what kubectl never sends."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from urllib.parse import urlsplit

from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy import headers as hb


class RawSpdy:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.reader = reader
        self.writer = writer
        self.status = status
        self.headers = headers
        self.body = body
        self.deflater = hb.Deflater()
        self.decoder = frames.Decoder(max_payload=(1 << 24) - 1, max_header_bytes=1 << 16,
                                      max_header_pairs=64)
        self.data: dict[int, bytearray] = defaultdict(bytearray)
        self.fin: set[int] = set()
        self.others: list[frames.Frame] = []

    @classmethod
    async def connect(cls, url: str, path: str, protocols: Iterable[str] = (), *,
                      method: str = "POST", upgrade: bool = True) -> RawSpdy:
        parts = urlsplit(url)
        assert parts.hostname is not None
        assert parts.port is not None
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        lines = [f"{method} {path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Length: 0"]
        if upgrade:
            lines += ["Connection: Upgrade", "Upgrade: SPDY/3.1"]
        lines += [f"X-Stream-Protocol-Version: {p}" for p in protocols]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = [tuple(h.split(": ", 1)) for h in header_lines if h]
        status = int(status_line.split()[1])
        body = b""
        if status != 101:
            length = next((int(v) for k, v in headers if k.lower() == "content-length"), 0)
            body = await reader.readexactly(length)
        return cls(reader, writer, status, headers, body)  # type: ignore[arg-type]

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    def send(self, *wire: bytes) -> None:
        for data in wire:
            self.writer.write(data)

    def syn(self, stream_id: int, headers: dict[str, str], *, fin: bool = False) -> None:
        self.send(frames.encode_syn_stream(self.deflater, stream_id, headers, fin=fin))

    async def frame(self) -> frames.Frame | None:
        """The next frame; ``None`` at the end of the connection."""
        while True:
            frame = self.decoder.next()
            if frame is not None:
                return frame
            data = await self.reader.read(65536)
            if not data:
                return None
            self.decoder.feed(data)

    async def pump(self) -> frames.Frame | None:
        """Take one frame: DATA is collected per stream, the others in ``others``."""
        frame = await self.frame()
        if isinstance(frame, frames.Data):
            self.data[frame.stream_id] += frame.data
            if frame.flags & frames.FLAG_FIN:
                self.fin.add(frame.stream_id)
        elif frame is not None:
            self.others.append(frame)
        return frame

    async def until_fin(self, *stream_ids: int) -> None:
        while not set(stream_ids) <= self.fin:
            if await self.pump() is None:
                raise AssertionError(f"connection ended before FIN on {stream_ids}: "
                                     f"{self.others}")

    async def until_end(self) -> list[frames.Frame]:
        while await self.pump() is not None:
            pass
        return self.others

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass
