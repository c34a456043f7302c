"""Measure the streaming subresources: throughput through kubectl, and memory per connection.

A server process serves the streaming handlers over a pod of local processes (the test
harness: ``exec`` runs the command, ``port_forward`` connects to a local TCP echo server, a
process of its own). Printed side by side, same run:

1. **exec output**: ``kubectl exec POD -- head -c N /dev/zero`` over WebSockets and over
   SPDY, beside the same command's output read straight from its pipe (``sh -c``).
2. **port-forward**: N MiB written to ``kubectl port-forward`` and read back from the echo
   server, over the SPDY tunnel in WebSockets and over SPDY, beside the echo server reached
   directly.
3. **memory**: the server's RSS idle, with C open port-forward connections (WebSocket
   channels, each with a connection to the echo server), and with S exec sessions running
   ``yes`` whose clients never read (the output waits in bounded buffers, not in memory).

    python benchmarks/streaming.py [--mib 256] [--connections 200] [--stalled 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.integration.streaming import harness  # noqa: E402

SPDY = {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false", "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}
CHUNK = 1 << 20


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- the child processes -------------------------------------------------------------------


def _announce(port_file: Path, address: str) -> None:
    """Tell the parent where this child listens (a few bytes, once)."""
    port_file.write_text(address)


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def serve_echo(port_file: Path) -> None:
    server = await asyncio.start_server(_echo, "127.0.0.1", 0)
    _announce(port_file, str(server.sockets[0].getsockname()[1]))
    await asyncio.Event().wait()


async def serve_api(port_file: Path, echo_port: int, workdir: Path) -> None:
    target = harness.ProcessTarget(workdir, ports={7: echo_port})
    app = await harness.start_app(target)
    _announce(port_file, app.url)
    await asyncio.Event().wait()


def spawn(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    port_file = Path(tempfile.mkstemp()[1])
    port_file.unlink()
    process = subprocess.Popen([sys.executable, __file__, *args, str(port_file)])
    deadline = time.monotonic() + 20
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"{args[0]} did not start")
        time.sleep(0.02)
    time.sleep(0.05)
    return process, port_file.read_text()


# --- measurements --------------------------------------------------------------------------


def kubectl(url: str, workdir: Path) -> tuple[list[str], dict[str, str]]:
    config = harness.kubeconfig(url, workdir / "kubeconfig")
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    return ["kubectl", "--kubeconfig", str(config), "--cache-dir", str(workdir / "cache")], env


async def timed_output(command: list[str], env: dict[str, str], size: int) -> float:
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(*command, env=env,
                                                   stdout=asyncio.subprocess.PIPE)
    assert process.stdout is not None
    total = 0
    while chunk := await process.stdout.read(CHUNK):
        total += len(chunk)
    await process.wait()
    elapsed = time.perf_counter() - start
    if total != size:
        raise RuntimeError(f"{command[-4:]} gave {total} bytes, not {size}")
    return elapsed


async def echo_through(port: int, size: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    block = b"\x5a" * CHUNK
    start = time.perf_counter()

    async def send() -> None:
        for _ in range(size // CHUNK):
            writer.write(block)
            await writer.drain()

    sending = asyncio.ensure_future(send())
    received = 0
    while received < size:
        data = await reader.read(CHUNK)
        if not data:
            raise RuntimeError("the connection ended early")
        received += len(data)
    await sending
    elapsed = time.perf_counter() - start
    writer.close()
    await writer.wait_closed()
    return elapsed


async def port_forward(base: list[str], env: dict[str, str], size: int) -> float:
    process = await asyncio.create_subprocess_exec(
        *base, "port-forward", f"pod/{harness.POD}", "0:7", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert process.stdout is not None
    try:
        while True:
            line = (await process.stdout.readline()).decode()
            match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
            if match:
                break
        return await echo_through(int(match[1]), size)
    finally:
        process.terminate()
        await process.wait()


async def memory(url: str, api_pid: int, connections: int, stalled: int) -> list[str]:
    rows = [f"| idle | {rss_mib(api_pid):.1f} | — |"]
    base_rss = rss_mib(api_pid)
    ws_url = url + f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/portforward"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        sockets = []
        for _ in range(connections):
            ws = await session.ws_connect(ws_url + "?ports=7", protocols=("v4.channel.k8s.io",))
            await ws.receive_bytes()
            await ws.receive_bytes()
            await ws.send_bytes(b"\x00ping")
            await ws.receive_bytes()
            sockets.append(ws)
        rss = rss_mib(api_pid)
        rows.append(f"| {connections} open port-forward connections | {rss:.1f} | "
                    f"{(rss - base_rss) * 1024 / connections:.0f} KiB each |")
        for ws in sockets:
            await ws.close()
        exec_url = url + (f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/exec"
                          "?command=yes")
        before = rss_mib(api_pid)
        stalled_sockets = [await session.ws_connect(exec_url, protocols=("v5.channel.k8s.io",))
                           for _ in range(stalled)]
        peak = before
        for _ in range(20):  # 2 s of ``yes`` writing into clients that read nothing
            await asyncio.sleep(0.1)
            peak = max(peak, rss_mib(api_pid))
        rows.append(f"| {stalled} exec sessions running `yes`, never read (peak over 2 s) | "
                    f"{peak:.1f} | {(peak - before) * 1024 / stalled:.0f} KiB each |")
        for ws in stalled_sockets:
            await ws.close()
    return rows


async def main(args: argparse.Namespace) -> None:
    if shutil.which("kubectl") is None:
        raise SystemExit("kubectl is not installed")
    size = args.mib * CHUNK
    workdir = Path(tempfile.mkdtemp(prefix="setpoint-streaming-"))
    echo, echo_port = spawn("--echo")
    api, url = spawn("--api", echo_port, str(workdir))
    try:
        base, env = kubectl(url, workdir)
        spdy_env = env | SPDY
        command = f"head -c {size} /dev/zero"
        print(f"{args.mib} MiB each, best of {args.rounds}; server pid {api.pid}\n")
        print("| path | seconds | MiB/s |\n|---|---|---|")
        cases = [
            ("the command's pipe, read directly", ["sh", "-c", command], env),
            ("kubectl exec, WebSocket (v5.channel.k8s.io)",
             [*base, "exec", harness.POD, "--", "sh", "-c", command], env),
            ("kubectl exec, SPDY/3.1", [*base, "exec", harness.POD, "--", "sh", "-c", command],
             spdy_env),
        ]
        startup = min([await timed_output([*base, "exec", harness.POD, "--", "true"], env, 0)
                       for _ in range(args.rounds)])
        print(f"| kubectl exec -- true (kubectl's start, no output) | {startup:.2f} | — |")
        for label, cmd, e in cases:
            best = min([await timed_output(cmd, e, size) for _ in range(args.rounds)])
            print(f"| {label} | {best:.2f} | {args.mib / best:.0f} |")
        direct = min([await echo_through(int(echo_port), size) for _ in range(args.rounds)])
        print(f"| echo server, directly | {direct:.2f} | {args.mib / direct:.0f} |")
        for label, e in (("kubectl port-forward, SPDY in WebSocket", env),
                         ("kubectl port-forward, SPDY/3.1", spdy_env)):
            best = min([await port_forward(base, e, size) for _ in range(args.rounds)])
            print(f"| {label} (echoed) | {best:.2f} | {args.mib / best:.0f} |")
        print("\n| server | RSS MiB | per connection |\n|---|---|---|")
        for row in await memory(url, api.pid, args.connections, args.stalled):
            print(row)
    finally:
        api.terminate()
        echo.terminate()
        api.wait()
        echo.wait()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--echo":
        asyncio.run(serve_echo(Path(sys.argv[2])))
    elif len(sys.argv) > 2 and sys.argv[1] == "--api":
        asyncio.run(serve_api(Path(sys.argv[4]), int(sys.argv[2]), Path(sys.argv[3])))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--mib", type=int, default=256)
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--connections", type=int, default=200)
        parser.add_argument("--stalled", type=int, default=10)
        asyncio.run(main(parser.parse_args()))
