"""Deadlines: one timer fails each tracked future once its deadline passes, in deadline
order, and leaves alone what finished or was untracked first."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.client.deadlines import Deadlines

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


async def test_each_future_fails_at_its_own_deadline_and_no_other() -> None:
    deadlines = Deadlines()
    loop = asyncio.get_running_loop()
    late, soon, finished = loop.create_future(), loop.create_future(), loop.create_future()
    far = deadlines.at(3600)
    near = deadlines.at(0.05)
    assert far is not None
    assert near is not None
    waiting_late = asyncio.ensure_future(far.wait(late))
    waiting_finished = asyncio.ensure_future(near.wait(finished))
    await asyncio.sleep(0)
    finished.set_result("done")
    assert await waiting_finished == "done"  # finished in time: its deadline never touches it
    with pytest.raises(TimeoutError):
        await near.wait(soon)  # tracked after the timer was armed for a later deadline
    assert not late.done()  # an hour away
    late.set_result(1)
    assert await waiting_late == 1
    assert not deadlines._due  # nothing left tracked


async def test_deadlines_in_any_order_fail_in_deadline_order() -> None:
    deadlines = Deadlines()
    loop = asyncio.get_running_loop()
    order: list[str] = []

    async def wait(name: str, timeout: float) -> None:
        deadline = deadlines.at(timeout)
        assert deadline is not None
        with pytest.raises(TimeoutError):
            await deadline.wait(loop.create_future())
        order.append(name)

    await asyncio.gather(wait("c", 0.15), wait("a", 0.05), wait("b", 0.1))
    assert order == ["a", "b", "c"]
    assert deadlines.at(None) is None
