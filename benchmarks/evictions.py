"""Evictions through the API: what consulting a PodDisruptionBudget costs.

An in-process control plane (memory storage, no controllers, no agent) gets ``--pods`` pods
(default 500) whose status the script sets to Running and Ready. Each round removes them all,
16 requests at a time, and prints requests per second:

* **baseline**: ``DELETE`` of each pod (``gracePeriodSeconds: 0``);
* eviction of each pod with no budget in the namespace (a status write for the
  ``DisruptionTarget`` condition, then the same deletion);
* eviction of each pod through one budget selecting them all, its status written by the
  script to allow every one (each eviction is then also a compare-and-swap of the budget's
  status: the 16 concurrent evictions contend for that one object).

    python benchmarks/evictions.py [--pods 500] [--concurrency 16] [--rounds 3]

A warm-up round of deletions comes first; each figure is the median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from setpoint.client import Client, ClientConfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig

NS = "default"
POD = ("v1", "Pod")
PDB = ("policy/v1", "PodDisruptionBudget")


async def make_pods(client: Client, count: int, concurrency: int) -> None:
    async def one(i: int) -> None:
        created = await client.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p-{i}", "labels": {"app": "bench"}},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "x"}]}},
            namespace=NS)
        created["status"] = {"phase": "Running",
                             "conditions": [{"type": "Ready", "status": "True"}]}
        await client.update_status(created)
    await gather(count, concurrency, one)


async def gather(count: int, concurrency: int, work: Callable[[int], Awaitable[Any]]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def limited(i: int) -> None:
        async with gate:
            await work(i)
    async with asyncio.TaskGroup() as tg:
        for i in range(count):
            tg.create_task(limited(i))


async def timed(count: int, concurrency: int, work: Callable[[int], Awaitable[Any]]
                ) -> float:
    start = time.perf_counter()
    await gather(count, concurrency, work)
    return count / (time.perf_counter() - start)


async def run(pods: int, concurrency: int, rounds: int) -> None:
    config = ControlPlaneConfig(server=ServerConfig(port=0,
                                                    storage=StorageConfig(kind="memory")),
                                controllers=frozenset())
    async with ControlPlane(config) as plane, \
            Client(ClientConfig(server=plane.url, request_timeout=60)) as client:
        async def delete(i: int) -> None:
            await client.delete(POD, f"p-{i}", namespace=NS, grace_period_seconds=0)

        async def evict(i: int) -> None:
            await client.request(
                "POST", f"/api/v1/namespaces/{NS}/pods/p-{i}/eviction",
                body={"apiVersion": "policy/v1", "kind": "Eviction",
                      "metadata": {"name": f"p-{i}"},
                      "deleteOptions": {"gracePeriodSeconds": 0}})

        async def budgeted(i: int) -> None:
            await evict(i)

        async def with_budget() -> None:
            pdb = await client.create({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "bench"},
                "spec": {"selector": {"matchLabels": {"app": "bench"}},
                         "maxUnavailable": "100%"}}, namespace=NS)
            pdb["status"] = {"observedGeneration": 1, "disruptionsAllowed": pods,
                             "currentHealthy": pods, "desiredHealthy": 0,
                             "expectedPods": pods}
            await client.update_status(pdb)

        async def without_budget() -> None:
            await client.delete(PDB, "bench", namespace=NS)

        await make_pods(client, pods, concurrency)  # warm-up, not reported
        await timed(pods, concurrency, delete)
        rates: dict[str, list[float]] = {}
        for _ in range(rounds):
            for name, work in (("baseline: DELETE", delete), ("eviction, no budget", evict),
                               ("eviction through one budget", budgeted)):
                await make_pods(client, pods, concurrency)
                if work is budgeted:
                    await with_budget()
                rates.setdefault(name, []).append(await timed(pods, concurrency, work))
                if work is budgeted:
                    left = (await client.get(PDB, "bench", namespace=NS))["status"]
                    assert left["disruptionsAllowed"] == 0, left
                    await without_budget()
        print(f"{pods} pods, {concurrency} at a time, median of {rounds} rounds "
              "(in-process server, memory storage)")
        print("| what | requests/s |")
        print("|---|---|")
        for name, values in rates.items():
            print(f"| {name} | {statistics.median(values):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(run(args.pods, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
