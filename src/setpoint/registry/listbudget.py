"""Concurrent LISTs bounded by the memory their responses take.

A LIST holds every object it returns and then their encoded response (plus what the HTTP
layer buffers while sending it), so many large LISTs at once can take far more memory than
the objects themselves. Each LIST first *reserves* its estimated response size (the stored
bytes of the objects it may return, see :func:`estimate`) from one budget and holds it until
its response has been handed to the connection. Kubernetes bounds the same work with
``--max-requests-inflight`` and API Priority and Fairness, which charges a LIST by the number
of objects it may read; this is that idea in a simple form, measured in bytes.

Rules:

* A LIST estimated at most ``small`` bytes never waits: small reads stay responsive.
* Otherwise it runs at once if nobody is waiting and its reservation fits what is free;
  else it waits its turn (first come, first served). A reservation larger than the whole
  budget is cut to the budget, so it runs alone rather than never.
* It is refused with 429 ``TooManyRequests`` and ``Retry-After`` (Kubernetes' answer to an
  overloaded server, which its clients retry) when the reservations already waiting plus its
  own exceed the budget (the wait would be longer than the LISTs running now take), or when
  it has waited ``max_wait`` seconds.

Invariants: the bytes reserved by running LISTs never exceed ``max_bytes`` (small ones not
counted); bytes waiting never exceed ``max_bytes``; a reservation is released exactly once,
whether the LIST succeeded, failed or was cancelled.

Non-guarantees: the estimate is of stored bytes; the memory a LIST really takes is a small
multiple of it (decoded objects are shared with the watch cache, so it is mostly the encoded
response and its copies on the way to the socket). A client that reads its response slowly
holds its reservation until the response has been handed over.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from setpoint.apimachinery import errors

MiB: Final = 1024 * 1024
DEFAULT_MAX_BYTES: Final = 128 * MiB
DEFAULT_SMALL: Final = 256 * 1024

#: what Kubernetes answers when it sheds load
TOO_MANY_REQUESTS: Final = "Too many requests, please try again later."
RETRY_AFTER_SECONDS: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListBudgetConfig:
    """The budget: ``max_bytes`` of estimated responses at once, ``max_wait`` seconds of
    waiting at most, and the ``small`` LISTs that never wait."""

    max_bytes: int = DEFAULT_MAX_BYTES
    max_wait: float = 5.0
    small: int = DEFAULT_SMALL

    def __post_init__(self) -> None:
        if self.max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {self.max_bytes}")
        if not 0 < self.max_wait <= 60:
            raise ValueError(f"max_wait must be in (0, 60] seconds, got {self.max_wait}")
        if not 0 <= self.small <= self.max_bytes:
            raise ValueError(f"small must be between 0 and max_bytes, got {self.small}")


def estimate(objects: int, stored_bytes: int, limit: int = 0) -> int:
    """The response size of a LIST over ``objects`` objects of ``stored_bytes`` in all:
    all of them, or ``limit``'s share (a page of a paginated LIST)."""
    if limit and 0 < limit < objects:
        return stored_bytes * limit // objects
    return stored_bytes


class _Waiter:
    __slots__ = ("future", "granted", "queued", "weight")

    def __init__(self, weight: int, future: asyncio.Future[None]) -> None:
        self.weight = weight
        self.future = future
        self.queued = True
        self.granted = False


class ListBudget:
    """Reservations of response bytes; see the module docstring."""

    def __init__(self, config: ListBudgetConfig | None = None) -> None:
        self.config = config or ListBudgetConfig()
        self._free = self.config.max_bytes
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._waiting_bytes = 0
        #: LISTs refused so far (informational)
        self.rejected = 0

    @property
    def reserved(self) -> int:
        """Bytes reserved by the LISTs running now."""
        return self.config.max_bytes - self._free

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @contextlib.asynccontextmanager
    async def reserve(self, estimated: int) -> AsyncIterator[None]:
        """Hold ``estimated`` bytes of the budget for the body of the ``async with``.

        Raises :class:`~setpoint.apimachinery.errors.TooManyRequests` (429, Retry-After)
        when the LIST may not run now and should be retried later.
        """
        config = self.config
        if estimated <= config.small:
            yield
            return
        weight = min(estimated, config.max_bytes)
        if not self._waiters and weight <= self._free:
            self._free -= weight
        else:
            await self._wait(weight)
        try:
            yield
        finally:
            self._free += weight
            self._grant()

    async def _wait(self, weight: int) -> None:
        if self._waiting_bytes + weight > self.config.max_bytes:
            raise self._refusal()
        waiter = _Waiter(weight, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        self._waiting_bytes += weight
        try:
            async with asyncio.timeout(self.config.max_wait):
                await waiter.future
        except BaseException as e:
            if waiter.granted:
                # granted just as the wait ended: give the bytes back to the next in line
                self._free += weight
            elif waiter.queued:
                waiter.queued = False
                self._waiters.remove(waiter)
                self._waiting_bytes -= weight
            self._grant()  # the head of the line may fit now
            if isinstance(e, TimeoutError):
                raise self._refusal() from None
            raise

    def _grant(self) -> None:
        while self._waiters and self._waiters[0].weight <= self._free:
            waiter = self._waiters.popleft()
            waiter.queued = False
            self._waiting_bytes -= waiter.weight
            if waiter.future.done():
                continue  # its LIST was cancelled meanwhile; it cleans up after itself
            self._free -= waiter.weight
            waiter.granted = True
            waiter.future.set_result(None)

    def _refusal(self) -> errors.TooManyRequests:
        self.rejected += 1
        return errors.TooManyRequests(TOO_MANY_REQUESTS, retry_after=RETRY_AFTER_SECONDS)
