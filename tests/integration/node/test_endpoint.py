"""The agent's HTTPS endpoint and the server's target that reaches it, with real processes.

The server side (:class:`AgentTarget`) talks to the agent's endpoint over TLS with a client
certificate of the cluster CA, exactly as the API server does; the endpoint serves a real
:class:`ProcessRuntime`'s pod. No API server is needed for this: the pod is looked up from a
dictionary.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.apimachinery import errors
from setpoint.node import endpoint
from setpoint.pki.authority import Authority
from setpoint.server import streaming
from setpoint.server.nodeproxy import AgentTarget, NodeDialer
from tests.integration.agent.conftest import (
    make_config,
    pod,
    running,
    running_ready,
    sh,
    start,
    wait_for,
    wait_logs,
)

SERVER = ('echo hello; echo oops >&2; '
          'exec python3 -m http.server --bind "$POD_IP" 8080')


@dataclass
class Node:
    runtime: Any
    target: AgentTarget
    pod: dict[str, Any]
    port: int
    authority: Authority
    dialer: NodeDialer


@contextlib.asynccontextmanager
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    authority = Authority(tmp_path / "pki")
    authority.client("kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",))
    cert, key = authority.paths("kubelet-client")
    async with running(make_config(tmp_path / "agent", "none")) as rt:
        p = pod(sh("c", SERVER, readinessProbe={"tcpSocket": {"port": 8080},
                                                 "periodSeconds": 1}), name="web")
        uid = await start(rt, p)
        await wait_for(rt, uid, running_ready)
        pods = {("default", "web"): p}
        app = endpoint.build_app(rt, lambda ns, name: pods.get((ns, name)), secure=True)
        crt, k = endpoint.serving_certificate(tmp_path, "node-a", ["127.0.0.1"])
        context = endpoint.tls_context(crt, k, authority.ca.cert_pem)
        async with endpoint.Endpoint(app, "127.0.0.1", 0, context) as ep:
            dialer = NodeDialer(secure=True, cert_file=str(cert), key_file=str(key))
            try:
                target = AgentTarget(dialer, f"https://127.0.0.1:{ep.port}", "default",
                                     "web", "c", streaming.StreamingConfig())
                yield Node(rt, target, p, ep.port, authority, dialer)
            finally:
                await dialer.close()


async def read_all(reader: Any) -> bytes:
    out = b""
    while chunk := await reader.read(65536):
        out += chunk
    return out


@pytest.mark.slow
async def test_exec_logs_and_port_forward_through_the_endpoint(tmp_path: Path) -> None:
    async with node(tmp_path) as n:
        await wait_logs(n.runtime, n.pod["metadata"]["uid"], "hello")
        # logs, with the options applied at the agent
        chunks = await n.target.logs(streaming.LogOptions(container="c", tail_lines=1))
        text = b"".join([c async for c in chunks]).decode()
        assert text.strip() in ("hello", "oops")
        everything = b"".join([c async for c in await n.target.logs(
            streaming.LogOptions(container="c"))]).decode()
        assert "hello" in everything
        assert "oops" in everything

        # exec with stdin and its end, output on both streams, the exit code
        session = await n.target.exec(streaming.ExecOptions(
            container="c", command=("sh", "-c", "cat; echo err >&2; exit 3"), stdin=True))
        assert session.stdin is not None
        session.stdin.write(b"from stdin\n")
        await session.stdin.drain()
        session.stdin.write_eof()
        out, err = await asyncio.gather(read_all(session.stdout), read_all(session.stderr))
        status = await session.wait()
        assert (out, err) == (b"from stdin\n", b"err\n")
        assert status.code == 3
        assert "exit code 3" in status.message

        # a command that does not exist: the agent's outcome, not a hang
        missing = await n.target.exec(streaming.ExecOptions(
            container="c", command=("no-such-program-here",)))
        await read_all(missing.stdout)
        assert (await missing.wait()).code == 126

        # port-forward: an HTTP request answered by the pod's server
        reader, writer = await n.target.port_forward(8080)
        writer.write(b"GET / HTTP/1.0\r\nHost: pod\r\n\r\n")
        await writer.drain()
        response = await read_all(reader)
        writer.close()
        assert response.startswith(b"HTTP/1.0 200"), response[:200]


@pytest.mark.slow
async def test_the_endpoint_refuses_other_clients_and_unknown_pods(tmp_path: Path) -> None:
    async with node(tmp_path) as n:
        url = f"https://127.0.0.1:{n.port}/containerLogs/default/web/c"
        # no client certificate: the TLS handshake fails
        plain = ssl.create_default_context()
        plain.check_hostname = False
        plain.verify_mode = ssl.CERT_NONE
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                async with session.get(url, ssl=plain) as response:
                    await response.read()
        # a certificate of the cluster CA, but for someone else: 403
        n.authority.client("someone", "jane", ("developers",))
        cert, key = n.authority.paths("someone")
        other = ssl.create_default_context()
        other.check_hostname = False
        other.verify_mode = ssl.CERT_NONE
        other.load_cert_chain(cert, key)
        async with aiohttp.ClientSession() as session, session.get(url, ssl=other) as response:
            assert response.status == 403
        # unknown pod, unknown container
        ghost = AgentTarget(n.dialer, f"https://127.0.0.1:{n.port}", "default", "ghost", "c",
                            streaming.StreamingConfig())
        with pytest.raises(errors.NotFound):
            await ghost.logs(streaming.LogOptions(container="c"))
        with pytest.raises(errors.BadRequest, match="container nope is not valid"):
            await n.target.logs(streaming.LogOptions(container="nope"))
        with pytest.raises(errors.BadRequest, match="previous terminated container"):
            await n.target.logs(streaming.LogOptions(container="c", previous=True))
