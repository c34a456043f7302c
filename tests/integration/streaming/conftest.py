"""A pod of local processes served by the streaming handlers on a port-0 app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from setpoint.server import streaming
from tests.integration.streaming import harness


@pytest.fixture(autouse=True)
async def no_task_left_running() -> AsyncIterator[None]:
    """Every task a test's requests started has ended once its fixtures are torn down."""
    before = asyncio.all_tasks()
    yield
    for _ in range(20):
        leftover = {t for t in asyncio.all_tasks() - before
                    if not t.done() and t is not asyncio.current_task()}
        if not leftover:
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"tasks left running: {leftover}")


@pytest.fixture
async def pod_port() -> AsyncIterator[int]:
    """An HTTP server standing for a process in the pod listening on a port."""

    async def hello(request: web.Request) -> web.Response:
        body = await request.read()
        return web.Response(text=f"hello from the pod: {request.method} {request.path} "
                                 f"{len(body)} bytes")

    application = web.Application()
    application.router.add_route("*", "/{tail:.*}", hello)
    runner = web.AppRunner(application, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1]
    await runner.cleanup()


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    """A TCP echo server: what it reads it writes back, until the client closes."""
    connections: set[asyncio.Task[None]] = set()

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            connections.discard(task)

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    for task in list(connections):
        task.cancel()
    await server.wait_closed()


@pytest.fixture
def target(tmp_path: Path, pod_port: int, echo_port: int) -> harness.ProcessTarget:
    return harness.ProcessTarget(tmp_path, ports={8080: pod_port, 7: echo_port},
                                 log_lines=[b"one\n", b"two\n", b"three\n"])


@pytest.fixture
def config() -> streaming.StreamingConfig:
    return streaming.StreamingConfig()


@pytest.fixture
async def app(target: harness.ProcessTarget,
              config: streaming.StreamingConfig) -> AsyncIterator[harness.App]:
    started = await harness.start_app(target, config)
    yield started
    await started.close()
