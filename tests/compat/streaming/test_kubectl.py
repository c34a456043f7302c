"""The real kubectl against the streaming subresources, over WebSockets and over SPDY.

kubectl 1.32 speaks WebSockets first (``v5.channel.k8s.io`` for exec and attach,
``SPDY/3.1+portforward.k8s.io`` for port-forward) and SPDY/3.1 when told not to
(``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false``, ``KUBECTL_PORT_FORWARD_WEBSOCKETS=false``);
each test checks which one it got. Before it streams, kubectl reads the pod (it must be
Running) from the test app.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.integration.streaming import harness

pytestmark = [pytest.mark.compat,
              pytest.mark.skipif(shutil.which("kubectl") is None,
                                 reason="kubectl is not installed")]

SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}


@dataclass
class Kubectl:
    kubeconfig: Path
    cache: Path
    env: dict[str, str]

    def command(self, *args: str) -> list[str]:
        return ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir",
                str(self.cache), *args]

    async def run(self, *args: str, stdin: bytes | None = None,
                  timeout: float = 60) -> tuple[int, bytes, bytes]:
        process = await asyncio.create_subprocess_exec(
            *self.command(*args), env=self.env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        assert process.returncode is not None
        return process.returncode, out, err


@pytest.fixture(params=["websocket", "spdy"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def kubectl(app: harness.App, tmp_path: Path, transport: str) -> Kubectl:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    if transport == "spdy":
        env |= SPDY
    return Kubectl(harness.kubeconfig(app.url, tmp_path / "kubeconfig"), tmp_path / "cache",
                   env)


def upgrades(app: harness.App, subresource: str) -> list[str]:
    """The ``Upgrade`` header of each request kubectl made for ``subresource``."""
    return [headers.get("Upgrade", "") for _, path, headers in app.requests
            if path.split("?")[0].endswith("/" + subresource)]


def expected_upgrade(transport: str) -> str:
    return "websocket" if transport == "websocket" else "SPDY/3.1"


async def test_exec_prints_and_exit_codes_propagate(app: harness.App, kubectl: Kubectl,
                                                    transport: str) -> None:
    assert await kubectl.run("exec", harness.POD, "--", "echo", "hi") == (0, b"hi\n", b"")
    code, out, err = await kubectl.run("exec", harness.POD, "--", "sh", "-c",
                                       "echo out; echo err >&2; exit 3")
    assert code == 3
    assert out == b"out\n"
    assert err == b"err\ncommand terminated with exit code 3\n"
    assert upgrades(app, "exec") == [expected_upgrade(transport)] * 2


async def test_exec_with_stdin(app: harness.App, kubectl: Kubectl, transport: str) -> None:
    text = b"".join(b"line %d of the input\n" % i for i in range(50_000))  # ~1 MiB
    code, out, err = await kubectl.run("exec", "-i", harness.POD, "--", "sh", "-c",
                                       "tr a-z A-Z; echo done", stdin=text)
    assert (code, err) == (0, b"")
    assert out == text.upper() + b"done\n"
    assert upgrades(app, "exec") == [expected_upgrade(transport)]


async def test_exec_with_a_terminal(app: harness.App, kubectl: Kubectl, transport: str) -> None:
    if shutil.which("script") is None:
        pytest.skip("script (util-linux) is not installed")
    # the remote shell waits for the size kubectl sends, then for a line of input
    remote = ("for i in $(seq 250); do s=$(stty size); [ \"$s\" = '37 101' ] && break; "
              "sleep 0.02; done; tty >/dev/null && echo is-a-tty; echo size=$s; read line; "
              "echo got:$line")
    inner = "stty rows 37 cols 101; " + shlex.join(
        kubectl.command("exec", "-it", harness.POD, "--", "sh", "-c", remote))
    process = await asyncio.create_subprocess_exec(
        "script", "-qec", inner, "/dev/null", env=kubectl.env, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        output = b""
        while b"size=" not in output:  # kubectl is attached and the terminal sized
            chunk = await asyncio.wait_for(process.stdout.read(1024), 30)
            assert chunk, output
            output += chunk
        process.stdin.write(b"typed\r")
        await process.stdin.drain()
        rest, _ = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output += rest
    assert process.returncode == 0
    assert b"is-a-tty\r\nsize=37 101\r\n" in output
    assert b"got:typed\r\n" in output
    assert app.target.sessions[0].resizes[0] == harness.TerminalSize(101, 37)
    assert upgrades(app, "exec") == [expected_upgrade(transport)]


async def test_port_forward_then_http_and_bulk_data(app: harness.App, kubectl: Kubectl,
                                                    transport: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *kubectl.command("port-forward", f"pod/{harness.POD}", "0:8080", "0:7"),
        env=kubectl.env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    try:
        local: dict[int, int] = {}
        while len(local) < 2:
            line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
            match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)", line)
            if match:
                local[int(match[2])] = int(match[1])
        # several connections, one after the other and at once
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def hello(path: str) -> str:
                async with session.post(f"http://127.0.0.1:{local[8080]}{path}",
                                        data=b"b" * 100_000) as response:
                    return await response.text()

            assert await hello("/one") == "hello from the pod: POST /one 100000 bytes"
            answers = await asyncio.gather(*(hello(f"/{i}") for i in range(5)))
            assert answers == [f"hello from the pod: POST /{i} 100000 bytes" for i in range(5)]
        # 2 MiB through the echo port, read while it is written
        reader, writer = await asyncio.open_connection("127.0.0.1", local[7])
        payload = os.urandom(2 << 20)

        async def send() -> None:
            writer.write(payload)
            await writer.drain()

        sending = asyncio.ensure_future(send())
        echoed = await asyncio.wait_for(reader.readexactly(len(payload)), 60)
        await sending
        assert echoed == payload
        writer.close()
        await writer.wait_closed()
    finally:
        process.terminate()
        await process.communicate()
    kinds = set(upgrades(app, "portforward"))
    assert kinds == {"websocket" if transport == "websocket" else "SPDY/3.1"}


@pytest.mark.parametrize("transport", ["websocket"])  # logs are a plain GET either way
async def test_logs(app: harness.App, kubectl: Kubectl) -> None:
    assert await kubectl.run("logs", harness.POD) == (0, b"one\ntwo\nthree\n", b"")
    assert await kubectl.run("logs", harness.POD, "--tail=1") == (0, b"three\n", b"")
    code, _, err = await kubectl.run("logs", harness.POD, "--previous")
    assert code == 1
    assert err == b'Error from server (BadRequest): previous terminated container "main" in ' \
                  b'pod "web" not found\n'


@pytest.mark.parametrize("transport", ["websocket"])
async def test_logs_follow(app: harness.App, kubectl: Kubectl) -> None:
    process = await asyncio.create_subprocess_exec(
        *kubectl.command("logs", "-f", harness.POD), env=kubectl.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    try:
        lines = [await asyncio.wait_for(process.stdout.readline(), 30) for _ in range(3)]
        assert lines == [b"one\n", b"two\n", b"three\n"]
        await app.target.log_more.put(b"four\n")
        assert await asyncio.wait_for(process.stdout.readline(), 30) == b"four\n"
        await app.target.log_more.put(None)  # the container ends: so does kubectl
        out, err = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert (process.returncode, out, err) == (0, b"", b"")
    assert app.target.log_requests[-1].follow


async def test_attach_with_stdin(app: harness.App, kubectl: Kubectl, transport: str) -> None:
    code, out, _ = await kubectl.run("attach", "-i", harness.POD, stdin=b"to the main process\n")
    assert code == 0
    assert out == b"to the main process\n"
    assert upgrades(app, "attach") == [expected_upgrade(transport)]
