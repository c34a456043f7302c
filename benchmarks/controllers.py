"""Where the built-in controllers run: in ``setpoint serve``'s event loop, or in a process of
their own. Same run, same machine, one fresh ``setpoint serve`` per mode (SQLite, port 0):

1. **creates**: N ConfigMaps at concurrency C (the collector watches them all): creates/s,
   and the CPU seconds each process spent per create (the server; the controller process);
2. **readiness under a pathological owner graph**: one ConfigMap owns M ConfigMaps (with
   ``blockOwnerDeletion``), plus B cluster-scoped objects each naming one UID as two
   namespaced owners and B ConfigMaps naming one UID as two absent owners; the owner is
   deleted in the foreground. While the collector works through it, ``/readyz`` is asked
   every 20 ms: its latency (p50 / p99 / max) and the time until the owner is gone.

    python benchmarks/controllers.py [--n 5000] [--concurrency 16] [--fan-out 5000]
                                     [--malformed 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import ServeProcess, start_serve  # noqa: E402

CMS = "/api/v1/namespaces/default/configmaps"
NAMESPACES = "/api/v1/namespaces"
TICK = os.sysconf("SC_CLK_TCK")
JSON = {"Content-Type": "application/json"}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def controller_pid(serve: ServeProcess) -> int | None:
    for task in Path(f"/proc/{serve.process.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            return int(child)
    return None


def cm(name: str, owners: list[dict[str, Any]] | None = None) -> bytes:
    meta: dict[str, Any] = {"name": name}
    if owners:
        meta["ownerReferences"] = owners
    return orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                         "data": {"k": "v"}})


async def post(session: aiohttp.ClientSession, path: str, body: bytes) -> dict[str, Any]:
    async with session.post(path, data=body, headers=JSON) as r:
        answer: dict[str, Any] = orjson.loads(await r.read())
        if r.status != 201:
            raise RuntimeError(f"create failed: {r.status} {answer}")
        return answer


async def bounded(concurrency: int, bodies: list[tuple[str, bytes]],
                  session: aiohttp.ClientSession) -> None:
    todo = iter(bodies)

    async def worker() -> None:
        for path, body in todo:
            await post(session, path, body)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def creates(session: aiohttp.ClientSession, serve: ServeProcess, n: int,
                  concurrency: int) -> dict[str, float]:
    child = controller_pid(serve)
    server_cpu, child_cpu = cpu_seconds(serve.process.pid), cpu_seconds(child)
    started = time.perf_counter()
    await bounded(concurrency, [(CMS, cm(f"item-{i:06d}")) for i in range(n)], session)
    seconds = time.perf_counter() - started
    await asyncio.sleep(1.0)  # the controllers' share of the work arrives just after
    return {"creates/s": n / seconds,
            "server CPU ms/create": (cpu_seconds(serve.process.pid) - server_cpu) / n * 1e3,
            "controllers CPU ms/create": (cpu_seconds(child) - child_cpu) / n * 1e3}


async def pathological(session: aiohttp.ClientSession, fan_out: int, malformed: int,
                       concurrency: int) -> dict[str, float]:
    owner = await post(session, CMS, cm("owner"))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
           "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True}
    bodies = [(CMS, cm(f"dep-{i:06d}", [ref])) for i in range(fan_out)]
    for i in range(malformed):
        uid = f"00000000-0000-4000-9000-{i:012d}"
        twice = [{"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid}
                 for name in ("a", "b")]
        bodies.append((NAMESPACES, orjson.dumps({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": f"confused-{i}", "ownerReferences": twice}})))
        bodies.append((CMS, cm(f"ghost-{i}", twice)))
    await bounded(concurrency, bodies, session)
    latencies: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        async with aiohttp.ClientSession(base_url=str(session._base_url)) as own:
            while not done.is_set():
                t0 = time.perf_counter()
                async with own.get("/readyz") as r:
                    await r.read()
                latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.02)

    prober = asyncio.create_task(probe())
    started = time.perf_counter()
    async with session.delete(f"{CMS}/owner", data=orjson.dumps(
            {"propagationPolicy": "Foreground"}), headers=JSON) as r:
        await r.read()
    while True:
        async with session.get(f"{CMS}/owner") as r:
            await r.read()
            if r.status == 404:
                break
        await asyncio.sleep(0.05)
    collected = time.perf_counter() - started
    done.set()
    await prober
    return {"foreground deletion of the fan-out (s)": collected,
            "/readyz p50 (ms)": pct(latencies, 50) * 1e3,
            "/readyz p99 (ms)": pct(latencies, 99) * 1e3,
            "/readyz max (ms)": max(latencies) * 1e3,
            "/readyz probes": float(len(latencies))}


async def measure(mode: str, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    serve = start_serve(tmp / mode, extra_args=["--controllers-mode", mode])
    try:
        if mode == "process":
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if controller_pid(serve) is not None:
                    break
                await asyncio.sleep(0.05)
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4)
        async with aiohttp.ClientSession(base_url=serve.url, connector=connector) as session:
            results = await creates(session, serve, args.n, args.concurrency)
            results.update(await pathological(session, args.fan_out, args.malformed,
                                              args.concurrency))
        return results
    finally:
        serve.stop()


async def run(args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, float]]] = {"inline": [], "process": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):  # alternating, so that both see the same machine
            for mode in ("inline", "process"):
                runs[mode].append(await measure(mode, args, Path(tmp) / str(r)))
    rows = list(runs["inline"][0])
    width = max(len(r) for r in rows)
    print(f"built-in controllers: inline vs process; n={args.n} concurrency={args.concurrency}"
          f" fan-out={args.fan_out} malformed={args.malformed} (SQLite; median of "
          f"{args.rounds} alternating rounds)")
    print(f"{'measure':<{width}}  {'inline':>10}  {'process':>10}")
    for row in rows:
        inline = statistics.median(x[row] for x in runs["inline"])
        process = statistics.median(x[row] for x in runs["process"])
        print(f"{row:<{width}}  {inline:>10.2f}  {process:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--fan-out", type=int, default=5_000)
    parser.add_argument("--malformed", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
