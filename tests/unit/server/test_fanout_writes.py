"""FanoutWrites: turns of the event loop numbered as the fan-out sees them; the flushes
deferred in one turn run together, in order, at its end; a failing one does not stop the
others."""

from __future__ import annotations

import asyncio

from setpoint.server.watchresponse import FanoutWrites


async def test_the_flushes_of_one_turn_run_together_after_it_in_order() -> None:
    writes = FanoutWrites()
    ran: list[str] = []
    loop = asyncio.get_running_loop()
    turn_ended = loop.create_future()

    def fail() -> None:
        ran.append("fail")
        raise ConnectionResetError

    turn = writes.turn()
    assert writes.turn() == turn  # the same turn until its end
    writes.defer(lambda: ran.append("a"))
    writes.defer(fail)
    writes.defer(lambda: ran.append("b"))
    # registered after the flushes' callback: runs after them
    loop.call_soon(turn_ended.set_result, None)
    assert ran == []  # nothing is written during the turn
    await turn_ended
    assert ran == ["a", "fail", "b"]
    assert writes.turn() == turn + 1

    # the next turn has a callback of its own
    next_turn = loop.create_future()
    writes.defer(lambda: ran.append("c"))
    loop.call_soon(next_turn.set_result, None)
    await next_turn
    assert ran == ["a", "fail", "b", "c"]
