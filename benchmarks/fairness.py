"""Measure the fair work queue against plain FIFO (and near-strict priorities), same run.

Two parts:

1. **simulated** (the real ``WorkQueue`` on a fake clock; deterministic, no I/O): one worker
   serving one key per tick; ``--initial`` initial-list keys wait at the start, 5 polled
   objects come back 30 ticks after each reconcile, a resync of the initial keys comes at
   tick 2,000, and user changes arrive at a given fraction of the capacity (50 % and 100 %; at 100 %
   the worker is overloaded: someone has to wait). Reported per order: a change's wait
   (p50 / p99 / max ticks), how many initial-list and resync keys were served and when the
   last one was (tick; "never" within the run), and polls served. The ratio
   column divides the fair queue's p99 change wait by FIFO's.
2. **end to end** (a Manager against the in-process control plane, real time): ``--objects``
   objects exist when the manager starts; each reconcile takes ``--work`` ms (a call to
   something outside the cluster) on one worker; while the initial list is being worked
   through, 40 objects are changed, 25 ms apart. Reported: the latency from a change being
   acknowledged by the API server to its reconcile starting (p50 / p99 / max ms), and the
   time until every initial-list object was reconciled, for FIFO and for the fair queue.

    python benchmarks/fairness.py [--initial 2000] [--objects 1000] [--work 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.runtime import (  # noqa: E402
    Context,
    FakeAsyncClock,
    PriorityConfig,
    Registry,
    Request,
    Result,
    Trigger,
    WorkQueue,
)
from setpoint.testing import control_plane  # noqa: E402

HORIZON = 12_000
CHANGES = 40
POLLS = 5


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


async def simulate(priority: PriorityConfig | None, initial: int, load: float
                   ) -> dict[str, Any]:
    clock = FakeAsyncClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, priority=priority)
    added: dict[str, float] = {}
    waits: dict[str, list[float]] = {"change": [], "initial": [], "resync": [], "poll": []}
    done_at: dict[str, float] = {}

    def add(key: str, cause: str, now: float) -> None:
        added.setdefault(key, now)
        q.add(key, Trigger(cause))

    for i in range(initial):
        add(f"initial-{i}", "initial", 0.0)
    for i in range(POLLS):
        add(f"poll-{i}", "requeue_after", 0.0)
    polls: dict[float, list[str]] = {}
    credit = 0.0
    for tick in range(HORIZON):
        now = float(tick)
        credit += load
        while credit >= 1.0:
            credit -= 1.0
            add(f"change-{tick}-{credit}", "update", now)
        for key in polls.pop(now, []):
            add(key, "requeue_after", now)
        if tick == 2000:
            for i in range(initial):
                add(f"resync-{i}", "resync", now)
        if not len(q):
            clock.advance(1.0)
            continue
        key = await q.get()
        kind = key.split("-")[0]
        waits[kind].append(now - added.pop(key))
        q.done(key)
        if kind == "poll":
            polls.setdefault(now + 30, []).append(key)
        for batch in ("initial", "resync"):
            if kind == batch and len(waits[batch]) == initial:
                done_at[batch] = now
        clock.advance(1.0)
    q.shut_down()
    return {"change": waits["change"], "initial_done": done_at.get("initial"),
            "resync_done": done_at.get("resync"), "polls": len(waits["poll"]),
            "initial": len(waits["initial"]), "resync": len(waits["resync"])}


def fmt(value: float | None) -> str:
    return "never" if value is None else f"{value:,.0f}"


async def simulated(initial: int) -> None:
    orders: list[tuple[str, PriorityConfig | None]] = [
        ("FIFO", None),
        ("near-strict (1000:1)", PriorityConfig(
            weights={"urgent": 1000, "change": 1000, "retry": 1, "background": 1})),
        ("fair (default weights)", PriorityConfig()),
    ]
    print(f"\nsimulated: 1 worker, 1 key/tick, {initial:,} initial keys, {POLLS} objects "
          f"polled 30 ticks after each reconcile, a resync of the {initial:,} at tick 2,000, "
          f"{HORIZON:,} ticks; 'served (done at)': keys served, and the tick the last one was")
    print(f"{'changes':<8} {'order':<22} {'change wait p50/p99/max':>25} "
          f"{'initial served (done at)':>25} {'resync served (done at)':>24} {'polls':>6} "
          f"{'p99 vs FIFO':>11}")
    for load in (0.5, 1.0):
        base_p99 = None
        for name, priority in orders:
            r = await simulate(priority, initial, load)
            waits = r["change"]
            p99 = pct(waits, 99)
            if base_p99 is None:
                base_p99 = p99
            ratio = f"{p99 / base_p99:.3f}" if base_p99 else "-"
            initial_col = f"{r['initial']:,} ({fmt(r['initial_done'])})"
            resync_col = f"{r['resync']:,} ({fmt(r['resync_done'])})"
            print(f"{load:<8.0%} {name:<22} "
                  f"{pct(waits, 50):>7,.0f} /{p99:>7,.0f} /{max(waits):>7,.0f} "
                  f"{initial_col:>25} {resync_col:>24} {r['polls']:>6,} {ratio:>11}")


THING = ("fair.example.com/v1", "Thing")
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.fair.example.com"},
    "spec": {"group": "fair.example.com", "scope": "Namespaced",
             "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {"spec": {
                                   "type": "object",
                                   "properties": {"n": {"type": "integer"}}}}}}}]},
}


async def end_to_end(objects: int, work_ms: float, priority: PriorityConfig | None
                     ) -> dict[str, Any]:
    async with control_plane() as cp:
        await cp.apply(CRD)
        limit = asyncio.Semaphore(16)

        async def create(i: int) -> None:
            async with limit:
                await cp.client.create({"apiVersion": "fair.example.com/v1", "kind": "Thing",
                                        "metadata": {"name": f"t{i:05d}",
                                                     "namespace": "default"},
                                        "spec": {"n": 0}})

        async with asyncio.TaskGroup() as group:
            for i in range(objects):
                group.create_task(create(i))

        changed_at: dict[str, float] = {}
        latencies: list[float] = []
        initial_seen: set[str] = set()
        initial_done = asyncio.Event()
        changes_done = asyncio.Event()
        started = 0.0
        initial_finished = 0.0
        registry = Registry()

        @registry.controller(for_=THING, workers=1,
                             priority=priority if priority is not None else "fifo")
        async def reconcile(request: Request, ctx: Context) -> Result:
            nonlocal initial_finished
            causes = {t.cause for t in ctx.triggers}
            if "update" in causes and request.name in changed_at:
                latencies.append(time.monotonic() - changed_at.pop(request.name))
                if len(latencies) == CHANGES:
                    changes_done.set()
            await asyncio.sleep(work_ms / 1000)
            if "initial" in causes:
                initial_seen.add(request.name)
                if len(initial_seen) == objects:
                    initial_finished = time.monotonic()
                    initial_done.set()
            return Result.done()

        started = time.monotonic()
        await cp.run_operator(registry, wait_ready=True)
        await asyncio.sleep(0.05)
        for i in range(CHANGES):
            name = f"t{(i * 997) % objects:05d}"
            await cp.client.patch(THING, name, {"spec": {"n": i + 1}}, namespace="default")
            changed_at[name] = time.monotonic()
            await asyncio.sleep(0.025)
        async with asyncio.timeout(600):
            await initial_done.wait()
            await changes_done.wait()
        return {"latencies": latencies, "initial": initial_finished - started}


async def run(args: argparse.Namespace) -> None:
    await simulated(args.initial)
    print(f"\nend to end: {args.objects:,} objects when the manager starts, 1 worker, "
          f"{args.work:g} ms per reconcile, 40 changes 25 ms apart meanwhile")
    print(f"{'order':<10} {'change to reconcile p50/p99/max (ms)':>38} "
          f"{'initial list done (s)':>22} {'p99 vs FIFO':>12}")
    base = None
    for name, priority in (("FIFO", None), ("fair", PriorityConfig())):
        r = await end_to_end(args.objects, args.work, priority)
        ms = [x * 1000 for x in r["latencies"]]
        p99 = pct(ms, 99)
        base = base if base is not None else p99
        print(f"{name:<10} {pct(ms, 50):>14,.1f} / {p99:>9,.1f} / {max(ms):>9,.1f} "
              f"{r['initial']:>22.2f} {p99 / base:>12.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--initial", type=int, default=2000)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--work", type=float, default=2.0, help="ms per reconcile")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
