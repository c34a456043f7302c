"""The userspace service proxy: its table from Services and EndpointSlices, and forwarding."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path
from typing import Any

import pytest

from setpoint.agent import proxy as px


def service(name: str, ip: str, ports: list[dict[str, Any]], ns: str = "ns",
            **spec: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": ip, "ports": ports, **spec}}


def eslice(name: str, service_name: str, ports: list[dict[str, Any]],
           endpoints: list[dict[str, Any]], ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name,
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "ports": ports, "endpoints": endpoints}


def ep(ip: str, ready: bool | None = True) -> dict[str, Any]:
    return {"addresses": [ip], "conditions": {} if ready is None else {"ready": ready}}


def test_rules_ready_endpoints_by_port_name() -> None:
    services = [service("web", "10.96.0.5", [
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "dns", "port": 53, "protocol": "UDP"}])]
    slices = [
        eslice("web-a", "web", [{"name": "http", "port": 8080, "protocol": "TCP"},
                                {"name": "dns", "port": 5353, "protocol": "UDP"}],
               [ep("10.244.0.2"), ep("10.244.0.3", False), ep("10.244.0.4", None)]),
        eslice("web-b", "web", [{"name": "http", "port": 8080}], [ep("10.244.0.2")]),
        eslice("other", "other", [{"name": "http", "port": 1}], [ep("10.244.0.9")]),
    ]
    table = px.rules_from(services, slices, "routes")
    assert table == {px.Frontend("10.96.0.5", 80): (("10.244.0.2", 8080),
                                                    ("10.244.0.4", 8080))}


def test_rules_skip_headless_and_external_and_loopback_serves_node_ports() -> None:
    services = [service("h", "None", [{"port": 80}]),
                {"metadata": {"namespace": "ns", "name": "x"},
                 "spec": {"type": "ExternalName", "externalName": "example.com"}},
                service("np", "10.96.0.6", [{"port": 80, "nodePort": 30080}], type="NodePort"),
                service("c", "10.96.0.7", [{"port": 81}])]
    slices = [eslice("np-1", "np", [{"port": 8080}], [ep("127.64.0.2")])]
    assert px.rules_from(services, slices, "routes") == {
        px.Frontend("10.96.0.6", 80): (("127.64.0.2", 8080),),
        px.Frontend("10.96.0.7", 81): ()}
    assert px.rules_from(services, slices, "loopback") == {
        px.Frontend("127.0.0.1", 30080): (("127.64.0.2", 8080),)}


def test_config_bounds() -> None:
    with pytest.raises(ValueError, match="max_connections"):
        px.ProxyConfig(max_connections=0)
    with pytest.raises(ValueError, match="positive"):
        px.ProxyConfig(connect_timeout=0)
    with pytest.raises(ValueError, match="mode"):
        px.ProxyConfig(mode="iptables")  # type: ignore[arg-type]


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


async def named_server(host: str, name: bytes) -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(100)
        writer.write(name + b":" + data)
        await writer.drain()
        writer.close()
    return await asyncio.start_server(answer, host, 0)


async def ask(host: str, port: int) -> bytes:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"hi")
    writer.write_eof()
    data = await reader.read()
    writer.close()
    return data


async def test_forwards_round_robin_refuses_without_backends_and_frees(tmp_path: Path) -> None:
    a = await named_server("127.0.0.1", b"a")
    b = await named_server("127.0.0.1", b"b")
    backends = tuple(("127.0.0.1", int(s.sockets[0].getsockname()[1])) for s in (a, b))
    front = px.Frontend("127.0.0.1", free_port("127.0.0.1"), "ns/web:80")
    async with a, b, px.ServiceProxy(px.ProxyConfig(mode="loopback"), tmp_path) as proxy:
        await proxy.apply({front: backends})
        answers = {await ask(front.ip, front.port) for _ in range(4)}
        assert answers == {b"a:hi", b"b:hi"}
        # a dead backend is skipped for the next one
        await proxy.apply({front: (("127.0.0.1", free_port("127.0.0.1")), backends[0])})
        assert {await ask(front.ip, front.port) for _ in range(3)} == {b"a:hi"}
        # no ready backend: no listener, the connection is refused
        await proxy.apply({front: ()})
        with pytest.raises(ConnectionRefusedError):
            await ask(front.ip, front.port)
        await proxy.apply({front: backends})
        assert await ask(front.ip, front.port) in (b"a:hi", b"b:hi")
        # gone from the table: the port is free again
        await proxy.apply({})
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((front.ip, front.port))
    assert proxy.listeners == {}


async def test_connections_are_bounded(tmp_path: Path) -> None:
    release = asyncio.Event()
    reached = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.set()
        await release.wait()
        writer.write(b"ok")
        writer.close()
    server = await asyncio.start_server(slow, "127.0.0.1", 0)
    backend = ("127.0.0.1", int(server.sockets[0].getsockname()[1]))
    front = px.Frontend("127.0.0.1", free_port("127.0.0.1"))
    config = px.ProxyConfig(mode="loopback", max_connections=1)
    async with server, px.ServiceProxy(config, tmp_path) as proxy:
        await proxy.apply({front: (backend,)})
        first = await asyncio.open_connection(front.ip, front.port)
        await reached.wait()  # the first connection is forwarded: it counts
        second = await asyncio.open_connection(front.ip, front.port)
        assert await second[0].read() == b""  # closed at accept: over the bound
        release.set()
        assert await first[0].read() == b"ok"
        for _, w in (first, second):
            w.close()
            with contextlib.suppress(OSError):
                await w.wait_closed()
