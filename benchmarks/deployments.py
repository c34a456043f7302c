"""M Deployments of N replicas against ``setpoint serve`` (SQLite, its own node agent, the
controllers in their own process), same run, same server:

1. **baseline**: M x N bare pods posted at once (concurrency 16) until all are Ready, then
   deleted; what the scheduler, the agent and the API cost without any workload controller;
2. **apply**: M Deployments of N replicas (posted with concurrency 16), from the first POST
   until every one has ``status.availableReplicas == N`` with ``updatedReplicas == N``;
3. **rolling update**: a new image in every template (default strategy, 25% / 25%), from the
   first PATCH until every rollout is complete (``kubectl rollout status``'s test).

For each: the wall time, and the CPU seconds of the API server process and of the
controller-manager process (the control plane), and of the node agent.

``--runtime simulate`` (default) runs no process; ``--runtime process`` runs each replica as
a real ``sleep`` process (``--pod-isolation none``: a loopback address each).

    python benchmarks/deployments.py [--replicas 100] [--deployments 1] [--rounds 3]
    python benchmarks/deployments.py --runtime process --replicas 100 --rounds 1
    python benchmarks/deployments.py --deployments 1000 --replicas 10 --rounds 1
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

TICK = os.sysconf("SC_CLK_TCK")
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def children(serve: ServeProcess) -> dict[str, int]:
    """The server's child processes by role (controller-manager, agent)."""
    found: dict[str, int] = {}
    for task in Path(f"/proc/{serve.process.pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if b"controller-manager" in argv:
                found["controllers"] = int(child)
            elif b"agent" in argv:
                found["agent"] = int(child)
    return found


class Cpu:
    def __init__(self, serve: ServeProcess) -> None:
        self.pids = {"server": serve.process.pid, **children(serve)}
        self.start = {k: cpu_seconds(p) for k, p in self.pids.items()}

    def spent(self) -> dict[str, float]:
        return {k: cpu_seconds(p) - self.start[k] for k, p in self.pids.items()}


#: seconds between two checks of a condition; a check LISTs every object it waits for, so
#: :func:`interval_for` spaces them out with the number of objects (a LIST of 10,000 pods
#: every 50 ms would be most of what the server does)
POLL = 0.05


def interval_for(objects: int) -> float:
    return max(POLL, objects / 10_000)


async def until(check: Any, timeout: float = 300, interval: float = POLL) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(interval)


async def get(session: aiohttp.ClientSession, path: str) -> Any:
    async with session.get(path) as r:
        return orjson.loads(await r.read())


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


def template(image: str, app: str = "bench") -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": image,
                                     "command": ["sleep", "3600"]}]}}


async def concurrently(count: int, work: Any, workers: int = 16) -> None:
    """``work(i)`` for i in range(count), at most ``workers`` at a time."""
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await work(i)

    await asyncio.gather(*(worker() for _ in range(min(workers, count))))


async def baseline(session: aiohttp.ClientSession, n: int, timeout: float) -> None:
    async def create(i: int) -> None:
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"bare-{i}", "labels": {"bare": "1"}},
                "spec": template("x:1")["spec"]}
        async with session.post(PODS, data=orjson.dumps(body), headers=JSON) as r:
            assert r.status == 201, await r.text()

    await concurrently(n, create)

    async def all_ready() -> bool:
        items = (await get(session, f"{PODS}?labelSelector=bare%3D1"))["items"]
        return len(items) == n and all(map(ready, items))

    await until(all_ready, timeout, interval_for(n))


async def rolled_out(session: aiohttp.ClientSession, n: int, count: int) -> bool:
    """Every one of the ``count`` Deployments rolled out to ``n`` replicas (one LIST)."""
    items = (await get(session, f"{DEPLOYMENTS}?labelSelector=bench%3D1"))["items"]
    return len(items) == count and all(
        d["metadata"]["generation"] <= d.get("status", {}).get("observedGeneration", 0)
        and d.get("status", {}).get("updatedReplicas") == n
        and d.get("status", {}).get("replicas") == n
        and d.get("status", {}).get("availableReplicas") == n for d in items)


def serve_args(runtime: str) -> list[str]:
    if runtime == "simulate":
        return ["--node-name", "bench", "--pod-runtime", "simulate"]
    return ["--node-name", "bench", "--pod-isolation", "none",
            "--pod-cidr", f"127.{224 + os.getpid() % 30}.0.0/16"]


async def measure(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, float]]:
    serve = start_serve(tmp, extra_args=serve_args(args.runtime), timeout=60)
    results: dict[str, dict[str, float]] = {}
    try:
        async with serve.session() as session:
            await until(lambda: _node_ready(session), timeout=60)
            await until(lambda: _exists(session,
                                        "/api/v1/namespaces/default/serviceaccounts/default"))
            n, count = args.replicas, args.deployments

            async def step(name: str, work: Any) -> None:
                cpu = Cpu(serve)
                started = time.perf_counter()
                await work()
                results[name] = {"seconds": time.perf_counter() - started, **cpu.spent()}

            await step("baseline: M x N bare pods Ready", lambda: baseline(session, n * count,
                                                                       args.timeout))
            async with session.delete(f"{PODS}?labelSelector=bare%3D1") as r:
                assert r.status == 200, await r.text()

            async def no_bare() -> bool:
                return not (await get(session, f"{PODS}?labelSelector=bare%3D1"))["items"]

            await until(no_bare, args.timeout, interval_for(n * count))

            async def create(i: int) -> None:
                body = {"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": f"bench-{i}", "labels": {"bench": "1"}},
                        "spec": {"replicas": n,
                                 "selector": {"matchLabels": {"app": f"bench-{i}"}},
                                 "template": template("x:1", f"bench-{i}")}}
                async with session.post(DEPLOYMENTS, data=orjson.dumps(body),
                                        headers=JSON) as r:
                    assert r.status == 201, await r.text()

            async def apply() -> None:
                await concurrently(count, create)
                await until(lambda: rolled_out(session, n, count), timeout=args.timeout,
                            interval=interval_for(count * 10))

            await step("Deployments: apply to all available", apply)

            async def update(i: int) -> None:
                patch = {"spec": {"template": template("x:2", f"bench-{i}")}}
                async with session.patch(f"{DEPLOYMENTS}/bench-{i}", data=orjson.dumps(patch),
                                         headers=MERGE) as r:
                    assert r.status == 200, await r.text()

            async def roll() -> None:
                await concurrently(count, update)
                await until(lambda: rolled_out(session, n, count), timeout=args.timeout,
                            interval=interval_for(count * 10))

            await step("Deployments: rolling update", roll)
            if args.runtime == "process":  # their processes go with them
                async with session.delete(f"{DEPLOYMENTS}?labelSelector=bench%3D1") as r:
                    assert r.status == 200, await r.text()
                await until(lambda: _no_pods(session), timeout=args.timeout,
                            interval=interval_for(n * count))
    finally:
        serve.stop()
    return results


async def _node_ready(session: aiohttp.ClientSession) -> bool:
    async with session.get("/api/v1/nodes/bench") as r:
        if r.status != 200:
            return False
        node = orjson.loads(await r.read())
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions", []))


async def _no_pods(session: aiohttp.ClientSession) -> bool:
    return not (await get(session, PODS))["items"]


async def _exists(session: aiohttp.ClientSession, path: str) -> bool:
    async with session.get(path) as r:
        return r.status == 200


async def run(args: argparse.Namespace) -> None:
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rounds.append(await measure(args, Path(tmp) / str(r)))
    kind = "simulated" if args.runtime == "simulate" else "process"
    print(f"{args.deployments} Deployment(s) of {args.replicas} {kind} replicas (SQLite, one "
          f"node, controllers in their own process; median of {args.rounds} rounds)")
    columns = ["seconds", "server", "controllers", "agent"]
    print(f"{'step':<40}" + "".join(f"{c:>18}" for c in (
        "wall s", "server CPU s", "controllers CPU s", "agent CPU s")))
    for step in rounds[0]:
        cells = [statistics.median(r[step].get(c, float("nan")) for r in rounds)
                 for c in columns]
        print(f"{step:<40}" + "".join(f"{v:>18.2f}" for v in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--deployments", type=int, default=1)
    parser.add_argument("--runtime", choices=("simulate", "process"), default="simulate")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds one step may take")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
