"""Pods through the API: create → Running latency with ``setpoint serve`` and its agent.

A ``setpoint serve`` process (SQLite, TLS, its node agent; ``--pod-isolation none``) gets
``--process-pods`` pods (default 100) of ``python3 -c "import time; time.sleep(1e6)"``,
bound to its node by ``spec.nodeName``, created 16 at a time through the API; a watch on
pods sees each become Running (and Ready). Per pod: from the create's answer to the first
watch event with phase Running; p50 / p99 / max, and pods Running per second overall. The
agent's CPU seconds and RSS growth (its process, read from /proc) per pod are printed too.

**Baseline, same run**: the same pods given to a :class:`ProcessRuntime` directly (no API
server, no agent loop), latency from ``sync_pod`` to a Running status — what the API path
adds is the difference. Then ``--simulated`` pods (default 2,000; the target is 10,000) with
``--pod-runtime simulate``: the same latencies and the rate, with no process.

    python benchmarks/pods_api.py [--process-pods 100] [--simulated 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import ServeProcess, start_serve  # noqa: E402

from setpoint import client as sp_client  # noqa: E402

NODE = "bench-node"


def _pods_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_pods", ROOT / "benchmarks" / "pods.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def agent_pid(serve: ServeProcess) -> int | None:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == serve.process.pid and b"agent" in argv:
            return int(entry)
    return None


def cpu_rss(pid: int) -> tuple[float, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text()
               .splitlines() if line.startswith("VmRSS:"))
    return (int(fields[11]) + int(fields[12])) / ticks, rss


def pod(i: int, simulated: bool) -> dict[str, Any]:
    command = ["python3", "-c", "import time; time.sleep(1e6)"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"bench-{i}", "namespace": "default"},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1,
                     "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "busybox",
                                     "command": command}]}} if not simulated else {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"sim-{i}", "namespace": "default"},
        "spec": {"nodeName": NODE, "automountServiceAccountToken": False,
                 "containers": [{"name": "c", "image": "busybox"}]}}


async def through_api(n: int, simulated: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        extra = ["--node-name", NODE, "--pod-isolation", "none", "--pod-cidr",
                 "127.210.0.0/16", "--no-encryption"]
        if simulated:
            extra += ["--pod-runtime", "simulate"]
        serve = start_serve(Path(tmp), extra_args=extra, timeout=60)
        try:
            config = sp_client.load_kubeconfig(serve.kubeconfig, max_connections=64)
            async with sp_client.Client(config) as client:
                while True:
                    with contextlib.suppress(Exception):
                        await client.get(("v1", "Node"), NODE)
                        break
                    await asyncio.sleep(0.2)
                pid = agent_pid(serve)
                cpu0, rss0 = cpu_rss(pid) if pid else (0.0, 0)
                created: dict[str, float] = {}
                running: dict[str, float] = {}
                listed = await client.list(("v1", "Pod"), namespace="default")
                done = asyncio.Event()

                async def watch() -> None:
                    async with client.watch(("v1", "Pod"), namespace="default",
                                            resource_version=listed["metadata"][
                                                "resourceVersion"]) as events:
                        async for event in events:
                            if event.type not in ("ADDED", "MODIFIED"):
                                continue
                            obj = event.object
                            name = obj["metadata"]["name"]
                            if name not in running and \
                                    (obj.get("status") or {}).get("phase") == "Running":
                                running[name] = time.perf_counter()
                                if len(running) == n:
                                    done.set()
                                    return

                watcher = asyncio.create_task(watch())
                slots = asyncio.Semaphore(16)
                start = time.perf_counter()

                async def create(i: int) -> None:
                    async with slots:
                        obj = await client.create(pod(i, simulated))
                        created[obj["metadata"]["name"]] = time.perf_counter()

                await asyncio.gather(*(create(i) for i in range(n)))
                await asyncio.wait({watcher, asyncio.ensure_future(done.wait())}, timeout=600,
                                   return_when=asyncio.FIRST_COMPLETED)
                if not done.is_set():
                    raise RuntimeError(f"only {len(running)} of {n} pods became Running: "
                                       f"{watcher.exception() if watcher.done() else ''}")
                elapsed = time.perf_counter() - start
                watcher.cancel()
                cpu1, rss1 = cpu_rss(pid) if pid else (0.0, 0)
                latencies = [running[k] - created[k] for k in created]
                # one DELETE per pod, 16 at a time: a single delete-collection of 10,000
                # bound pods takes longer than a request may

                async def delete(name: str) -> None:
                    async with slots:
                        with contextlib.suppress(Exception):
                            await client.delete(("v1", "Pod"), name, namespace="default")

                await asyncio.gather(*(delete(name) for name in created))
                for _ in range(600):  # the agent deletes each once its processes are gone
                    if not (await client.list(("v1", "Pod"), namespace="default"))["items"]:
                        break
                    await asyncio.sleep(0.5)
        finally:
            serve.stop()
    return {"p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99), "max": max(latencies),
            "rate": n / elapsed, "cpu_ms": (cpu1 - cpu0) * 1000 / n,
            "rss_kib": (rss1 - rss0) / n}


async def run(args: argparse.Namespace) -> None:
    pods_module = _pods_module()
    n = args.process_pods
    if n == 0:
        sim = await through_api(args.simulated, simulated=True)
        print(f"{args.simulated} simulated pods, create → Running: p50 {sim['p50']:.3f} s, "
              f"p99 {sim['p99']:.3f} s, {sim['rate']:.1f} pods/s, agent CPU "
              f"{sim['cpu_ms']:.2f} ms/pod, RSS {sim['rss_kib']:.1f} KiB/pod")
        return
    base = await pods_module.process_runtime(n, "none", 0.5)
    api = await through_api(n, simulated=False)
    print(f"\n{n} process pods (isolation none), create → Running")
    print(f"{'':28}{'p50':>9}{'p99':>9}{'max':>9}{'pods/s':>9}{'agent CPU/pod':>15}"
          f"{'agent RSS/pod':>15}")
    print(f"{'runtime alone (baseline)':28}{base['p50']:9.3f}{base['p99']:9.3f}"
          f"{base['max']:9.3f}{'':>9}")
    print(f"{'through the API':28}{api['p50']:9.3f}{api['p99']:9.3f}{api['max']:9.3f}"
          f"{api['rate']:9.1f}{api['cpu_ms']:12.2f} ms{api['rss_kib']:11.1f} KiB")
    if args.simulated:
        sim = await through_api(args.simulated, simulated=True)
        print(f"\n{args.simulated} simulated pods, create → Running")
        print(f"{'through the API':28}{sim['p50']:9.3f}{sim['p99']:9.3f}{sim['max']:9.3f}"
              f"{sim['rate']:9.1f}{sim['cpu_ms']:12.2f} ms{sim['rss_kib']:11.1f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--process-pods", type=int, default=100)
    parser.add_argument("--simulated", type=int, default=2000)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
