"""A watch client that vanishes without a word, for ``test_dead_peers``: run in a network
namespace of its own (``unshare --net``), where this program is alone on the loopback.

It starts a server on memory storage, opens a watch over a raw connection, then makes the
client's machine vanish: a ``blackhole`` queueing discipline on the namespace's loopback
drops every packet from then on, so the server's side sees neither an acknowledgement, nor a
FIN, nor a reset. ``quiet``: nothing more happens, and only keep-alive can find the peer.
``busy``: an object is created, so the watch writes an event that is never acknowledged,
and keep-alive is set too long to matter: only the user timeout can find the peer.

It waits for the positive signal (the server's side of the connection is lost, the watch's
watcher is gone), lifts the blackhole, reads the server's metrics, and prints one JSON line.
Arguments: the scenario, and the event loop (``asyncio`` or ``uvloop``, which ``setpoint
serve`` runs on). Exit code 77: this kernel or namespace cannot do it (the test is skipped).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

from setpoint.registry.options import WriteOptions
from setpoint.server import connections
from setpoint.server.limits import Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import waiting

UNSUPPORTED = 77
WATCH = b"GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n"

LIMITS = {
    # keep-alive finds the quiet peer: 1 s of silence, then 2 probes 1 s apart; the user
    # timeout is the kernel's own (15 minutes), so it cannot be what ends the connection
    "quiet": Limits(keepalive_idle=1, keepalive_interval=1, keepalive_count=2,
                    tcp_user_timeout=0),
    # the user timeout finds the busy peer: keep-alive would wait 10 minutes
    "busy": Limits(keepalive_idle=600, keepalive_interval=60, keepalive_count=9,
                   tcp_user_timeout=2),
}


def run(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True, check=False).returncode == 0


async def scenario(mode: str, directory: Path) -> dict[str, Any]:
    config = ServerConfig(host="127.0.0.1", port=0, storage=StorageConfig(kind="memory"),
                          compaction_interval=None, kubeconfig_path=directory / "kubeconfig",
                          limits=LIMITS[mode])
    async with Server(config) as server:
        guard, cache, catalog = server._guard, server.cache, server.catalog
        assert guard is not None
        assert cache is not None
        assert catalog is not None
        watchers = cache.watcher_count()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(WATCH)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200"), head
            await waiting.eventually(lambda: cache.watcher_count() == watchers + 1,
                                     what="the watch to be registered")
            (transport,) = list(guard._conns)
            lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
            connections.when_lost(
                transport, lambda exc: lost.done() or lost.set_result(exc))
            if not run("tc", "qdisc", "add", "dev", "lo", "root", "blackhole"):
                return {"unsupported": "no blackhole queueing discipline"}
            try:
                if mode == "busy":
                    await catalog.store("", "configmaps").create("default", {
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "unseen"}, "data": {"x": "y"}}, "v1",
                        WriteOptions())
                exc = await asyncio.wait_for(lost, 60)
                await waiting.eventually(lambda: cache.watcher_count() == watchers,
                                         what="the watch's watcher to be released")
                open_after = guard.open_connections
            finally:
                run("tc", "qdisc", "del", "dev", "lo", "root")
            metrics = await fetch_metrics(server.port)
            line = 'setpoint_closed_connections_total{reason="dead_peer"} '
            dead = next(x for x in metrics.splitlines() if x.startswith(line))
            return {"errno": getattr(exc, "errno", None),
                    "error": type(exc).__name__ if exc is not None else None,
                    "watchers_released": cache.watcher_count() == watchers,
                    "open_connections": open_after,
                    "dead_peer_closes": float(dead.rsplit(" ", 1)[1])}
        finally:
            writer.transport.abort()


async def fetch_metrics(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    return data.split(b"\r\n\r\n", 1)[1].decode()


def main() -> int:
    mode, loop = sys.argv[1], sys.argv[2]
    if not run("ip", "link", "set", "lo", "up"):
        print(orjson.dumps({"unsupported": "cannot bring the loopback up"}).decode())
        return UNSUPPORTED
    with tempfile.TemporaryDirectory() as directory:
        if loop == "uvloop":
            import uvloop
            result = uvloop.run(scenario(mode, Path(directory)))
        else:
            result = asyncio.run(scenario(mode, Path(directory)))
    print(orjson.dumps(result).decode())
    return UNSUPPORTED if "unsupported" in result else 0


if __name__ == "__main__":
    sys.exit(main())
