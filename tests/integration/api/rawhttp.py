"""HTTP/1.1 over a bare socket, for what a client library will not send: bodies in pieces,
half-sent requests, a missing Content-Type, a connection that stalls."""

from __future__ import annotations

import asyncio
import ssl as ssl_module
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class Connection:
    """One TCP connection to the server; requests are written by hand."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, url: str, ssl: ssl_module.SSLContext | None = None) -> Connection:
        """Connect to ``url``'s host and port; over TLS with ``ssl`` for an https URL."""
        parts = urlsplit(url)
        if (parts.scheme == "https") != (ssl is not None):
            raise ValueError("an https URL goes with an SSL context, and only it")
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port, ssl=ssl)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send_head(self, method: str, path: str, headers: Mapping[str, str]) -> None:
        lines = [f"{method} {path} HTTP/1.1", "Host: setpoint",
                 *(f"{k}: {v}" for k, v in headers.items())]
        await self.send(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def read_response(self) -> Response:
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection")
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while True:
            line = (await self.reader.readline()).decode().rstrip("\r\n")
            if not line:
                break
            key, _, value = line.partition(":")
            headers[key.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readline()).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            body = await self.reader.read()
        return Response(status, headers, body)

    async def closed_by_server(self) -> bool:
        """Wait until the server closes the connection (True), reading and dropping whatever
        it sends first. A reset counts as closed: a server that closes a socket with bytes of
        ours still unread makes the kernel answer with a reset instead of an orderly end."""
        try:
            while await self.reader.read(65536):
                pass
        except ConnectionResetError:
            pass
        return True

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def request_in_pieces(url: str, method: str, path: str, body: bytes, *,
                            content_type: str | None = "application/json",
                            pieces: int = 8, chunked: bool = False,
                            pause: float = 0.02) -> Response:
    """Send ``body`` in ``pieces`` parts with a pause between them, with a Content-Length or
    (``chunked``) as chunks, so that the server sees it arrive bit by bit."""
    headers = {"Connection": "close"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
    else:
        headers["Content-Length"] = str(len(body))
    conn = await Connection.open(url)
    try:
        await conn.send_head(method, path, headers)
        for part in split(body, pieces):
            await conn.send(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
            await asyncio.sleep(pause)
        if chunked:
            await conn.send(b"0\r\n\r\n")
        return await conn.read_response()
    finally:
        await conn.close()


def split(data: bytes, pieces: int) -> Iterable[bytes]:
    step = max(1, -(-len(data) // pieces))
    for i in range(0, len(data), step):
        yield data[i:i + step]
