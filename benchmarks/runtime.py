"""Measure the controller runtime: reconcile throughput and memory per cached object.

Against a real ``setpoint serve`` process (SQLite, port 0, fresh data directory for each N),
with the operator in this process (uvloop, as ``setpoint run`` runs it):

1. **throughput**: a Manager runs one controller for ``Item`` (``--workers`` workers) whose
   reconcile reads the item from the cache and, when ``status.observed`` differs from
   ``spec.size``, patches the status. A separate client creates N items at ``--concurrency``.
   Reported: creates/s (until the last create is acknowledged), reconciled objects/s (N over
   the time from the first create to the last status observed in the operator's cache), and
   the latency from sending an item's create to seeing its status in the cache (p50/p99).
   The reconcile is I/O-bound (one status patch per object), so throughput grows with
   workers until the server, or this process, is saturated: with too few workers, the
   queue backs up and the latency is queueing time;
2. **operator RSS growth per object**: this process's RSS after the throughput phase minus
   its RSS just before the manager started, over N (cache, queue and client buffers; an
   upper bound, since the allocator keeps freed arenas);
3. **cache bytes per object** (tracemalloc): memory held by a freshly synced informer over
   the same N items, full objects and metadata-only, over N;
4. the server's peak RSS;
   (1. runs with the manager's reconcile Events on, the default, and again on a fresh server
   with them off, ``Manager(reconcile_events=None)``: what publishing each reconcile as an
   ``events.k8s.io`` Event costs, beside its baseline from the same run)
5. once: how long ``setpoint.testing.control_plane()`` takes to start (median and worst of
   20, from the call to the first answered request).

    python benchmarks/runtime.py [--n 1000,10000] [--workers 32] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import start_serve  # noqa: E402

from setpoint.client import Client, NoMatchError, load_kubeconfig  # noqa: E402
from setpoint.runtime import (  # noqa: E402
    Context,
    Handlers,
    Manager,
    Registry,
    Request,
    Result,
    SharedInformers,
)
from setpoint.testing import control_plane  # noqa: E402

ITEM = ("bench.example.com/v1", "Item")
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
                                   "status": {"type": "object", "properties": {
                                       "observed": {"type": "integer"}}}}}}}]},
}


def item(i: int) -> dict[str, Any]:
    return {"apiVersion": "bench.example.com/v1", "kind": "Item",
            "metadata": {"name": f"item-{i:06d}", "namespace": "default",
                         "labels": {"bench": "yes"}},
            "spec": {"size": i, "owner": "benchmark", "tags": ["a", "b", "c"]}}


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def rss_kib(pid: str = "self", field: str = "VmRSS:") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def operator() -> Registry:
    registry = Registry()

    @registry.controller(for_=ITEM)
    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is None:
            return Result.done()
        size = obj["spec"]["size"]
        if (obj.get("status") or {}).get("observed") != size:
            await ctx.client.patch_status(ITEM, request.name, {"status": {"observed": size}},
                                          namespace=request.namespace)
        return Result.done()

    return registry


def client_for(kubeconfig: Path, connections: int = 100) -> Client:
    return Client(load_kubeconfig(kubeconfig, request_timeout=120,
                                  max_connections=connections))


async def install_crd(kubeconfig: Path) -> None:
    async with client_for(kubeconfig) as client:
        await client.create(CRD)
        async with asyncio.timeout(10):
            while True:
                try:
                    await client.discovery.resolve(*ITEM)
                    return
                except NoMatchError:
                    await asyncio.sleep(0.02)


async def throughput(kubeconfig: Path, n: int, workers: int,
                     concurrency: int, reconcile_events: bool = True) -> dict[str, float]:
    registry = operator()
    for controller in registry:
        controller.with_options(workers=workers)
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}
    all_seen = asyncio.Event()

    def observe(obj: Any) -> None:
        if (obj.get("status") or {}).get("observed") is None:
            return
        key = f"default/{obj['metadata']['name']}"
        if key not in seen:
            seen[key] = time.perf_counter()
            if len(seen) == n:
                all_seen.set()

    gc.collect()
    rss_before = rss_kib()
    async with client_for(kubeconfig) as op_client, \
            client_for(kubeconfig, concurrency + 4) as writer:
        manager = Manager(op_client, registry, graceful_shutdown_timeout=10,
                          **({} if reconcile_events else {"reconcile_events": None}))
        async with asyncio.TaskGroup() as group:
            task = group.create_task(manager.run())
            await manager.wait_ready(30)
            cache = manager.context("item").cache
            subscription = cache.subscribe(Handlers(add=observe,
                                                    update=lambda old, new: observe(new)))
            counter = iter(range(n))

            async def create() -> None:
                for i in counter:
                    body = item(i)
                    sent[f"default/{body['metadata']['name']}"] = time.perf_counter()
                    await writer.create(body)

            started = time.perf_counter()
            async with asyncio.TaskGroup() as creators:
                for _ in range(concurrency):
                    creators.create_task(create())
            created = time.perf_counter() - started
            async with asyncio.timeout(300):
                await all_seen.wait()
            reconciled = max(seen.values()) - started
            gc.collect()
            rss_after = rss_kib()
            subscription.cancel()
            manager.stop()
            await asyncio.wait({task})
    latencies = [seen[k] - sent[k] for k in seen]
    return {"creates_per_s": n / created, "reconciled_per_s": n / reconciled,
            "p50_ms": pct(latencies, 50) * 1e3, "p99_ms": pct(latencies, 99) * 1e3,
            "rss_per_object": (rss_after - rss_before) * 1024 / n,
            "seconds": reconciled}


async def cache_bytes(kubeconfig: Path, n: int, metadata_only: bool) -> tuple[float, float]:
    """Bytes per object a synced informer holds (tracemalloc), and the sync time."""
    async with client_for(kubeconfig) as client:
        await client.resolve(ITEM)  # discovery outside the measurement
        informers = SharedInformers(client)
        informer = await informers.informer_for(ITEM, metadata_only=metadata_only)
        gc.collect()
        tracemalloc.start()
        baseline = tracemalloc.get_traced_memory()[0]
        async with asyncio.TaskGroup() as group:
            started = time.perf_counter()
            informers.start(group)
            await informers.wait_synced(120)
            synced = time.perf_counter() - started
            assert len(informer.cache) == n, len(informer.cache)
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - baseline
            tracemalloc.stop()
            await informers.stop()
    return held / n, synced


async def measure(n: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_serve(Path(tmp) / "data", storage="sqlite")
        try:
            await install_crd(server.kubeconfig)
            result = await throughput(server.kubeconfig, n, args.workers, args.concurrency)
            result["full_bytes"], result["full_sync_s"] = await cache_bytes(
                server.kubeconfig, n, False)
            result["meta_bytes"], result["meta_sync_s"] = await cache_bytes(
                server.kubeconfig, n, True)
            async with client_for(server.kubeconfig) as client:
                sample = await client.get(ITEM, "item-000001")
            result["json_bytes"] = len(orjson.dumps(sample))
            result["server_rss_mib"] = rss_kib(str(server.process.pid), "VmHWM:") / 1024
        finally:
            server.stop()
        server = start_serve(Path(tmp) / "data-off", storage="sqlite")
        try:
            await install_crd(server.kubeconfig)
            off = await throughput(server.kubeconfig, n, args.workers, args.concurrency,
                                   reconcile_events=False)
            result["off_reconciled_per_s"] = off["reconciled_per_s"]
            result["off_p50_ms"] = off["p50_ms"]
            result["off_p99_ms"] = off["p99_ms"]
        finally:
            server.stop()
    return result


async def harness_start(times: int = 20) -> list[float]:
    """Seconds from calling ``control_plane()`` to its first answered request."""
    seconds = []
    for _ in range(times):
        async with control_plane() as cp:
            seconds.append(cp.startup_seconds)
    return seconds


async def run(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.n.split(",")]
    results = {}
    started = time.perf_counter()
    starts = await harness_start()
    for n in sizes:
        results[n] = await measure(n, args)
    total = time.perf_counter() - started
    rows: list[tuple[str, str, str]] = [
        ("creates/s (concurrency {c})", "creates_per_s", ",.0f"),
        ("reconciled objects/s (create -> status observed)", "reconciled_per_s", ",.0f"),
        ("create -> status observed p50 (ms)", "p50_ms", ".1f"),
        ("create -> status observed p99 (ms)", "p99_ms", ".1f"),
        ("  the same without reconcile Events: objects/s", "off_reconciled_per_s", ",.0f"),
        ("  without reconcile Events: p50 (ms)", "off_p50_ms", ".1f"),
        ("  without reconcile Events: p99 (ms)", "off_p99_ms", ".1f"),
        ("operator RSS growth per object (bytes)", "rss_per_object", ",.0f"),
        ("informer cache per object, full (bytes, tracemalloc)", "full_bytes", ",.0f"),
        ("informer cache per object, metadata-only (bytes)", "meta_bytes", ",.0f"),
        ("object size as JSON (bytes)", "json_bytes", ",.0f"),
        ("informer sync, full (s)", "full_sync_s", ".2f"),
        ("informer sync, metadata-only (s)", "meta_sync_s", ".2f"),
        ("server peak RSS (MiB)", "server_rss_mib", ".0f"),
    ]
    labels = [label.format(c=args.concurrency) for label, _, _ in rows]
    width = max(len(label) for label in labels)
    print(f"setpoint runtime benchmark: setpoint serve (sqlite), operator in-process "
          f"(workers={args.workers}), Python {sys.version.split()[0]}")
    print(f"{'N':<{width}}" + "".join(f"{n:>12,}" for n in sizes))
    for label, (_, key, fmt) in zip(labels, rows, strict=True):
        print(f"{label:<{width}}" + "".join(f"{results[n][key]:>12{fmt}}" for n in sizes))
    print(f"test harness start (control_plane(), memory storage): median "
          f"{statistics.median(starts) * 1e3:.1f} ms, worst {max(starts) * 1e3:.1f} ms "
          f"of {len(starts)}")
    print(f"this process's peak RSS: {rss_kib('self', 'VmHWM:') / 1024:.0f} MiB; "
          f"total time {total:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="1000,10000", help="comma-separated object counts")
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        asyncio.run(run(args))
        return
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(run(args))


if __name__ == "__main__":
    main()
