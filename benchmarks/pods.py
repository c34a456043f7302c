"""Measure the node agent's pod runtimes alone (no API server): what a pod costs the agent.

1. **Process runtime**, ``--process-pods`` pods (default 100) of one container each,
   ``python3 -c "import time; time.sleep(1e6)"``, all given to the runtime at once, in each
   isolation mode this machine allows (``none``; ``namespaces`` as root):

   * start → Running latency per pod (from ``sync_pod`` to a status with phase Running, which
     the runtime reports once the program executes), p50 / p99 / max;
   * the agent's CPU seconds to start them, per pod, and while they merely run (``--idle``
     seconds), per pod and second;
   * the agent's RSS growth per pod, and per pod outside the agent: the container's supervisor
     shell (PSS, the memory it really adds) — with the program's own PSS beside it;
   * the launcher's CPU per container (it runs in the container's process before the program,
     so it is counted from that process) and the time to remove every pod.

   **Baseline**, same run: the same programs started directly with
   ``asyncio.create_subprocess_exec`` (no runtime), latency from the call to the process
   running the program.

2. **Simulated runtime**, ``--simulated`` pods (default 10,000 and 100,000) with
   immediate start and readiness: pods/s through ``sync_pod`` until all are Ready, CPU per
   pod, the runtime's bytes per pod (tracemalloc; the pod objects are the caller's) and RSS
   growth per pod, and the cost of building one pod's status.

    python benchmarks/pods.py [--process-pods 100] [--simulated 10000,100000] [--idle 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.agent import procs  # noqa: E402
from setpoint.agent.inputs import ResolvedInputs  # noqa: E402
from setpoint.agent.process import ProcessRuntime, ProcessRuntimeConfig  # noqa: E402
from setpoint.agent.resolve import resolve_inputs  # noqa: E402
from setpoint.agent.simulated import Script, SimulatedRuntime  # noqa: E402
from setpoint.runtime.clock import FakeAsyncClock  # noqa: E402

SLEEPER = [sys.executable, "-c", "import time; time.sleep(1e6)"]


def rss_kib(pid: int | str = "self", field: str = "VmRSS:") -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0")[:-1]]
    except OSError:
        return []


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def pod(i: int) -> dict[str, Any]:
    return {"metadata": {"name": f"sleeper-{i}", "namespace": "bench", "uid": f"bench-{i}"},
            "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "python", "command": SLEEPER}]}}


async def process_runtime(n: int, isolation: str, idle: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="setpoint-bench-") as tmp:
        config = ProcessRuntimeConfig(root_dir=Path(tmp) / "agent", isolation=isolation,  # type: ignore[arg-type]
                                      max_pods=max(110, n), bridge="spbench0",
                                      pod_cidr="10.250.0.0/16" if isolation == "namespaces"
                                      else None)
        pods = [pod(i) for i in range(n)]
        inputs = [resolve_inputs(p) for p in pods]
        async with ProcessRuntime(config) as rt:
            gc.collect()
            rss0, cpu0 = rss_kib(), cpu()
            started: dict[str, float] = {}
            latency: dict[str, float] = {}
            t0 = time.perf_counter()
            for p, i in zip(pods, inputs, strict=True):
                started[p["metadata"]["uid"]] = time.perf_counter()
                await rt.sync_pod(p, i)
            changes = rt.changes()
            while len(latency) < n:
                uid = await anext(changes)  # only pods whose status may have changed
                if uid in started and uid not in latency:
                    status = rt.pod_status(uid)
                    if status is not None and status["phase"] == "Running":
                        latency[uid] = time.perf_counter() - started[uid]
            all_running = time.perf_counter() - t0
            cpu_start = cpu() - cpu0
            await asyncio.sleep(1.0)  # let the programs finish starting before measuring
            rss1 = rss_kib()
            cpu1 = cpu()
            await asyncio.sleep(idle)
            cpu_idle = cpu() - cpu1
            shims = [i.pid for p in rt._pods.values() for i in p.instances.values()]
            programs = [kid for pid in shims for kid in procs.children(pid)]
            shim_pss = statistics.mean(pss_kib(pid) for pid in shims)
            program_pss = statistics.mean(pss_kib(pid) for pid in programs) if programs else 0
            launcher_cpu = statistics.mean(
                (info.cpu_ticks / procs.CLOCK_TICKS) for pid in shims
                if (info := procs.info(pid)) is not None)
            t1 = time.perf_counter()
            await rt.shutdown_pods(grace_period=1)
            removed = time.perf_counter() - t1
            left = procs.marked(rt.agent_id + "/")
    lat = list(latency.values())
    return {"p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "max": max(lat),
            "all": all_running, "cpu_start": cpu_start / n,
            "cpu_idle": cpu_idle / idle / n, "rss": (rss1 - rss0) / n, "shim": shim_pss,
            "program": program_pss, "launcher": launcher_cpu, "remove": removed,
            "left": float(len(left))}


async def baseline(n: int) -> dict[str, float]:
    """The same programs, started directly: the floor any runtime sits on."""
    latency = []
    processes = []
    cpu0 = cpu()
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*SLEEPER, start_new_session=True)
        processes.append((t, proc))
    pending = {proc.pid: t for t, proc in processes}
    while pending:
        now = time.perf_counter()
        for pid, t in list(pending.items()):
            if _cmdline(pid) == SLEEPER:  # the program runs (it has been executed)
                latency.append(now - t)
                del pending[pid]
        await asyncio.sleep(0.005)
    all_running = time.perf_counter() - t0
    cpu_start = cpu() - cpu0
    await asyncio.sleep(1.0)
    program_pss = statistics.mean(pss_kib(p.pid) for _, p in processes)
    for _, proc in processes:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
    return {"p50": pct(latency, 0.5), "p99": pct(latency, 0.99), "max": max(latency),
            "all": all_running, "cpu_start": cpu_start / n, "program": program_pss}


async def simulated(n: int) -> dict[str, float]:
    clock = FakeAsyncClock()
    pods = [pod(i) for i in range(n)]
    inputs = ResolvedInputs()
    gc.collect()
    rss0 = rss_kib()
    tracemalloc.start()
    try:
        async with SimulatedRuntime(clock=clock, script=Script()) as sim:
            base, _ = tracemalloc.get_traced_memory()
            tracemalloc.stop()  # timing without tracemalloc's own cost
            cpu0, t0 = cpu(), time.perf_counter()
            for p in pods:
                await sim.sync_pod(p, inputs)
            while sim._timers:
                await clock.tick(0)
            elapsed = time.perf_counter() - t0
            cpu_used = cpu() - cpu0
            sim.pending_changes()
            sim.pending_events()
            rss1 = rss_kib()
            t1 = time.perf_counter()
            for i in range(0, n, max(1, n // 1000)):
                sim.pod_status(f"bench-{i}")
            status_cost = (time.perf_counter() - t1) / len(range(0, n, max(1, n // 1000)))
            ready = sum(1 for i in range(0, n, max(1, n // 100))
                        if sim.pod_status(f"bench-{i}")["phase"] == "Running")  # type: ignore[index]
        # bytes held per pod, measured in a second, traced pass
        tracemalloc.start()
        async with SimulatedRuntime(clock=FakeAsyncClock(), script=Script()) as sim2:
            base, _ = tracemalloc.get_traced_memory()
            for p in pods:
                await sim2.sync_pod(p, inputs)
            while sim2._timers:
                await sim2.clock.tick(0)  # type: ignore[attr-defined]
            sim2.pending_changes()
            sim2.pending_events()
            held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {"rate": n / elapsed, "cpu": cpu_used / n, "bytes": (held - base) / n,
            "rss": (rss1 - rss0) * 1024 / n, "status": status_cost,
            "sampled_running": ready / len(range(0, n, max(1, n // 100)))}


async def run(args: argparse.Namespace) -> None:
    modes = ["none"] + (["namespaces"] if os.geteuid() == 0 else [])
    n = args.process_pods
    print(f"setpoint agent, process runtime: {n} pods of `python3 -c 'import time; "
          f"time.sleep(1e6)'`, all given at once; {os.cpu_count()} CPUs; load "
          f"{os.getloadavg()[0]:.1f}")
    base = await baseline(n)
    results = {m: await process_runtime(n, m, args.idle) for m in modes}
    width = 46
    header = f"{'':<{width}}" + "".join(f"{m:>14}" for m in modes) + f"{'baseline':>14}"
    print(header)
    rows = [
        ("start -> Running p50 (ms)", "p50", 1000, ".0f"),
        ("start -> Running p99 (ms)", "p99", 1000, ".0f"),
        ("start -> Running max (ms)", "max", 1000, ".0f"),
        ("all running after (s)", "all", 1, ".2f"),
        ("agent CPU to start, per pod (ms)", "cpu_start", 1000, ".1f"),
        ("agent CPU while running, per pod (ms/s)", "cpu_idle", 1000, ".3f"),
        ("agent RSS growth per pod (KiB)", "rss", 1, ".0f"),
        ("supervisor shell per pod, PSS (KiB)", "shim", 1, ".0f"),
        ("launcher CPU per container (ms)", "launcher", 1000, ".0f"),
        ("the program itself, PSS (KiB)", "program", 1, ".0f"),
        ("remove all pods (s)", "remove", 1, ".2f"),
        ("processes left after removal", "left", 1, ".0f"),
    ]
    for label, key, scale, fmt in rows:
        cells = "".join(f"{results[m][key] * scale:>14{fmt}}" for m in modes)
        b = f"{base[key] * scale:>14{fmt}}" if key in base else f"{'-':>14}"
        print(f"{label:<{width}}{cells}{b}")
    sizes = [int(x) for x in args.simulated.split(",") if x]
    if sizes:
        print()
        print("setpoint agent, simulated runtime: pods Running and Ready at once "
              "(fake clock)")
        print(f"{'pods':<{width}}" + "".join(f"{s:>14,}" for s in sizes))
        sims = {s: await simulated(s) for s in sizes}
        for label, key, scale, fmt in [("pods/s through sync_pod to Ready", "rate", 1, ",.0f"),
                                       ("CPU per pod (us)", "cpu", 1e6, ".1f"),
                                       ("runtime bytes per pod (tracemalloc)", "bytes", 1,
                                        ",.0f"),
                                       ("RSS growth per pod (bytes)", "rss", 1, ",.0f"),
                                       ("one pod's status built in (us)", "status", 1e6, ".1f"),
                                       ("sampled pods Running (fraction)", "sampled_running", 1,
                                        ".2f")]:
            print(f"{label:<{width}}" + "".join(f"{sims[s][key] * scale:>14{fmt}}"
                                                for s in sizes))
    print(f"this process's peak RSS: {rss_kib('self', 'VmHWM:') / 1024:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--process-pods", type=int, default=100)
    parser.add_argument("--simulated", default="10000,100000")
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
