"""Measure what a ``setpoint serve`` process holds in memory under writes and reads that cost it.

Each scenario runs against a fresh server process (port 0, fresh SQLite data directory) and
prints its resident set (VmRSS from /proc) before and after, beside the idle server's:

1. **big object**: one ConfigMap of about 1 MiB (1,024 keys of 1,000 characters), then P
   small merge patches of it (a label each): every patch is a watch cache event whose object
   is the whole 1 MiB. With ``--stalled-watch`` a watch on ConfigMaps is open meanwhile and
   never read (a client that stopped reading).
2. **small objects**: N small ConfigMaps created with C concurrent clients.
3. **concurrent lists**: after scenario 2's objects, L clients each LIST every ConfigMap
   (unpaginated, 5 times each) while one well-behaved client (a process of its own) GETs one
   object in a loop: the 429 answers, the well-behaved client's p50/p99 latency beside the
   same client's on the idle server (same run), and the server's peak RSS (VmHWM).

``--server-src DIR`` runs the servers from another source tree (``PYTHONPATH=DIR``), e.g. an
older checkout, to print its figures beside these. Extra ``--serve-arg`` values go to every
``setpoint serve`` command line (``--serve-arg=--watch-cache-bytes=64Mi``).

    python benchmarks/memory.py [--patches 776] [--n 20000] [--lists 8]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import ServeProcess, start_serve  # noqa: E402

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def rss_mib(pid: int, field: str = "VmRSS:") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


async def settle(pid: int) -> float:
    """RSS once it stops moving (the server may still be applying the last events)."""
    last = rss_mib(pid)
    for _ in range(20):
        await asyncio.sleep(0.25)
        now = rss_mib(pid)
        if abs(now - last) < 0.5:
            return now
        last = now
    return last


async def send(s: aiohttp.ClientSession, method: str, path: str, body: Any,
               headers: dict[str, str], expect: tuple[int, ...] = (200, 201)) -> int:
    """One request; bodies stay below 64 KiB so that any server version reads them whole."""
    for _ in range(20):
        async with s.request(method, path, data=orjson.dumps(body), headers=headers) as r:
            await r.read()
            if r.status in expect:
                return r.status
            if r.status >= 500 or r.status == 429:
                await asyncio.sleep(0.05)
                continue
            raise AssertionError(f"{method} {path}: {r.status} {await r.text()}")
    raise AssertionError(f"{method} {path}: no success after 20 attempts")


async def big_object(s: aiohttp.ClientSession, patches: int) -> None:
    await send(s, "POST", CONFIGMAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "big"}, "data": {}}, JSON)
    chunk = 48
    for start in range(0, 1024, chunk):
        data = {f"k{i:04d}": f"{i:04d}" + "x" * 996 for i in range(start, start + chunk)}
        await send(s, "PATCH", CONFIGMAPS + "/big", {"data": data}, MERGE)
    for i in range(patches):
        await send(s, "PATCH", CONFIGMAPS + "/big",
                   {"metadata": {"labels": {"patch": str(i)}}}, MERGE)


async def small_objects(s: aiohttp.ClientSession, n: int, concurrency: int) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            await send(s, "POST", CONFIGMAPS, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:06d}", "labels": {"app": "bench", "n": str(i)}},
                "data": {"key": f"value-{i}", "other": "some more text " * 8}}, JSON)

    async with asyncio.TaskGroup() as tg:
        for _ in range(concurrency):
            tg.create_task(worker())


async def polite_latencies(url: str, stop: Callable[[], bool],
                           count: int | None = None) -> list[float]:
    """A well-behaved client: GET one small object, again and again."""
    latencies: list[float] = []
    async with aiohttp.ClientSession(base_url=url) as s:
        while not stop() and (count is None or len(latencies) < count):
            started = time.perf_counter()
            async with s.get(CONFIGMAPS + "/cm-000000") as r:
                await r.read()
                if r.status == 200:
                    latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.01)
    return latencies


def _polite_main(url: str, stop: Any, out: Any) -> None:
    out.put(asyncio.run(polite_latencies(url, stop.is_set)))


class PoliteClient:
    """:func:`polite_latencies` in a process of its own, so that the load generator's work
    does not count as the server's latency."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._out: Any = context.Queue()
        self._process = context.Process(target=_polite_main, args=(url, self._stop, self._out))

    def __enter__(self) -> PoliteClient:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> list[float]:
        if not self._stop.is_set():
            self._stop.set()
            self.latencies: list[float] = self._out.get(timeout=60)
            self._process.join(timeout=10)
        return self.latencies


async def concurrent_lists(s: aiohttp.ClientSession, url: str, clients: int, rounds: int
                           ) -> tuple[dict[int, int], list[float]]:
    codes: dict[int, int] = {}

    async def lister() -> None:
        for _ in range(rounds):
            async with s.get(CONFIGMAPS) as r:
                await r.read()
                codes[r.status] = codes.get(r.status, 0) + 1
                if r.status == 429:
                    await asyncio.sleep(float(r.headers.get("Retry-After", "1")))

    with PoliteClient(url) as polite:
        await asyncio.sleep(0.5)  # the polite client's interpreter starts
        async with asyncio.TaskGroup() as listers:
            for _ in range(clients):
                listers.create_task(lister())
        latencies = polite.stop()
    return codes, latencies


async def with_server(tmp: Path, name: str, serve_args: list[str],
                      body: Callable[[ServeProcess, aiohttp.ClientSession], Awaitable[Any]]
                      ) -> Any:
    server = start_serve(tmp / name, storage="sqlite",
                         extra_args=["--controllers", "", *serve_args])
    try:
        connector = aiohttp.TCPConnector(limit=64)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector,
                                         timeout=timeout) as s:
            return await body(server, s)
    finally:
        server.stop()


async def run(args: argparse.Namespace) -> None:
    serve_args = list(args.serve_arg)
    rows: list[tuple[str, str, str]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)

        async def idle(server: ServeProcess, s: aiohttp.ClientSession) -> float:
            return await settle(server.process.pid)

        idle_rss = await with_server(tmp, "idle", serve_args, idle)
        rows.append(("idle server", f"{idle_rss:.0f}", ""))

        async def big(server: ServeProcess, s: aiohttp.ClientSession) -> tuple[float, float]:
            before = await settle(server.process.pid)
            stalled = None
            if args.stalled_watch:
                stalled = await s.get(CONFIGMAPS + "?watch=true")
            try:
                await big_object(s, args.patches)
                return before, await settle(server.process.pid)
            finally:
                if stalled is not None:
                    stalled.close()

        before, after = await with_server(tmp, "big", serve_args, big)
        label = f"1 MiB ConfigMap, {args.patches} patches"
        if args.stalled_watch:
            label += ", a stalled watch"
        rows.append((label, f"{after:.0f}", f"+{after - before:.0f} MiB"))

        async def small(server: ServeProcess, s: aiohttp.ClientSession) -> dict[str, Any]:
            before = await settle(server.process.pid)
            await small_objects(s, args.n, args.concurrency)
            after = await settle(server.process.pid)
            idle_lat = await polite_latencies(server.url, lambda: False, count=200)
            peak_before = rss_mib(server.process.pid, "VmHWM:")
            codes, busy_lat = await concurrent_lists(s, server.url, args.lists, 5)
            return {"before": before, "after": after, "idle": idle_lat, "busy": busy_lat,
                    "codes": codes, "peak_before": peak_before,
                    "peak": rss_mib(server.process.pid, "VmHWM:")}

        got = await with_server(tmp, "small", serve_args, small)
        rows.append((f"{args.n:,} small ConfigMaps", f"{got['after']:.0f}",
                     f"+{got['after'] - got['before']:.0f} MiB"))
        codes = ", ".join(f"{c}: {k}" for c, k in sorted(got["codes"].items()))
        rows.append((f"{args.lists} concurrent LISTs of them x5 (peak)", f"{got['peak']:.0f}",
                     f"peak before {got['peak_before']:.0f} MiB; answers {codes}"))
        idle_lat, busy_lat = got["idle"], got["busy"]
        rows.append(("polite GET p50/p99 ms: idle | during LISTs",
                     f"{pct(idle_lat, 50) * 1e3:.1f}/{pct(idle_lat, 99) * 1e3:.1f}",
                     f"{pct(busy_lat, 50) * 1e3:.1f}/{pct(busy_lat, 99) * 1e3:.1f} "
                     f"({len(busy_lat)} GETs, median {statistics.median(busy_lat) * 1e3:.1f})"
                     if busy_lat else "no GET answered"))
    width = max(len(r[0]) for r in rows)
    source = args.server_src or "this tree"
    print(f"setpoint memory benchmark: server from {source}; serve args {serve_args or '-'}")
    print(f"{'scenario':<{width}}  {'RSS MiB':>9}  beside")
    for name, value, beside in rows:
        print(f"{name:<{width}}  {value:>9}  {beside}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patches", type=int, default=776)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--lists", type=int, default=8)
    parser.add_argument("--stalled-watch", action="store_true")
    parser.add_argument("--server-src", default="")
    parser.add_argument("--serve-arg", action="append", default=[])
    args = parser.parse_args()
    if args.server_src:
        os.environ["PYTHONPATH"] = str(Path(args.server_src).resolve())
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
