"""Waiting for a condition in a test: one way to do it, with one default timeout.

:func:`eventually` (in an event loop) and :func:`eventually_blocking` (in a thread, around
kubectl or a synchronous client) call ``check`` until it returns a truthy value and return
that value. The wait is a positive signal: it ends as soon as the condition holds, so the
timeout only bounds how long a failing test takes and may be generous (machines under load
are slow, never wrong). After ``timeout`` seconds they raise :class:`AssertionError` naming
``what`` was awaited and the last value ``check`` returned or the last error it raised.

``retry_on`` lists exception types that mean "not yet" (a 404 before an object exists, a
connection refused before a server listens); any other exception from ``check`` fails the
wait at once, so a bug in a check is never mistaken for a slow condition.

Never use these to show that something does *not* happen: a wait that times out proves
nothing on a slow machine. Wait instead for a later event that could only come after it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: seconds; the wait ends when the condition holds, so this only bounds a failing test
DEFAULT_TIMEOUT = 30.0
#: seconds between two checks
DEFAULT_INTERVAL = 0.02


def _failure(what: str, timeout: float, last: object, error: BaseException | None
             ) -> AssertionError:
    seen = f"last error: {error!r}" if error is not None else f"last value: {last!r}"
    return AssertionError(f"{what} not met within {timeout:g} s ({seen})"[:2000])


async def eventually(check: Callable[[], Awaitable[T] | T], *,
                     timeout: float = DEFAULT_TIMEOUT, interval: float = DEFAULT_INTERVAL,
                     what: str = "condition",
                     retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """Await ``check()`` (a plain or an async function) until its result is truthy; return
    that result. :class:`AssertionError` after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            result = check()
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, max(deadline - loop.time(), 0.001))
            last, error = result, None
            if result:
                return result  # type: ignore[return-value]
        except retry_on as e:
            error = e
        except TimeoutError as e:
            if loop.time() < deadline:
                raise
            error = e
        if loop.time() >= deadline:
            raise _failure(what, timeout, last, error)
        await asyncio.sleep(interval)


def eventually_blocking(check: Callable[[], T], *, timeout: float = DEFAULT_TIMEOUT,
                        interval: float = 0.05, what: str = "condition",
                        retry_on: tuple[type[BaseException], ...] = ()) -> T:
    """Call ``check()`` until its result is truthy, sleeping ``interval`` between calls;
    return that result. :class:`AssertionError` after ``timeout`` seconds. For threads and
    synchronous tests only (it blocks)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    error: BaseException | None = None
    while True:
        try:
            last, error = check(), None
            if last:
                return last  # type: ignore[no-any-return]
        except retry_on as e:
            error = e
        if time.monotonic() >= deadline:
            raise _failure(what, timeout, last, error)
        time.sleep(interval)
