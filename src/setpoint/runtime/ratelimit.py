"""Rate limiters: how long a key that failed waits before it is handed out again.

A :class:`RateLimiter` answers ``when(key)`` (the delay for this retry, which also counts the
retry), ``forget(key)`` (the key succeeded: start over) and ``num_requeues(key)``. The
defaults are client-go's:

- :class:`ItemExponentialBackoff`: ``base · 2^n`` for the key's n-th consecutive failure,
  capped (5 ms → 1000 s by default: 5 ms, 10 ms, 20 ms, …, reaching the cap after 18
  failures).
- :class:`TokenBucket`: one token per retry from a bucket refilled at ``rate`` per second and
  holding at most ``burst``; a retry that finds the bucket empty is scheduled for when its
  token will exist (tokens may be borrowed from the future, as Go's ``rate.Limiter.Reserve``).
  It bounds the overall retry rate of a controller, whatever the number of failing keys.
- :class:`MaxOf`: the longest of several delays. :func:`default_controller_rate_limiter` is
  ``MaxOf(ItemExponentialBackoff(5 ms, 1000 s), TokenBucket(10/s, burst 100))``.

Invariants: delays are never negative; per-key state exists only for keys that have failed
and not been forgotten. The bucket reads time only from the injected clock.

Non-guarantees: the bucket's token is consumed even when another limiter's delay is longer
(as in client-go), and it is shared by all keys, so a storm of failures delays retries of
unrelated keys. Per-key failure counts grow until ``forget``: a caller that never forgets
keeps one counter per key that ever failed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol, TypeVar

from setpoint.apimachinery import clock as base
from setpoint.runtime.bucket import Bucket

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

#: client-go's DefaultControllerRateLimiter values
DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_RATE = 10.0
DEFAULT_BURST = 100


class RateLimiter(Protocol[K_contra]):
    def when(self, key: K_contra) -> float:
        """Seconds to wait before retrying ``key``; records one more failure of it."""

    def forget(self, key: K_contra) -> None:
        """``key`` succeeded: its next failure starts from the shortest delay."""

    def num_requeues(self, key: K_contra) -> int:
        """Failures recorded for ``key`` since it was last forgotten."""


class ItemExponentialBackoff(RateLimiter[K]):
    """``base · 2^failures`` per key, capped at ``cap`` seconds."""

    def __init__(self, base_delay: float = DEFAULT_BASE_DELAY,
                 cap: float = DEFAULT_MAX_DELAY) -> None:
        if base_delay <= 0 or cap < base_delay:
            raise ValueError("need 0 < base_delay <= cap")
        self._base = base_delay
        self._cap = cap
        self._failures: dict[K, int] = {}

    def when(self, key: K) -> float:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        if n >= 64:  # 2^64 · base is beyond any cap; also avoids float overflow
            return self._cap
        return min(self._base * 2.0 ** n, self._cap)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)


class TokenBucket(RateLimiter[Hashable]):
    """An overall limit of ``rate`` retries per second with bursts of ``burst``."""

    def __init__(self, clock: base.Clock, rate: float = DEFAULT_RATE,
                 burst: int = DEFAULT_BURST) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("need rate > 0 and burst >= 1")
        self._clock = clock
        # negative when retries are booked ahead
        self._bucket = Bucket.full(rate, burst, clock.monotonic())

    def when(self, key: Hashable) -> float:
        return self._bucket.book(self._clock.monotonic())

    def forget(self, key: Hashable) -> None:
        """Nothing to forget: the bucket is not per key."""

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOf(RateLimiter[K]):
    """The longest delay of ``limiters``; every limiter records every failure."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one limiter")
        self._limiters = limiters

    def when(self, key: K) -> float:
        return max([limiter.when(key) for limiter in self._limiters])

    def forget(self, key: K) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return max(limiter.num_requeues(key) for limiter in self._limiters)


def default_controller_rate_limiter(clock: base.Clock) -> MaxOf[K]:
    """client-go's DefaultControllerRateLimiter: max(5 ms·2^n ≤ 1000 s, 10/s burst 100)."""
    return MaxOf(ItemExponentialBackoff(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
                 TokenBucket(clock, DEFAULT_RATE, DEFAULT_BURST))
