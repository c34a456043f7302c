"""The queue operator on the in-process control plane, against the fake queue service: a queue
deleted out of band comes back by the poll cadence, the annotation reconciles at once, the
service's own counters show 1,000 Queues created at once stay within the budget, and an
injected 429 stops the calls for its Retry-After, then one probe resumes them."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from setpoint.runtime import BudgetConfig, Request
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
                budget: BudgetConfig | None = None) -> Any:
    await cp.apply(HERE / "crd.yaml")
    return await cp.run_operator(operator.build(service.url, poll=poll),
                                 budgets={operator.TARGET: budget or BudgetConfig(
                                     rate=50, burst=10, concurrency=4)})


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
        assert causes(manager, "orders")[-1] == "reconcile_now"
        assert manager.reconcile_now("queue", Request("default", "orders"), "test")
        await cp.eventually(lambda: len(service.calls_for("default-orders")) == 3)


@pytest.mark.slow
async def test_a_thousand_queues_created_at_once_stay_within_the_budget() -> None:
    budget = BudgetConfig(rate=50, burst=10, concurrency=4)
    n = 1000
    async with fakequeues.FakeQueueService() as service, control_plane() as cp:
        await start(cp, service, poll=3600, budget=budget)
        gate = asyncio.Semaphore(32)

        async def create(i: int) -> None:
            async with gate:
                await cp.client.create(queue(f"q{i:04d}"))

        async with asyncio.TaskGroup() as group:
            for i in range(n):
                group.create_task(create(i))
        await cp.eventually(lambda: len(service.queues) == n, timeout=180)
        # from the service's own counters: never more than rate + burst in any second, give
        # or take the arrival jitter: the budget spaces the *starts* of calls, the service
        # counts *arrivals*, and this one event loop (API server, 1,000 creates, operator and
        # service) can delay a few sends by tens of milliseconds and bunch them (61 of a
        # bound of 60 was seen once)
        jitter = math.ceil(0.1 * (budget.rate + budget.burst))
        assert service.max_in_window <= budget.rate + budget.burst + jitter
        # and one call per Queue: the operator's own finalizer and status writes do not
        # wake it
        assert service.total == n
        assert service.by_status[201] == n


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
