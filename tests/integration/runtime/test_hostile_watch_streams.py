"""An informer behind a proxy that breaks its watches in every way an HTTP/1.1 stream can
break (garbage framing, a chunk size that is not hex, a connection cut mid-chunk or reset, a
head that stops, a head too large) recovers each time by relisting and watching again, and
misses nothing: the controller converges on what was written meanwhile."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from setpoint.client import Client, load_kubeconfig
from setpoint.runtime import (
    BackoffConfig,
    Context,
    Controller,
    Manager,
    Request,
    Result,
    WatcherConfig,
)
from setpoint.server.server import Server

from .conftest import eventually, running

CM = ("v1", "ConfigMap")
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
#: what the proxy answers the next watches with, in order, instead of passing them on
HOSTILE: list[tuple[bytes, str]] = [
    (HEAD + b"zz\r\n", "hold"),
    (HEAD + b"+5\r\nhello\r\n", "hold"),
    (HEAD + b"10\r\n{\"type\":", "close"),
    (HEAD + b"10\r\n{\"type\":", "reset"),
    (HEAD + b"5\r\nabcdeXY", "hold"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Enc", "close"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 100_000, "hold"),
    (HEAD + b"8\r\nnot json\r\n\n\r\n", "hold"),
]


class Proxy:
    """Relays bytes to the server; a watch request while hostile answers remain gets the
    next one instead. Counts the hostile connections that ended (the client closed those it
    was not reset on)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.hostile = list(HOSTILE)
        self.ended = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        back = asyncio.create_task(self._pipe(up_reader, writer))
        try:
            while data := await reader.read(65536):
                if b"watch=" in data and self.hostile:
                    back.cancel()
                    up_writer.close()
                    await self._answer(reader, writer, *self.hostile.pop(0))
                    return
                up_writer.write(data)
                await up_writer.drain()
        except ConnectionError:
            pass
        finally:
            back.cancel()
            with suppress(asyncio.CancelledError):
                await back
            up_writer.close()
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      answer: bytes, then: str) -> None:
        writer.write(answer)
        await writer.drain()
        if then == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            self.ended += 1
            return
        if then == "hold":
            with suppress(ConnectionError):
                while await reader.read(65536):
                    pass  # until the client closes it
        self.ended += 1

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with suppress(asyncio.CancelledError):
                await task


@asynccontextmanager
async def proxy_for(server: Server) -> AsyncIterator[tuple[Proxy, int]]:
    proxy = Proxy(server.port)
    listener = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    try:
        yield proxy, listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await proxy.stop()
        await listener.wait_closed()


def configmap(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"value": value}}


async def test_an_informer_relists_through_every_broken_stream(server: Server) -> None:
    assert server.config.kubeconfig_path is not None
    seen: dict[str, str | None] = {}

    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        seen[request.name] = None if obj is None else obj["data"]["value"]
        return Result.done()

    config = WatcherConfig(backoff=BackoffConfig(initial=0.01, cap=0.05))
    async with proxy_for(server) as (proxy, port), \
            Client(load_kubeconfig(server.config.kubeconfig_path, request_timeout=5)) \
            as direct:
        await direct.create(configmap("before", "1"))
        proxied = load_kubeconfig(server.config.kubeconfig_path, request_timeout=5,
                                  server=f"http://127.0.0.1:{port}")
        async with Client(proxied) as client:
            manager = Manager(client, [Controller(for_=CM, reconcile=reconcile)],
                              watcher_config=config, cache_sync_timeout=10)
            async with running(manager):
                await eventually(lambda: seen.get("before") == "1")
                written = 0
                while proxy.hostile:  # writes made while the watches keep breaking
                    written += 1
                    await direct.create(configmap(f"during-{written}", "1"))
                    await eventually(lambda n=written: seen.get(f"during-{n}") == "1",
                                     timeout=15)
                await direct.create(configmap("after", "1"))
                await eventually(lambda: seen.get("after") == "1", timeout=15)
                # every hostile watch's connection was closed by the client (or reset)
                await eventually(lambda: proxy.ended == len(HOSTILE))
                held = manager.context("configmap").cache.keys()
                assert set(held) >= {
                    "default/before", "default/after",
                    *(f"default/during-{n}" for n in range(1, written + 1))}
