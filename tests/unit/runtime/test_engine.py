"""The engine's worker semantics on a fake clock (controller-runtime's four rules)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.runtime import engine, ratelimit
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.reconcile import FuncReconciler, Request, Result, TerminalError

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

A = Request("default", "a")
B = Request("default", "b")


def make(clock: FakeAsyncClock, func: Callable[[Request], Any], *, workers: int = 1,
         registry: rtmetrics.MetricsRegistry | None = None) -> engine.Engine:
    return engine.Engine("books", FuncReconciler(func), workers=workers, clock=clock,
                         rate_limiter=ratelimit.ItemExponentialBackoff(0.5, 60.0),
                         metrics=registry)


async def take(e: engine.Engine) -> str:
    """Process the one ready request; returns the result label."""
    assert len(e.queue) == 1
    return await e.process(await e.queue.get())


def total(registry: rtmetrics.MetricsRegistry, result: str) -> float:
    counter = registry.get("controller_runtime_reconcile_total")
    assert isinstance(counter, rtmetrics.Counter)
    return counter.value("books", result)


async def test_success_forgets_the_backoff(clock: FakeAsyncClock) -> None:
    fail = [True]

    async def reconcile(request: Request) -> None:
        if fail[0]:
            raise RuntimeError("boom")

    registry = rtmetrics.MetricsRegistry()
    e = make(clock, reconcile, registry=registry)
    e.enqueue(A)
    assert await take(e) == "error"
    assert e.queue.num_requeues(A) == 1
    assert e.queue.delayed == 1
    fail[0] = False
    await clock.tick(0.5)
    assert await take(e) == "success"
    assert e.queue.num_requeues(A) == 0
    assert (e.queue.delayed, len(e.queue), e.queue.processing) == (0, 0, 0)
    assert total(registry, "error") == 1
    assert total(registry, "success") == 1


async def test_exceptions_retry_with_exponential_backoff(clock: FakeAsyncClock) -> None:
    seen: list[float] = []

    async def reconcile(request: Request) -> None:
        seen.append(clock.monotonic())
        raise ValueError("still broken")

    e = make(clock, reconcile)
    e.enqueue(A)
    for _ in range(4):
        assert await take(e) == "error"
        deadline = clock.next_deadline()
        assert deadline is not None
        await clock.tick(deadline - clock.monotonic())
    assert [round(b - a, 6) for a, b in itertools.pairwise(seen)] == [0.5, 1.0, 2.0]


async def test_terminal_error_is_counted_and_not_retried(clock: FakeAsyncClock) -> None:
    async def reconcile(request: Request) -> None:
        raise TerminalError("the spec can never work")

    registry = rtmetrics.MetricsRegistry()
    e = make(clock, reconcile, registry=registry)
    e.enqueue(A)
    assert await take(e) == "error"
    assert (e.queue.delayed, len(e.queue), e.queue.num_requeues(A)) == (0, 0, 0)
    errors = registry.get("controller_runtime_reconcile_errors_total")
    terminal = registry.get("controller_runtime_terminal_reconcile_errors_total")
    assert isinstance(errors, rtmetrics.Counter)
    assert isinstance(terminal, rtmetrics.Counter)
    assert (errors.value("books"), terminal.value("books")) == (1, 1)
    await clock.tick(3600)
    assert len(e.queue) == 0


async def test_requeue_after_forgets_then_adds_after(clock: FakeAsyncClock) -> None:
    outcomes: list[Exception | Result] = [RuntimeError("x"), RuntimeError("y"),
                                          Result.after(30)]

    async def reconcile(request: Request) -> Result:
        outcome = outcomes.pop(0) if outcomes else Result.done()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    e = make(clock, reconcile)
    e.enqueue(A)
    assert await take(e) == "error"
    await clock.tick(0.5)
    assert await take(e) == "error"
    assert e.queue.num_requeues(A) == 2
    await clock.tick(1.0)
    assert await take(e) == "requeue_after"
    assert e.queue.num_requeues(A) == 0  # the backoff was reset
    await clock.tick(29.9)
    assert len(e.queue) == 0
    await clock.tick(0.1)
    assert await take(e) == "success"


async def test_requeue_goes_through_the_rate_limiter(clock: FakeAsyncClock) -> None:
    registry = rtmetrics.MetricsRegistry()
    e = make(clock, lambda r: _result(Result(requeue=True)), registry=registry)
    e.enqueue(A)
    assert await take(e) == "requeue"
    assert e.queue.num_requeues(A) == 1
    errors = registry.get("controller_runtime_reconcile_errors_total")
    assert isinstance(errors, rtmetrics.Counter)
    assert errors.value("books") == 0


async def _result(result: Result) -> Result:
    return result


async def test_returning_something_else_is_an_error(clock: FakeAsyncClock) -> None:
    e = make(clock, lambda r: _result("ok"))  # type: ignore[arg-type]
    e.enqueue(A)
    assert await take(e) == "error"
    assert e.queue.num_requeues(A) == 1


async def test_one_key_is_never_reconciled_concurrently(clock: FakeAsyncClock) -> None:
    running: dict[Request, int] = {}
    peak: dict[Request, int] = {}
    calls: list[Request] = []
    gate = asyncio.Event()

    async def reconcile(request: Request) -> None:
        calls.append(request)
        running[request] = running.get(request, 0) + 1
        peak[request] = max(peak.get(request, 0), running[request])
        await gate.wait()
        running[request] -= 1

    e = make(clock, reconcile, workers=4)
    async with asyncio.TaskGroup() as group:
        task = group.create_task(e.run())
        e.enqueue(A)
        e.enqueue(B)
        await clock.settle()
        e.enqueue(A)  # while A is being reconciled: dirty, handed out again afterwards
        e.enqueue(A)
        await clock.settle()
        assert sorted(calls) == [A, B]
        gate.set()
        await clock.settle()
        assert calls.count(A) == 2
        assert await e.drain(1.0)
        await asyncio.wait({task})
    assert peak == {A: 1, B: 1}


async def test_workers_are_bounded(clock: FakeAsyncClock) -> None:
    gate = asyncio.Event()
    active = [0, 0]  # now, peak

    async def reconcile(request: Request) -> None:
        active[0] += 1
        active[1] = max(active[1], active[0])
        await gate.wait()
        active[0] -= 1

    registry = rtmetrics.MetricsRegistry()
    e = make(clock, reconcile, workers=3, registry=registry)
    async with asyncio.TaskGroup() as group:
        group.create_task(e.run())
        for i in range(10):
            e.enqueue(Request("ns", f"o{i}"))
        await clock.settle()
        gauge = registry.get("controller_runtime_active_workers")
        assert isinstance(gauge, rtmetrics.Gauge)
        assert gauge.value("books") == 3
        gate.set()
        assert await e.drain(5.0)
    assert active == [0, 3]
    assert total(registry, "success") == 10


@pytest.mark.parametrize("workers", [0, -1, engine.MAX_WORKERS + 1])
def test_worker_count_is_validated(clock: FakeAsyncClock, workers: int) -> None:
    with pytest.raises(ValueError, match="workers"):
        make(clock, lambda r: _result(Result.done()), workers=workers)


async def test_drain_times_out_on_the_clock(clock: FakeAsyncClock) -> None:
    async def reconcile(request: Request) -> None:
        await asyncio.Event().wait()  # never finishes

    e = make(clock, reconcile)
    async with asyncio.TaskGroup() as group:
        run = group.create_task(e.run())
        e.enqueue(A)
        await clock.settle()
        drained = asyncio.ensure_future(e.drain(10.0))
        await clock.tick(9.9)
        assert not drained.done()
        await clock.tick(0.2)
        assert drained.done()
        assert drained.result() is False
        run.cancel()
    assert e.queue.processing == 0  # the cancelled worker marked its request done


async def test_a_cancelled_reconcile_is_not_requeued(clock: FakeAsyncClock) -> None:
    started = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.Event().wait()

    e = make(clock, reconcile)
    e.enqueue(A)
    request = await e.queue.get()
    task = asyncio.ensure_future(e.process(request))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (e.queue.processing, len(e.queue), e.queue.delayed) == (0, 0, 0)


async def test_workqueue_metrics_are_wired(clock: FakeAsyncClock) -> None:
    registry = rtmetrics.MetricsRegistry()
    e = make(clock, lambda r: _result(Result.done()), registry=registry)
    e.enqueue(A)
    e.enqueue(B)
    depth = registry.get("workqueue_depth")
    adds = registry.get("workqueue_adds_total")
    assert isinstance(depth, rtmetrics.Gauge)
    assert isinstance(adds, rtmetrics.Counter)
    assert depth.value("books", "books") == 2
    assert adds.value("books", "books") == 2
    request = await e.queue.get()
    await clock.tick(4)
    longest = registry.get("workqueue_longest_running_processor_seconds")
    assert isinstance(longest, rtmetrics.Gauge)
    assert longest.value("books", "books") == 4
    await e.process(request)
    assert longest.value("books", "books") == 0


async def test_a_reconciler_that_requeues_itself_at_once_cannot_starve_the_loop(
        clock: FakeAsyncClock) -> None:
    """It never suspends (a ready key is handed out without waiting); the worker yields."""
    seen_by_the_other_task: list[int] = []
    reconciles = [0]
    finished = asyncio.Event()
    e: engine.Engine
    others: list[asyncio.Task[None]] = []

    async def other() -> None:
        seen_by_the_other_task.append(reconciles[0])

    async def reconcile(request: Request) -> None:
        reconciles[0] += 1
        if reconciles[0] == 1:  # scheduled behind the worker, which is running now
            others.append(asyncio.get_running_loop().create_task(other()))
        if reconciles[0] < 10_000:
            e.enqueue(request)  # marked dirty: handed out again as soon as this one is done
        else:
            finished.set()

    e = make(clock, reconcile)
    e.enqueue(A)
    async with asyncio.TaskGroup() as group:
        run = group.create_task(e.run())
        await finished.wait()
        e.shut_down()
        await run
    await others[0]
    # without the yield the other task would only run after all 10,000 reconciles
    assert seen_by_the_other_task[0] <= 2


async def test_an_exception_without_a_message_is_logged_with_one(
        clock: FakeAsyncClock, caplog: pytest.LogCaptureFixture) -> None:
    async def times_out(request: Request) -> Result:
        raise TimeoutError

    e = make(clock, times_out)
    e.enqueue(A)
    with caplog.at_level("ERROR"):
        assert await take(e) == "error"
    message = caplog.records[-1].getMessage()
    assert message.startswith("error reconciling default/a (retry 1): TimeoutError: a timeout "
                              "expired")
    assert "test_engine.py:" in message
    assert "in times_out" in message
    e.shut_down()


async def test_a_conflict_is_retried_and_logged_without_a_traceback(
        clock: FakeAsyncClock, caplog: pytest.LogCaptureFixture) -> None:
    async def conflicts(request: Request) -> Result:
        raise errors.Conflict("the object has been modified")

    e = make(clock, conflicts)
    e.enqueue(A)
    with caplog.at_level("INFO"):
        assert await take(e) == "error"
    record = caplog.records[-1]
    assert record.levelname == "INFO"
    assert record.exc_info is None
    assert record.getMessage() == ("conflict reconciling default/a (retry 1): Conflict: the "
                                   "object has been modified")
    assert e.queue.num_requeues(A) == 1  # retried, with the usual backoff
    e.shut_down()


@pytest.mark.parametrize(("error", "expected"), [
    (KeyError("spec"), "KeyError: 'spec'"),
    (ValueError(), "ValueError (without a message)"),
    (RuntimeError("boom"), "RuntimeError: boom"),
])
def test_describe_error(error: Exception, expected: str) -> None:
    assert engine.describe_error(error).startswith(expected)


async def test_a_synchronous_reconcile_function_is_accepted(clock: FakeAsyncClock) -> None:
    e = make(clock, lambda request: Result.after(5))
    e.enqueue(A)
    assert await take(e) == "requeue_after"
    e.shut_down()
