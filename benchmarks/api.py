"""Measure the whole API path of a real ``setpoint serve`` process, beside its ceiling.

Phases, all in one run against one server process started here (port 0, fresh data dir):

1. create N custom resources with C concurrent clients (creates/s, p50/p99 latency);
2. list them all, several times (best and median time);
3. W watchers on the collection; then U updates, one at a time: the delay from each update
   being acknowledged to each watcher receiving its event (p50/p99);
4. the server's peak RSS (VmHWM from /proc).

The ceiling: the same N writes, same concurrency, straight into the storage backend in this
process (no HTTP, no registry) — what the API path could at best reach on this machine.

With ``--storage etcd`` the benchmark starts a single-member etcd in a temporary directory
(``etcd`` on the PATH, or ``$SETPOINT_TEST_ETCD``), or uses the cluster at
``--etcd-endpoints`` (then under a fresh ``--etcd-prefix``, deleted at the end). The ceiling
is then measured twice with the client library the backend uses (aetcd), in the same run:
plain etcd puts (``aetcd.Client.put``), and the backend's create transactions
(``EtcdBackend.create``: ``create_revision == 0 → put``), which is what every API create is.

``--controllers-mode inline`` runs the built-in controllers in the server's event loop instead
of the child process ``setpoint serve`` uses by default (``benchmarks/controllers.py`` compares
the two side by side).

    python benchmarks/api.py [--n 10000] [--concurrency 16] [--watchers 100] [--storage sqlite]
                             [--controllers-mode process|inline]
    python benchmarks/api.py --storage etcd [--etcd-endpoints http://127.0.0.1:2379]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import start_serve  # noqa: E402
from tests.integration.storage import etcd_server  # noqa: E402

from setpoint.storage import StorageConfig, create_backend  # noqa: E402

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "items.bench.example.com"},
    "spec": {"group": "bench.example.com", "scope": "Namespaced",
             "names": {"plural": "items", "singular": "item", "kind": "Item"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "size": {"type": "integer", "minimum": 0},
                                       "owner": {"type": "string"},
                                       "tags": {"type": "array",
                                                "items": {"type": "string"}}}},
                                   "status": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}
PATH = "/apis/bench.example.com/v1/namespaces/default/items"


def item(i: int) -> dict[str, Any]:
    return {"apiVersion": "bench.example.com/v1", "kind": "Item",
            "metadata": {"name": f"item-{i:06d}", "labels": {"bench": "yes"}},
            "spec": {"size": i, "owner": "benchmark", "tags": ["a", "b", "c"]}}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def create_all(session: aiohttp.ClientSession, n: int, concurrency: int
                     ) -> tuple[float, list[float]]:
    latencies: list[float] = []
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            body = orjson.dumps(item(i))
            t0 = time.perf_counter()
            async with session.post(PATH, data=body,
                                    headers={"Content-Type": "application/json"}) as r:
                await r.read()
                if r.status != 201:
                    raise RuntimeError(f"create failed: {r.status}")
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


async def list_times(session: aiohttp.ClientSession, n: int, repeat: int = 5) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        async with session.get(PATH) as r:
            body = await r.read()
        times.append(time.perf_counter() - t0)
        count = len(orjson.loads(body)["items"])
        if count != n:
            raise RuntimeError(f"listed {count} of {n}")
    return times


async def watch_latency(session: aiohttp.ClientSession, watchers: int, updates: int
                        ) -> list[float]:
    _, body = await get_json(session, PATH + "?limit=1")
    rv = body["metadata"]["resourceVersion"]
    received: dict[str, list[float]] = {}
    ready = 0
    all_ready = asyncio.Event()

    async def watch() -> None:
        nonlocal ready
        async with session.get(f"{PATH}?watch=true&resourceVersion={rv}"
                               "&fieldSelector=metadata.name%3Ditem-000000") as r:
            ready += 1
            if ready == watchers:
                all_ready.set()
            while True:
                line = await r.content.readline()
                if not line:
                    return
                event = orjson.loads(line)
                stamp = time.perf_counter()
                key = event["object"]["metadata"]["resourceVersion"]
                received.setdefault(key, []).append(stamp)

    tasks = [asyncio.create_task(watch()) for _ in range(watchers)]
    await asyncio.wait_for(all_ready.wait(), 30)
    await asyncio.sleep(0.2)
    delays: list[float] = []
    for u in range(updates):
        patch = orjson.dumps({"spec": {"size": 1_000_000 + u}})
        async with session.patch(PATH + "/item-000000", data=patch,
                                 headers={"Content-Type": "application/merge-patch+json"}) as r:
            obj = orjson.loads(await r.read())
        acked = time.perf_counter()
        key = obj["metadata"]["resourceVersion"]
        deadline = acked + 5
        while len(received.get(key, ())) < watchers and time.perf_counter() < deadline:  # noqa: ASYNC110 - polling keeps the receive path free of extra wake-ups
            await asyncio.sleep(0.0005)
        delays.extend(max(0.0, t - acked) for t in received.get(key, ()))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return delays


async def get_json(session: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with session.get(path) as r:
        return r.status, orjson.loads(await r.read())


async def raw_ceiling(storage: str, n: int, concurrency: int,
                      etcd: tuple[list[str], str] = ([], "")) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        if storage == "etcd":
            endpoints, prefix = etcd
            config = StorageConfig(kind="etcd", endpoints=tuple(endpoints),
                                   prefix=prefix + "/ceiling")
        elif storage == "sqlite":
            config = StorageConfig(kind="sqlite", path=Path(tmp) / "raw.db")
        else:
            config = StorageConfig(kind="memory")
        backend = create_backend(config)
        await backend.start()
        try:
            counter = iter(range(n))

            async def worker() -> None:
                for i in counter:
                    await backend.create(f"/registry/bench/items/default/item-{i:06d}",
                                         orjson.dumps(item(i)))

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return time.perf_counter() - started
        finally:
            await backend.close()


async def raw_etcd_puts(endpoint: str, prefix: str, n: int, concurrency: int) -> float:
    """N plain puts of the same values with aetcd's own client: etcd's ceiling for writes."""
    import aetcd  # type: ignore[import-untyped]

    address = urllib.parse.urlsplit(endpoint)
    async with aetcd.Client(host=address.hostname or "127.0.0.1",
                            port=address.port or 2379) as client:
        counter = iter(range(n))

        async def worker() -> None:
            for i in counter:
                await client.put(f"{prefix}/puts/item-{i:06d}".encode(),
                                 orjson.dumps(item(i)))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        await client.delete_prefix(f"{prefix}/".encode())
        return seconds


@contextlib.contextmanager
def etcd_for(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[list[str], str, str]]:
    """``(endpoints, prefix, version)``: the given cluster under a fresh prefix, or a
    single-member etcd started here (with no prefix)."""
    if args.etcd_endpoints:
        endpoints = [e.strip() for e in args.etcd_endpoints.split(",") if e.strip()]
        yield endpoints, f"/setpoint-bench-{os.getpid()}", "external"
        return
    with etcd_server.running(tmp / "etcd") as server:
        version = server.status()["version"]
        yield [server.endpoint], "", version


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if args.storage != "etcd":
            await measure(args, Path(tmp))
            return
        with etcd_for(args, Path(tmp)) as (endpoints, prefix, version):
            await measure(args, Path(tmp), (endpoints, prefix), version)


@dataclasses.dataclass
class Figures:
    seconds: float
    latencies: list[float]
    lists: list[float]
    delays: list[float]
    rss: float


async def measure_api(args: argparse.Namespace, data: Path, secure: bool,
                      etcd: tuple[list[str], str]) -> Figures:
    """The API figures of one ``setpoint serve``: with TLS, client certificates and RBAC
    (``secure``, its default), or with ``--insecure-plain-http``."""
    endpoints, prefix = etcd
    server = start_serve(
        data, storage=args.storage, etcd_endpoints=endpoints,
        extra_args=[*(["--etcd-prefix", prefix] if prefix else []),
                    "--controllers-mode", args.controllers_mode,
                    *([] if secure else ["--insecure-plain-http"])])
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + args.watchers + 4,
                                         ssl=server.ssl_context() or False)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector) as s:
            async with s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              data=orjson.dumps(CRD),
                              headers={"Content-Type": "application/json"}) as r:
                assert r.status == 201, await r.text()
            for _ in range(200):
                status, _ = await get_json(s, PATH + "?limit=1")
                if status == 200:
                    break
                await asyncio.sleep(0.02)
            seconds, latencies = await create_all(s, args.n, args.concurrency)
            lists = await list_times(s, args.n)
            delays = await watch_latency(s, args.watchers, args.updates)
        rss = peak_rss_mb(server.process.pid)
    finally:
        server.stop()
    return Figures(seconds, latencies, lists, delays, rss)


async def measure(args: argparse.Namespace, tmp: Path,
                  etcd: tuple[list[str], str] = ([], ""), etcd_version: str = "") -> None:
    endpoints, prefix = etcd
    modes = {"secure": [True], "plain": [False], "both": [True, False]}[args.security]
    figures = {}
    for secure in modes:
        mode_etcd = (endpoints, f"{prefix}/{'tls' if secure else 'plain'}") if endpoints \
            else etcd
        figures[secure] = await measure_api(args, tmp / ("secure" if secure else "plain"),
                                            secure, mode_etcd)
    raw_seconds = await raw_ceiling(args.storage, args.n, args.concurrency, etcd)
    put_seconds = await raw_etcd_puts(endpoints[0], prefix or "/bench-puts", args.n,
                                      args.concurrency) if endpoints else 0.0

    ceiling = f"{args.n / raw_seconds:,.0f} raw {args.storage} writes/s"
    if endpoints:
        ceiling = (f"{args.n / raw_seconds:,.0f} EtcdBackend creates/s, "
                   f"{args.n / put_seconds:,.0f} aetcd puts/s")

    def rows(f: Figures) -> list[str]:
        return [f"{args.n / f.seconds:,.0f}",
                f"{pct(f.latencies, 50) * 1e3:.1f} / {pct(f.latencies, 99) * 1e3:.1f}",
                f"{min(f.lists) * 1e3:.0f} / {statistics.median(f.lists) * 1e3:.0f}",
                f"{pct(f.delays, 50) * 1e3:.1f} / {pct(f.delays, 99) * 1e3:.1f}",
                f"{f.rss:.0f}", f"{raw_seconds / f.seconds * 100:.0f} %"]

    names = [f"creates/s (API, concurrency {args.concurrency})",
             "create latency p50 / p99 (ms)", f"list {args.n:,} (ms, best / median)",
             f"watch delivery p50 / p99 (ms, {args.watchers} watchers)",
             "server peak RSS (MiB)", "API / ceiling"]
    columns = {secure: rows(f) for secure, f in figures.items()}
    width = max(len(n) for n in names)
    print(f"setpoint API benchmark: storage={args.storage} n={args.n} "
          f"concurrency={args.concurrency} watchers={args.watchers} "
          f"controllers={args.controllers_mode}"
          + (f" etcd={etcd_version}" if etcd_version else ""))
    header = "".join(f"  {('TLS+RBAC' if secure else 'plain HTTP'):>14}" for secure in columns)
    print(f"{'measure':<{width}}{header}  ceiling (same run)")
    for i, name in enumerate(names):
        cells = "".join(f"  {columns[secure][i]:>14}" for secure in columns)
        print(f"{name:<{width}}{cells}  {ceiling if i == 0 else ''}")
    if len(figures) == 2:
        cost = figures[True].seconds / figures[False].seconds
        print(f"TLS, authentication and RBAC: creates take {cost:.2f}x the time of plain HTTP "
              "(same run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--storage", choices=("sqlite", "memory", "etcd"), default="sqlite")
    parser.add_argument("--controllers-mode", choices=("process", "inline"), default="process")
    parser.add_argument("--security", choices=("secure", "plain", "both"), default="both",
                        help="measure setpoint serve as it starts (TLS, client certificates, "
                        "RBAC), with --insecure-plain-http, or both side by side (default)")
    parser.add_argument("--etcd-endpoints", default="",
                        help="with --storage etcd: use this cluster (comma-separated client "
                        "URLs) under a fresh prefix instead of starting an etcd")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
