"""KeyLocks: one holder per key, FIFO, entries only while in use, cancellation safe."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.registry.keylocks import KeyLocks


async def test_holders_of_one_key_take_turns_in_order_and_leave_no_entry() -> None:
    locks = KeyLocks()
    order: list[tuple[str, int]] = []
    release = asyncio.Event()

    async def writer(key: str, i: int) -> None:
        async with locks.hold(key):
            order.append((key, i))
            if i == 0:
                await release.wait()

    tasks = [asyncio.create_task(writer("a", i)) for i in range(4)]
    other = asyncio.create_task(writer("b", 9))
    await other  # another key is not held up by "a" (whose first writer started earlier)
    assert order == [("a", 0), ("b", 9)]
    assert len(locks) == 1
    release.set()
    await asyncio.gather(*tasks)
    assert [i for key, i in order if key == "a"] == [0, 1, 2, 3]
    assert len(locks) == 0


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    locks = KeyLocks()
    entered = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.hold("k"):
            entered.set()
            await release.wait()

    async def waiter() -> None:
        async with locks.hold("k"):
            pytest.fail("a cancelled waiter must not get the lock")

    first = asyncio.create_task(holder())
    await entered.wait()
    second = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    await first
    assert len(locks) == 0
    async with locks.hold("k"):
        assert len(locks) == 1
