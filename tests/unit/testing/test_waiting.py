"""setpoint.testing.eventually: the suite's one way to wait for a condition."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from setpoint.testing import eventually, eventually_blocking


async def test_returns_the_first_truthy_value_of_a_plain_or_async_check() -> None:
    counter = itertools.count()
    assert await eventually(lambda: next(counter) >= 3 and "done", interval=0) == "done"

    calls = itertools.count()

    async def check() -> list[int]:
        n = next(calls)
        return [n] if n >= 2 else []

    assert await eventually(check, interval=0) == [2]


async def test_listed_exceptions_mean_not_yet_and_others_fail_at_once() -> None:
    counter = itertools.count()

    def flaky() -> bool:
        if next(counter) < 3:
            raise ConnectionRefusedError("not listening yet")
        return True

    assert await eventually(flaky, interval=0, retry_on=(OSError,)) is True
    with pytest.raises(KeyError):
        await eventually(lambda: {}["missing"], retry_on=(OSError,))


async def test_a_condition_that_never_holds_fails_naming_it_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the widget ready not met within 0.05 s "
                                             r"\(last value: \[\]\)"):
        await eventually(lambda: [], timeout=0.05, what="the widget ready")


async def test_a_check_that_hangs_is_bounded_by_the_timeout() -> None:
    async def hangs() -> bool:
        await asyncio.Event().wait()
        return True

    with pytest.raises(AssertionError, match="last error: TimeoutError"):
        await eventually(hangs, timeout=0.05)


def test_the_blocking_form() -> None:
    counter = itertools.count()
    assert eventually_blocking(lambda: next(counter) == 2, interval=0) is True
    with pytest.raises(AssertionError, match=r"last error: ValueError\('bad'\)"):
        eventually_blocking(lambda: (_ for _ in ()).throw(ValueError("bad")),
                            timeout=0.05, retry_on=(ValueError,))
