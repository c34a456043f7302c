"""A Deployment of N simulated replicas against ``setpoint serve --pod-runtime simulate``
(SQLite, its own node agent, the controllers in their own process), same run, same server:

1. **baseline**: N bare pods posted at once (concurrency 16) until all are Ready, then
   deleted; what the scheduler, the agent and the API cost without any workload controller;
2. **apply**: one Deployment of N replicas, from the POST to ``status.availableReplicas ==
   N`` with ``updatedReplicas == N``;
3. **rolling update**: a new image (default strategy, 25% / 25%), from the PATCH until the
   rollout is complete (``kubectl rollout status``'s test).

For each: the wall time, and the CPU seconds of the API server process and of the
controller-manager process (the control plane), and of the node agent.

    python benchmarks/deployments.py [--replicas 100] [--rounds 3]
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


async def until(check: Any, timeout: float = 300) -> None:
    async with asyncio.timeout(timeout):
        while True:
            if await check():
                return
            await asyncio.sleep(0.05)


async def get(session: aiohttp.ClientSession, path: str) -> Any:
    async with session.get(path) as r:
        return orjson.loads(await r.read())


def ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions", []))


def template(image: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "bench"}},
            "spec": {"containers": [{"name": "c", "image": image}]}}


async def baseline(session: aiohttp.ClientSession, n: int) -> None:
    queue = iter(range(n))

    async def worker() -> None:
        for i in queue:
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"bare-{i}", "labels": {"bare": "1"}},
                    "spec": template("x:1")["spec"]}
            async with session.post(PODS, data=orjson.dumps(body), headers=JSON) as r:
                assert r.status == 201, await r.text()

    await asyncio.gather(*(worker() for _ in range(16)))

    async def all_ready() -> bool:
        items = (await get(session, f"{PODS}?labelSelector=bare%3D1"))["items"]
        return len(items) == n and all(map(ready, items))

    await until(all_ready)


async def rolled_out(session: aiohttp.ClientSession, n: int) -> bool:
    d = await get(session, f"{DEPLOYMENTS}/bench")
    status = d.get("status", {})
    return bool(d["metadata"]["generation"] <= status.get("observedGeneration", 0)
                and status.get("updatedReplicas") == n and status.get("replicas") == n
                and status.get("availableReplicas") == n)


async def measure(args: argparse.Namespace, tmp: Path) -> dict[str, dict[str, float]]:
    serve = start_serve(tmp, extra_args=["--node-name", "bench", "--pod-runtime", "simulate"],
                        timeout=60)
    results: dict[str, dict[str, float]] = {}
    try:
        async with serve.session() as session:
            await until(lambda: _node_ready(session), timeout=60)
            await until(lambda: _exists(session,
                                        "/api/v1/namespaces/default/serviceaccounts/default"))
            n = args.replicas

            async def step(name: str, work: Any) -> None:
                cpu = Cpu(serve)
                started = time.perf_counter()
                await work()
                results[name] = {"seconds": time.perf_counter() - started, **cpu.spent()}

            await step("baseline: N bare pods Ready", lambda: baseline(session, n))
            async with session.delete(f"{PODS}?labelSelector=bare%3D1") as r:
                assert r.status == 200, await r.text()

            async def no_bare() -> bool:
                return not (await get(session, f"{PODS}?labelSelector=bare%3D1"))["items"]

            await until(no_bare)

            async def apply() -> None:
                body = {"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "bench"},
                        "spec": {"replicas": n, "selector": {"matchLabels": {"app": "bench"}},
                                 "template": template("x:1")}}
                async with session.post(DEPLOYMENTS, data=orjson.dumps(body),
                                        headers=JSON) as r:
                    assert r.status == 201, await r.text()
                await until(lambda: rolled_out(session, n))

            await step("Deployment: apply to all available", apply)

            async def roll() -> None:
                patch = {"spec": {"template": template("x:2")}}
                async with session.patch(f"{DEPLOYMENTS}/bench", data=orjson.dumps(patch),
                                         headers=MERGE) as r:
                    assert r.status == 200, await r.text()
                await until(lambda: rolled_out(session, n))

            await step("Deployment: rolling update", roll)
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


async def _exists(session: aiohttp.ClientSession, path: str) -> bool:
    async with session.get(path) as r:
        return r.status == 200


async def run(args: argparse.Namespace) -> None:
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            rounds.append(await measure(args, Path(tmp) / str(r)))
    print(f"Deployment of {args.replicas} simulated replicas (SQLite, one node, controllers "
          f"in their own process; median of {args.rounds} rounds)")
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
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
