"""External-API budgets on a fake clock: the token bucket's bound, the concurrency limit, the
circuit breaker (opens on 429/5xx/connection errors, honours Retry-After, one probe), the
engine's requeue on an open breaker, the poll cadence and the reconcile-now annotation."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.runtime import budgets as b
from setpoint.runtime import engine, polling, predicates
from setpoint.runtime import handlers as h
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime import triggers as t
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.reconcile import FuncReconciler, Request, Result

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

A = Request("default", "a")


async def call_ok(budget: b.Budget, starts: list[float], clock: FakeAsyncClock,
                  status: int = 200) -> None:
    async with budget.call() as call:
        starts.append(clock.monotonic())
        call.record(status)


async def test_the_bucket_bounds_every_window(clock: FakeAsyncClock) -> None:
    cfg = b.BudgetConfig(rate=5.0, burst=3, concurrency=1000)
    budget = b.Budget("svc", cfg, clock=clock)
    starts: list[float] = []

    async def all_calls() -> None:
        async with asyncio.TaskGroup() as group:
            for _ in range(40):
                group.create_task(call_ok(budget, starts, clock))

    await clock.drive(all_calls())
    assert len(starts) == 40
    # the first burst at once, then one every 1/rate seconds
    assert starts[:3] == [0.0, 0.0, 0.0]
    assert starts[-1] == pytest.approx((40 - 3) / 5.0)
    for start in starts:  # any one-second window holds at most burst + rate calls
        in_window = [s for s in starts if start <= s < start + 1.0]
        assert len(in_window) <= cfg.burst + cfg.rate


async def test_concurrency_is_bounded(clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(rate=1000, burst=1000, concurrency=2), clock=clock)
    inside = 0
    most = 0
    release = asyncio.Event()

    async def slow() -> None:
        nonlocal inside, most
        async with budget.call():
            inside += 1
            most = max(most, inside)
            await release.wait()
            inside -= 1

    async with asyncio.TaskGroup() as group:
        for _ in range(5):
            group.create_task(slow())
        await clock.settle()
        assert (inside, most) == (2, 2)
        release.set()
    assert most == 2


async def test_a_cancelled_waiter_gives_its_token_back(clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(rate=1.0, burst=1), clock=clock)
    starts: list[float] = []
    await call_ok(budget, starts, clock)
    waiter = asyncio.ensure_future(call_ok(budget, starts, clock))
    await clock.settle()
    waiter.cancel()
    await asyncio.wait({waiter})
    await clock.tick(1.0)
    await call_ok(budget, starts, clock)  # the token booked by the cancelled caller is back
    assert starts == [0.0, 1.0]


async def test_the_breaker_opens_honours_retry_after_and_probes_once(
        clock: FakeAsyncClock) -> None:
    registry = rtmetrics.MetricsRegistry()
    budget = b.Budget("svc", b.BudgetConfig(rate=1000, burst=1000, open_for=5.0),
                      clock=clock, metrics=registry)
    async with budget.call() as call:
        call.record(429, "30")
    assert budget.state == b.OPEN
    assert budget.reopens_in() == 30.0
    with pytest.raises(b.BreakerOpenError) as info:
        async with budget.call():
            raise AssertionError("never called while open")
    assert info.value.retry_after == 30.0
    await clock.tick(30.0)
    assert budget.state == b.HALF_OPEN
    entered = asyncio.Event()
    finish = asyncio.Event()

    async def probe() -> None:
        async with budget.call() as call:
            assert call.probe
            entered.set()
            await finish.wait()
            call.record(200)

    task = asyncio.ensure_future(probe())
    await entered.wait()
    with pytest.raises(b.BreakerOpenError):  # one probe at a time
        async with budget.call():
            raise AssertionError("a second probe")
    finish.set()
    await task
    assert budget.state == b.CLOSED
    await call_ok(budget, [], clock)
    calls = registry.get("setpoint_budget_calls_total")
    assert isinstance(calls, rtmetrics.Counter)
    assert [calls.value("svc", o) for o in ("success", "failure", "rejected")] == [2, 1, 2]


async def test_failed_probes_double_the_open_time_up_to_the_cap(
        clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(open_for=2.0, max_open=5.0), clock=clock)
    opened: list[float] = []
    for _ in range(4):
        with pytest.raises(ConnectionRefusedError):
            async with budget.call():
                raise ConnectionRefusedError("down")
        opened.append(budget.reopens_in())
        await clock.tick(budget.reopens_in())
    assert opened == [2.0, 4.0, 5.0, 5.0]


async def test_exceptions_that_say_nothing_about_the_upstream_do_not_open_it(
        clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", clock=clock)
    with pytest.raises(KeyError):
        async with budget.call():
            raise KeyError("a bug in the reconcile")
    assert budget.state == b.CLOSED
    with pytest.raises(b.UpstreamError):
        async with budget.call():
            raise b.UpstreamError("bad answer", retry_after=7)
    assert (budget.state, budget.reopens_in()) == (b.OPEN, 7.0)


async def test_the_threshold_counts_consecutive_failures(clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(failure_threshold=3), clock=clock)
    for status in (500, 503, 200, 502, 500):
        await call_ok(budget, [], clock, status)
    assert budget.state == b.CLOSED  # the success in between reset the count
    await call_ok(budget, [], clock, 504)
    assert budget.state == b.OPEN


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert b.parse_retry_after("12", now.timestamp()) == 12.0
    date = format_datetime(now + timedelta(seconds=90), usegmt=True)
    assert b.parse_retry_after(date, now.timestamp()) == 90.0
    assert b.parse_retry_after("soon", now.timestamp()) is None
    assert b.parse_retry_after(None, now.timestamp()) is None
    assert b.parse_retry_after(-3.0, now.timestamp()) == 0.0


@given(st.text(max_size=300))
def test_retry_after_never_raises_on_garbage(value: str) -> None:
    parsed = b.parse_retry_after(value, 1.7e9)
    assert parsed is None or parsed >= 0.0


@pytest.mark.parametrize("kwargs", [{"rate": 0}, {"burst": 0}, {"concurrency": 0},
                                    {"open_for": 10, "max_open": 5},
                                    {"failure_threshold": 0}, {"rate": float("inf")}])
def test_config_is_bounded(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must be|need"):
        b.BudgetConfig(**kwargs)  # type: ignore[arg-type]


def test_budgets_are_declared_by_name_and_shared(clock: FakeAsyncClock) -> None:
    budgets = b.Budgets({"queues": b.BudgetConfig()}, clock=clock)
    assert budgets["queues"] is budgets["queues"]
    with pytest.raises(KeyError, match="no budget named 'dns'"):
        budgets["dns"]


async def test_an_open_breaker_requeues_for_when_it_half_opens(clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(open_for=10.0), clock=clock)
    calls: list[float] = []

    async def reconcile(request: Request) -> None:
        async with budget.call() as call:
            calls.append(clock.monotonic())
            call.record(503 if len(calls) == 1 else 200)

    e = engine.Engine("q", FuncReconciler(reconcile), workers=1, clock=clock,
                      rng=random.Random(1))
    e.enqueue(A)
    assert await e.process(await e.queue.get()) == "success"  # the call failed, not the code
    assert budget.state == b.OPEN
    e.enqueue(A)
    assert await e.process(await e.queue.get()) == "requeue_after"
    assert e.queue.num_requeues(A) == 0  # not the object's fault: no backoff
    deadline = clock.next_deadline()
    assert deadline is not None
    assert 10.0 <= deadline <= 11.0
    await clock.tick(deadline - clock.monotonic())
    request = await e.queue.get()
    assert [tr.cause for tr in e.queue.triggers(request)] == ["retry"]
    assert await e.process(request) == "success"
    assert calls == [0.0, deadline]
    assert budget.state == b.CLOSED


def test_poll_delays_stay_within_the_jitter() -> None:
    cfg = polling.PollConfig(interval=60.0, jitter=0.25)
    rng = random.Random(7)
    delays = [cfg.next_delay(rng) for _ in range(1000)]
    assert all(45.0 <= d <= 75.0 for d in delays)
    # spread, not lockstep: 1,000 objects land in every 3-second slice of the window
    slices = {int((d - 45.0) // 3) for d in delays}
    assert slices == set(range(10))
    with pytest.raises(ValueError, match="interval"):
        polling.PollConfig(interval=0)
    with pytest.raises(ValueError, match="jitter"):
        polling.PollConfig(interval=10, jitter=1.0)


async def test_the_engine_polls_existing_objects_only(clock: FakeAsyncClock) -> None:
    exists = {A}
    seen: list[tuple[float, tuple[str, ...]]] = []

    async def reconcile(request: Request) -> Result | None:
        seen.append((clock.monotonic(), tuple(tr.cause for tr in t.current_triggers())))
        return None

    e = engine.Engine("q", FuncReconciler(reconcile), workers=1, clock=clock,
                      poll=polling.PollConfig(interval=30.0, jitter=0.0),
                      still_exists=lambda r: r in exists)
    e.enqueue(A, t.Trigger(t.CAUSE_ADD))
    await e.process(await e.queue.get())
    await clock.tick(30.0)
    await e.process(await e.queue.get())
    exists.clear()  # deleted: its last reconcile schedules nothing more
    await clock.tick(30.0)
    await e.process(await e.queue.get())
    await clock.tick(300.0)
    assert len(e.queue) == 0
    assert e.queue.delayed == 0
    assert seen == [(0.0, ("add",)), (30.0, ("poll",)), (60.0, ("poll",))]


def test_a_new_reconcile_now_value_triggers_past_the_predicate() -> None:
    added: list[tuple[Request, t.Trigger]] = []

    handler = h.QueueingHandler(h.EnqueueSelf(), lambda r, tr: added.append((r, tr)),
                                predicate=predicates.generation_changed, watch="for Queue")

    def obj(value: str | None) -> dict[str, object]:
        annotations = {h.RECONCILE_NOW_ANNOTATION: value} if value is not None else {}
        return {"metadata": {"namespace": "default", "name": "a", "generation": 1,
                             "annotations": annotations}}

    handler.on_update(obj(None), obj("1"))
    handler.on_update(obj("1"), obj("1"))  # the same value: nothing (generation unchanged)
    handler.on_update(obj("1"), obj("2"))
    assert [(r, tr.cause, tr.detail) for r, tr in added] == [
        (A, "reconcile_now", "1"), (A, "reconcile_now", "2")]
