"""Requests/s and latency through the agent's userspace service proxy, beside the same
requests sent straight to the backends, in the same run.

Three backends (asyncio servers in this process answering a small HTTP/1.0 response, one
request per connection, as a ``python3 -m http.server`` client does) on 127.0.0.1; the proxy
(``setpoint.agent.proxy.ServiceProxy`` in ``loopback`` mode, so no root is needed) listens on
another 127.0.0.1 port and forwards round-robin. C clients each open N/C connections in turn.

    python benchmarks/service_proxy.py [--n 5000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.agent import proxy as px  # noqa: E402

RESPONSE = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def backend() -> asyncio.Server:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(RESPONSE)
        await writer.drain()
        writer.close()
    return await asyncio.start_server(answer, "127.0.0.1", 0)


async def run(targets: list[tuple[str, int]], n: int, concurrency: int
              ) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def client(k: int) -> None:
        for i in range(n // concurrency):
            host, port = targets[(k + i) % len(targets)]
            t0 = time.perf_counter()
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"GET / HTTP/1.0\r\n\r\n")
            assert (await reader.read()).endswith(b"ok")
            writer.close()
            latencies.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for k in range(concurrency):
            group.create_task(client(k))
    return time.perf_counter() - t0, latencies


def report(label: str, elapsed: float, latencies: list[float]) -> None:
    q = statistics.quantiles(latencies, n=100)
    print(f"{label:10} {len(latencies) / elapsed:9.0f} req/s   p50 {q[49] * 1e3:6.2f} ms"
          f"   p99 {q[98] * 1e3:6.2f} ms")


async def main(n: int, concurrency: int) -> None:
    servers = [await backend() for _ in range(3)]
    backends = tuple(("127.0.0.1", int(s.sockets[0].getsockname()[1])) for s in servers)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    front = px.Frontend("127.0.0.1", port, "bench/web:80")
    with tempfile.TemporaryDirectory() as tmp:
        async with px.ServiceProxy(px.ProxyConfig(mode="loopback"), Path(tmp)) as proxy:
            await proxy.apply({front: backends})
            report("direct", *await run(list(backends), n, concurrency))
            report("proxied", *await run([(front.ip, front.port)], n, concurrency))
            report("direct", *await run(list(backends), n, concurrency))
    for s in servers:
        s.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.concurrency))
