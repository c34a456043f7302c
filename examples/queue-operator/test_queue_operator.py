"""The queue operator on the in-process control plane, against the fake queue service: a queue
deleted out of band comes back by the poll cadence, the annotation reconciles at once, 1,000
Queues created at once stay within the budget (exactly where the bucket hands out tokens,
and at the service within what the calls' own travel time can add), three sharded replicas
together stay within the one budget, and an injected 429 stops the calls for its
Retry-After, then one probe resumes them."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from setpoint.runtime import BudgetConfig, Manager, Request, ShardingConfig
from setpoint.runtime.sharding import rendezvous_owner
from setpoint.testing import ControlPlane, control_plane, load_operator

HERE = Path(__file__).parent
QUEUE = ("messaging.example.com/v1", "Queue")

operator = load_operator(HERE / "operator.py")


def _load_service() -> ModuleType:
    spec = importlib.util.spec_from_file_location("queue_operator_fakequeues",
                                                  HERE / "fakequeues.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fakequeues = _load_service()


def queue(name: str, visibility: int = 30) -> dict[str, Any]:
    return {"apiVersion": "messaging.example.com/v1", "kind": "Queue",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"visibilityTimeout": visibility}}


def causes(manager: Any, name: str) -> list[str]:
    return [t["cause"] for entry in manager.history.of("queue", f"default/{name}")
            for t in entry["triggers"]]


async def start(cp: ControlPlane, service: Any, *, poll: float,
                budget: BudgetConfig | None = None, **options: Any) -> Any:
    await cp.apply(HERE / "crd.yaml")
    return await cp.run_operator(operator.build(service.url, poll=poll),
                                 budgets={operator.TARGET: budget or BudgetConfig(
                                     rate=50, burst=10, concurrency=4)}, **options)


def most_in_window(times: list[float], window: float) -> int:
    """The most of ``times`` in any closed interval of length ``window``."""
    times = sorted(times)
    most = j = 0
    for i, start in enumerate(times):
        j = max(j, i)
        while j + 1 < len(times) and times[j + 1] <= start + window + 1e-9:
            j += 1
        most = max(most, j - i + 1)
    return most


def travel_bound(grants: list[float], arrivals: list[float]) -> float:
    """How much later than the bucket's grants the service can have seen the calls.

    Each call arrives after its grant; matching the k-th earliest arrival with the k-th
    earliest grant gives the smallest possible largest delay ``d`` (the true one, call by
    call, is at least this). Then the arrivals within any second were granted within
    ``1 + d`` seconds, so the service sees at most ``burst + rate x (1 + d)`` in a second:
    the only allowance its count needs beyond the bucket's own bound."""
    assert len(grants) == len(arrivals)
    return max(a - g for g, a in zip(sorted(grants), sorted(arrivals), strict=True))


async def create_all(cp: ControlPlane, n: int, prefix: str = "q") -> None:
    gate = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        async with gate:
            await cp.client.create(queue(f"{prefix}{i:04d}"))

    async with asyncio.TaskGroup() as group:
        for i in range(n):
            group.create_task(create(i))


def test_the_service_counts_calls_and_validates() -> None:
    now = [0.0]
    service = fakequeues.FakeQueueService(now=lambda: now[0])
    for t in (0.0, 0.1, 0.5, 0.99, 1.2, 3.0):
        now[0] = t
        service._arrive("PUT", "a")
    assert service.max_in_window == 4  # 0.0 .. 0.99
    assert service.total == 6
    assert fakequeues.valid_name("default-orders")
    assert not fakequeues.valid_name("a/b")
    assert not fakequeues.valid_name("x" * 81)
    with pytest.raises(ValueError, match="status"):
        service.inject(200)


async def test_a_queue_deleted_out_of_band_comes_back() -> None:
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        manager = await start(cp, service, poll=0.5)
        await cp.apply([queue("orders", 60), queue("invoices")])
        await cp.wait_for(QUEUE, "orders", lambda q: "url" in (q.get("status") or {}))
        assert service.queues["default-orders"] == {"visibilityTimeout": 60}
        assert service.delete_out_of_band("default-orders")
        await cp.eventually(lambda: "default-orders" in service.queues)
        # the reconcile that put it back is in the history once it has ended, a little after
        # its call reached the service
        await cp.eventually(lambda: "poll" in causes(manager, "orders"))
        # a spec change reaches the service; deleting the Queue deletes its queue
        await cp.client.patch(QUEUE, "orders", {"spec": {"visibilityTimeout": 5}},
                              namespace="default")
        await cp.eventually(lambda: service.queues.get("default-orders")
                            == {"visibilityTimeout": 5})
        await cp.delete(queue("invoices"))
        assert "default-invoices" not in service.queues
        assert [c.method for c in service.calls_for("default-invoices")][-1] == "DELETE"


async def test_the_reconcile_now_annotation_reconciles_at_once() -> None:
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        manager = await start(cp, service, poll=3600)
        await cp.apply(queue("orders"))
        await cp.wait_for(QUEUE, "orders", lambda q: "url" in (q.get("status") or {}))
        assert len(service.calls_for("default-orders")) == 1
        service.delete_out_of_band("default-orders")  # the next poll is an hour away
        await cp.client.patch(QUEUE, "orders", {"metadata": {"annotations": {
            "setpoint.dev/reconcile-now": "1"}}}, namespace="default")
        await cp.eventually(lambda: "default-orders" in service.queues)
        # the reconcile reaches the history once it has ended, a little after its call
        await cp.eventually(lambda: causes(manager, "orders")[-1:] == ["reconcile_now"])
        assert manager.reconcile_now("queue", Request("default", "orders"), "test")
        await cp.eventually(lambda: len(service.calls_for("default-orders")) == 3)


@pytest.mark.slow
async def test_a_thousand_queues_created_at_once_stay_within_the_budget() -> None:
    budget = BudgetConfig(rate=50, burst=10, concurrency=4)
    n = 1000
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        manager = await start(cp, service, poll=3600, budget=budget)
        grants: list[float] = []  # when each call got its token, on the same clock
        manager.budgets[operator.TARGET].observer = grants.append
        await create_all(cp, n)
        await cp.eventually(lambda: len(service.queues) == n, timeout=180)
        # one call per Queue: the operator's own finalizer and status writes do not wake it
        assert service.total == n == len(grants)
        assert service.by_status[201] == n
        # where the bucket hands out tokens its bound is exact: burst + rate x T in any T
        for window in (0.1, 1.0, 5.0):
            assert most_in_window(grants, window) <= budget.burst + budget.rate * window
        # at the service, the arrivals in any second were granted within 1 + d seconds, d
        # being how much later than their grants the calls arrived (this one event loop
        # runs the API server, 1,000 creates, the operator and the service)
        d = travel_bound(grants, [c.arrived for c in service.calls])
        print(f"\nmost calls in a second: {service.max_in_window} at the service, "
              f"{most_in_window(grants, 1.0)} granted (bound {budget.burst + budget.rate:g}); "
              f"calls arrived up to {d * 1000:.1f} ms after their grant")
        assert service.max_in_window <= budget.burst + budget.rate * (1.0 + d)


@pytest.mark.slow
async def test_sharded_replicas_share_one_budget() -> None:
    """Three replicas split the Queues by shard; each uses the part of the budget its shards
    are of all, so that together they stay within the one budget."""
    budget = BudgetConfig(rate=40, burst=9, concurrency=6)
    shards = 12
    n = 240
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        managers: list[Manager] = [await start(
            cp, service, poll=3600, budget=budget,
            # the default timings (a 15 s lease): no shard is to move while this one event
            # loop is busy with the server, the creates, the replicas and the service
            sharding=ShardingConfig(name="queues", identity=f"r{i}", shards=shards))
            for i in range(3)]

        names = [f"r{i}" for i in range(3)]

        def settled() -> bool:
            # every replica holds exactly what rendezvous hashing gives it: no hand-over
            # is under way (one would change the shares while the Queues are created)
            return all(m.shards is not None and set(m.shards.held) == {
                s for s in range(shards) if rendezvous_owner(s, names) == name}
                for m, name in zip(managers, names, strict=True))

        await cp.eventually(settled, timeout=30)
        parts = [m.budgets[operator.TARGET] for m in managers]
        for part, m in zip(parts, managers, strict=True):
            assert m.shards is not None
            assert part.rate == pytest.approx(budget.rate * len(m.shards.held) / shards)
        assert sum(p.rate for p in parts) == pytest.approx(budget.rate)
        shares = [p.share for p in parts]
        bursts = sum(p.burst for p in parts)
        assert bursts <= budget.burst + len(parts)  # the floor of 1 at most once each
        by_replica: list[list[float]] = [[] for _ in parts]
        for part, times in zip(parts, by_replica, strict=True):
            part.observer = times.append
        await create_all(cp, n)
        await cp.eventually(lambda: len(service.queues) == n, timeout=120)
        grants = [t for times in by_replica for t in times]  # one clock: one process
        assert [p.share for p in parts] == shares  # no shard moved meanwhile
        assert service.total == n == len(grants)
        assert all(by_replica)  # each replica called for the Queues of its own shards
        assert all(p.concurrency >= 1 for p in parts)
        # the replicas' grants together: within their bursts plus the one rate
        for window in (0.1, 1.0, 3.0):
            assert most_in_window(grants, window) <= bursts + budget.rate * window
        d = travel_bound(grants, [c.arrived for c in service.calls])
        print(f"\n3 replicas, shares {[round(p.share, 3) for p in parts]}: most calls in a "
              f"second {service.max_in_window} at the service, {most_in_window(grants, 1.0)} "
              f"granted (bound {bursts + budget.rate:g}); calls arrived up to "
              f"{d * 1000:.1f} ms after their grant")
        assert service.max_in_window <= bursts + budget.rate * (1.0 + d)


async def test_an_injected_429_stops_the_calls_then_one_probe_resumes() -> None:
    retry_after = 1.5
    budget = BudgetConfig(rate=50, burst=10, concurrency=1)
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        manager = await start(cp, service, poll=3600, budget=budget)
        await cp.apply(queue("first"))
        await cp.eventually(lambda: len(service.queues) == 1)
        service.inject(429, count=1, retry_after=retry_after)
        await cp.apply([queue(f"later{i}") for i in range(5)])
        await cp.eventually(lambda: len(service.queues) == 6)
        calls = list(service.calls)
        refused = [i for i, c in enumerate(calls) if c.status == 429]
        assert len(refused) == 1
        the429, probe = calls[refused[0]], calls[refused[0] + 1]
        # nothing reached the service while the breaker was open
        assert probe.arrived >= the429.responded + retry_after
        assert probe.status == 201  # the probe, then the rest
        assert all(c.status == 201 for c in calls[refused[0] + 1:])
        assert manager.budgets[operator.TARGET].state == "closed"
