"""A budget's exact rate bound, recorded where it holds (the moment each call gets its
token), for any arrival pattern; and a budget scaled to a replica's share of the shards:
rate, burst and concurrency follow the share, waiting callers are served at the new rate,
and the floor keeps a replica with a tiny share making progress."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.runtime import budgets as b
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime.clock import FakeAsyncClock

#: floating-point room in the window arithmetic (the refill is computed in floats)
EPS = 1e-6


def most_in_window(grants: list[float], window: float) -> int:
    """The most grants in any closed window ``[t, t + window]`` starting at a grant."""
    grants = sorted(grants)
    most = 0
    j = 0
    for i, start in enumerate(grants):
        j = max(j, i)
        while j + 1 < len(grants) and grants[j + 1] <= start + window + EPS:
            j += 1
        most = max(most, j - i + 1)
    return most


async def calls_at(budget: b.Budget, clock: FakeAsyncClock, arrivals: list[float]) -> None:
    """One call through ``budget`` arriving at each (fake) time of ``arrivals``."""
    async def arrive(at: float) -> None:
        waited = asyncio.Event()
        clock.call_at(at, waited.set)
        await waited.wait()
        async with budget.call() as call:
            call.record(200)

    async with asyncio.TaskGroup() as group:
        for at in arrivals:
            group.create_task(arrive(at))


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(min_value=0.5, max_value=50.0),
       burst=st.integers(min_value=1, max_value=12),
       arrivals=st.lists(st.floats(min_value=0.0, max_value=4.0), min_size=1, max_size=80),
       share=st.sampled_from([1.0, 0.5, 1 / 3, 0.1]))
def test_no_window_holds_more_than_burst_plus_rate_times_its_length(
        rate: float, burst: int, arrivals: list[float], share: float) -> None:
    async def scenario() -> list[float]:
        clock = FakeAsyncClock()
        budget = b.Budget("svc", b.BudgetConfig(rate=rate, burst=burst, concurrency=10_000),
                          clock=clock)
        budget.set_share(share)
        grants: list[float] = []
        budget.observer = grants.append
        await clock.drive(calls_at(budget, clock, arrivals))
        assert len(grants) == len(arrivals)
        return grants

    grants = asyncio.run(scenario())
    effective_rate = rate * share
    effective_burst = max(1, int(burst * share + 1e-9))
    for window in (0.0, 0.25, 1.0, 2.5, 10.0):
        assert most_in_window(grants, window) <= effective_burst + effective_rate * window + EPS


@settings(max_examples=40, deadline=None)
@given(burst=st.integers(min_value=1, max_value=12),
       arrivals=st.lists(st.floats(min_value=0.0, max_value=4.0), min_size=1, max_size=80),
       shares=st.tuples(st.sampled_from([1.0, 0.5, 0.25]), st.sampled_from([1.0, 0.5, 0.25])),
       change=st.floats(min_value=0.0, max_value=4.0))
def test_a_share_change_keeps_every_window_within_the_rates_in_force(
        burst: int, arrivals: list[float], shares: tuple[float, float], change: float) -> None:
    """Whatever the moment the share changes, a window holds at most the larger bucket plus
    what each rate earns over its part of the window."""
    rate = 8.0

    async def scenario() -> list[float]:
        clock = FakeAsyncClock()
        budget = b.Budget("svc", b.BudgetConfig(rate=rate, burst=burst, concurrency=10_000),
                          clock=clock)
        budget.set_share(shares[0])
        grants: list[float] = []
        budget.observer = grants.append
        clock.call_at(change, lambda: budget.set_share(shares[1]))
        await clock.drive(calls_at(budget, clock, arrivals))
        return grants

    grants = sorted(asyncio.run(scenario()))
    assert len(grants) == len(arrivals)
    bucket = max(max(1, int(burst * share + 1e-9)) for share in shares)
    for window in (0.0, 0.5, 1.0, 3.0):
        for start in grants:
            end = start + window
            before = max(0.0, min(end, change) - start)
            earned = rate * shares[0] * before + rate * shares[1] * (window - before)
            inside = sum(1 for g in grants if start <= g <= end + EPS)
            assert inside <= bucket + earned + EPS


async def test_a_share_scales_rate_burst_and_concurrency(clock: FakeAsyncClock) -> None:
    registry = rtmetrics.MetricsRegistry()
    budget = b.Budget("svc", b.BudgetConfig(rate=30.0, burst=9, concurrency=6), clock=clock,
                      metrics=registry)
    budget.set_share(1 / 3)
    assert (budget.rate, budget.burst, budget.concurrency) == (pytest.approx(10.0), 3, 2)
    gauge = registry.get("setpoint_budget_share")
    assert isinstance(gauge, rtmetrics.Gauge)
    assert gauge.value("svc") == pytest.approx(1 / 3)
    budget.set_share(1 / 16)  # the floor: one token, one slot, a sixteenth of the rate
    assert (budget.rate, budget.burst, budget.concurrency) == (pytest.approx(1.875), 1, 1)
    for wrong in (0.0, -1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="share"):
            budget.set_share(wrong)
    budgets = b.Budgets({"svc": b.BudgetConfig(rate=8.0, burst=4)}, clock=clock)
    budgets.set_share(0.5)  # applies to budgets built later too
    assert (budgets["svc"].rate, budgets["svc"].burst) == (4.0, 2)
    budgets.set_share(1.0)
    assert (budgets["svc"].rate, budgets["svc"].burst) == (8.0, 4)


async def test_waiting_callers_are_served_at_the_new_rate(clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(rate=10.0, burst=2, concurrency=100), clock=clock)
    grants: list[float] = []
    budget.observer = grants.append

    async def scenario() -> None:
        async with asyncio.TaskGroup() as group:
            for _ in range(8):
                group.create_task(calls_at(budget, clock, [0.0]))
            await clock.tick(0.25)  # the burst at 0, then one per 0.1 s: 2 more by 0.2
            assert len(grants) == 4
            budget.set_share(0.25)  # 2.5 per second from now on, a bucket of 1
            await clock.tick(10.0)

    await scenario()
    assert len(grants) == 8
    assert grants[:4] == pytest.approx([0.0, 0.0, 0.1, 0.2])
    # at 0.25 half a token had been earned at 10/s; the other half at 2.5/s takes 0.2 s,
    # then one token per 0.4 s
    assert grants[4] == pytest.approx(0.45)
    spacing = [round(b2 - b1, 6) for b1, b2 in itertools.pairwise(grants[4:])]
    assert spacing == [0.4, 0.4, 0.4]


async def test_a_smaller_concurrency_admits_nobody_until_calls_have_ended(
        clock: FakeAsyncClock) -> None:
    budget = b.Budget("svc", b.BudgetConfig(rate=1000, burst=1000, concurrency=4),
                      clock=clock)
    inside = 0
    most_after = 0
    shrunk = False
    release = asyncio.Event()

    async def slow() -> None:
        nonlocal inside, most_after
        async with budget.call():
            inside += 1
            if shrunk:
                most_after = max(most_after, inside)
            await release.wait()
            await asyncio.sleep(0)  # let the others in, were there room
            inside -= 1

    async with asyncio.TaskGroup() as group:
        for _ in range(10):
            group.create_task(slow())
        await clock.settle()
        assert inside == 4
        budget.set_share(0.25)  # one slot now
        shrunk = True
        release.set()
    # once the four had ended, the rest went one at a time
    assert most_after == 1
