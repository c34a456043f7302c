"""The LIST budget: reservations, the line, refusals and releases."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from setpoint.apimachinery import errors
from setpoint.registry import listbudget
from setpoint.registry.listbudget import ListBudget, ListBudgetConfig

KiB = 1024


def budget(max_bytes: int = 100 * KiB, small: int = KiB, max_wait: float = 5.0) -> ListBudget:
    return ListBudget(ListBudgetConfig(max_bytes=max_bytes, small=small, max_wait=max_wait))


class Flight:
    """A LIST in flight: it reserves ``size`` and holds it until released."""

    def __init__(self, lists: ListBudget, size: int) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.task = asyncio.create_task(self._run(lists, size))

    async def _run(self, lists: ListBudget, size: int) -> None:
        async with lists.reserve(size):
            self.entered.set()
            await self.release.wait()

    async def finish(self) -> None:
        self.release.set()
        await self.task


@contextlib.asynccontextmanager
async def holding(lists: ListBudget, size: int) -> AsyncIterator[Flight]:
    flight = Flight(lists, size)
    await flight.entered.wait()
    try:
        yield flight
    finally:
        await flight.finish()


async def until_waiting(lists: ListBudget, n: int) -> None:
    async with asyncio.timeout(5):
        while lists.waiting != n:  # noqa: ASYNC110 - the budget offers no event to wait on
            await asyncio.sleep(0)


async def test_lists_that_fit_run_together_and_release() -> None:
    lists = budget()
    async with holding(lists, 40 * KiB), holding(lists, 60 * KiB):
        assert lists.reserved == 100 * KiB
    assert lists.reserved == 0


async def test_waiting_lists_run_in_arrival_order() -> None:
    lists = budget()
    order: list[str] = []

    async def list_(name: str, size: int) -> None:
        async with lists.reserve(size):
            order.append(name)

    async with holding(lists, 80 * KiB):
        first = asyncio.create_task(list_("first", 50 * KiB))
        await until_waiting(lists, 1)
        second = asyncio.create_task(list_("second", 10 * KiB))  # would fit, but waits its turn
        await until_waiting(lists, 2)
        assert order == []
    await asyncio.gather(first, second)
    assert order == ["first", "second"]
    assert lists.reserved == 0


async def test_small_lists_never_wait() -> None:
    lists = budget(small=4 * KiB)
    async with holding(lists, 100 * KiB), asyncio.timeout(1), lists.reserve(4 * KiB):
        assert lists.reserved == 100 * KiB


async def test_a_full_line_is_refused_with_retry_after() -> None:
    lists = budget()
    async with holding(lists, 100 * KiB):
        waiting = Flight(lists, 70 * KiB)
        await until_waiting(lists, 1)
        with pytest.raises(errors.TooManyRequests) as refused:
            async with lists.reserve(40 * KiB):
                pass
        assert refused.value.retry_after == 1
        assert refused.value.status_code == 429
        assert refused.value.message == listbudget.TOO_MANY_REQUESTS
        assert lists.rejected == 1
    await waiting.entered.wait()
    await waiting.finish()
    assert lists.reserved == 0


async def test_a_wait_that_lasts_too_long_is_refused() -> None:
    lists = budget(max_wait=0.05)
    async with holding(lists, 100 * KiB):
        with pytest.raises(errors.TooManyRequests):
            async with lists.reserve(10 * KiB):
                pass
        assert lists.waiting == 0
    assert lists.reserved == 0


async def test_a_cancelled_wait_gives_its_place_to_the_next() -> None:
    lists = budget()
    got: list[str] = []

    async def list_(name: str, size: int) -> None:
        async with lists.reserve(size):
            got.append(name)

    async with holding(lists, 100 * KiB):
        head = asyncio.create_task(list_("head", 90 * KiB))
        await until_waiting(lists, 1)
        behind = asyncio.create_task(list_("behind", 10 * KiB))
        await until_waiting(lists, 2)
        head.cancel()
        with pytest.raises(asyncio.CancelledError):
            await head
        assert lists.waiting == 1
    await behind
    assert got == ["behind"]
    assert lists.reserved == 0


async def test_a_list_bigger_than_the_budget_runs_alone() -> None:
    lists = budget()
    async with holding(lists, 10 * KiB):
        huge = Flight(lists, 10**9)
        await until_waiting(lists, 1)
    await huge.entered.wait()
    assert lists.reserved == 100 * KiB
    await huge.finish()
    assert lists.reserved == 0


def test_estimate_is_the_resource_or_a_page_of_it() -> None:
    assert listbudget.estimate(1000, 1_000_000) == 1_000_000
    assert listbudget.estimate(1000, 1_000_000, limit=100) == 100_000
    assert listbudget.estimate(10, 1_000, limit=500) == 1_000
    assert listbudget.estimate(0, 0, limit=5) == 0


@pytest.mark.parametrize("kwargs", [{"max_bytes": 0}, {"max_wait": 0}, {"max_wait": 120},
                                    {"small": -1}, {"max_bytes": 10, "small": 11}])
def test_config_is_bounded(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        ListBudgetConfig(**kwargs)  # type: ignore[arg-type]
