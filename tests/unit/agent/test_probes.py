"""Probe results and thresholds, and the probe actions against real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from setpoint.agent import probes


def spec(**kw: object) -> probes.ProbeSpec:
    parsed = probes.ProbeSpec.parse({"exec": {"command": ["true"]}, **kw})
    assert parsed is not None
    return parsed


def test_defaults_and_bounds() -> None:
    s = spec()
    assert (s.initial_delay, s.period, s.timeout, s.success_threshold, s.failure_threshold) == (
        0.0, 10.0, 1.0, 1, 3)
    s = spec(periodSeconds=0, timeoutSeconds=-5, failureThreshold=0, initialDelaySeconds=-1)
    assert (s.period, s.timeout, s.failure_threshold, s.initial_delay) == (1.0, 1.0, 1, 0.0)
    assert probes.ProbeSpec.parse(None) is None


def test_results_flip_only_at_their_thresholds() -> None:
    state = probes.ProbeState("readiness", spec(successThreshold=2, failureThreshold=3))
    assert state.result is False  # not ready before any result
    assert [state.observe(ok) for ok in (True, True)] == [False, True]
    assert state.result is True
    assert [state.observe(ok) for ok in (False, False, True, False, False, False)] == [
        False, False, False, False, False, True]
    assert state.result is False
    assert probes.ProbeState("liveness", spec()).result is True
    assert probes.ProbeState("startup", spec()).result is None


def test_named_ports() -> None:
    c = {"ports": [{"name": "http", "containerPort": 8080}]}
    assert probes.resolve_port("http", c) == 8080
    assert probes.resolve_port(81, c) == 81
    assert probes.resolve_port("82", c) == 82
    with pytest.raises(ValueError, match="not found"):
        probes.resolve_port("grpc", c)


@pytest.fixture
async def http_server() -> AsyncIterator[tuple[int, list[bytes]]]:
    requests: list[bytes] = []
    done = asyncio.Event()
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            requests.append(head)
            path = head.split(b" ")[1]
            code = {b"/ok": 200, b"/moved": 302, b"/bad": 503}.get(path, 404)
            if path == b"/slow":
                await done.wait()
            writer.write(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % code)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # a TCP probe: connected, then closed
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield port, requests
        done.set()
        server.close()
        await asyncio.gather(*handlers)


async def _no_exec(argv: list[str], timeout: float) -> tuple[int, bytes]:
    raise AssertionError("no exec expected")


async def test_http_get(http_server: tuple[int, list[bytes]]) -> None:
    port, requests = http_server

    async def get(path: str, **kw: object) -> probes.Outcome:
        return await probes.run_action({"httpGet": {"path": path, "port": port, **kw}},
                                       container={}, pod_ip="127.0.0.1", timeout=1.0,
                                       exec_fn=_no_exec)

    assert await get("/ok", httpHeaders=[{"name": "X-Probe", "value": "1"}]) == probes.Outcome(True)
    assert b"User-Agent: kube-probe/1.32" in requests[-1]
    assert b"X-Probe: 1" in requests[-1]
    assert (await get("/moved")).ok
    assert await get("/bad") == probes.Outcome(False, "HTTP probe failed with statuscode: 503")
    slow = await get("/slow")
    assert not slow.ok
    assert "context deadline exceeded" in slow.message


async def test_tcp_and_refused(http_server: tuple[int, list[bytes]]) -> None:
    port, _ = http_server
    ok = await probes.run_action({"tcpSocket": {"port": port}}, container={},
                                 pod_ip="127.0.0.1", timeout=1.0, exec_fn=_no_exec)
    assert ok.ok
    # a port nobody listens on: take one and close it
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    free = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    refused = await probes.run_action({"tcpSocket": {"port": free}}, container={},
                                      pod_ip="127.0.0.1", timeout=1.0, exec_fn=_no_exec)
    assert refused == probes.Outcome(False, f"dial tcp 127.0.0.1:{free}: connect: "
                                            "connection refused")
    http = await probes.run_action({"httpGet": {"port": free}}, container={},
                                   pod_ip="127.0.0.1", timeout=1.0, exec_fn=_no_exec)
    assert http.message == (f'Get "http://127.0.0.1:{free}/": dial tcp 127.0.0.1:{free}: '
                            "connect: connection refused")


async def test_exec_outcomes() -> None:
    async def fake(argv: list[str], timeout: float) -> tuple[int, bytes]:
        return {"ok": (0, b"fine"), "bad": (1, b"it broke"), "slow": (-1, b"")}[argv[0]]

    async def run(cmd: str) -> probes.Outcome:
        return await probes.run_action({"exec": {"command": [cmd]}}, container={},
                                       pod_ip="", timeout=1.0, exec_fn=fake)

    assert await run("ok") == probes.Outcome(True, "fine")
    assert await run("bad") == probes.Outcome(False, "it broke")
    assert await run("slow") == probes.Outcome(False, "command ['slow'] timed out")
    grpc = await probes.run_action({"grpc": {"port": 1}}, container={}, pod_ip="",
                                   timeout=1.0, exec_fn=fake)
    assert not grpc.ok
    assert "not supported" in grpc.message
