"""Rate limiters: client-go's exponential backoff, token bucket and their max."""

from __future__ import annotations

import pytest

from setpoint.runtime import ratelimit
from setpoint.runtime.clock import FakeAsyncClock


def test_exponential_backoff_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter: ratelimit.ItemExponentialBackoff[str] = ratelimit.ItemExponentialBackoff()
    delays = [limiter.when("a") for _ in range(25)]
    for n, delay in enumerate(delays):
        assert delay == pytest.approx(min(0.005 * 2**n, 1000.0)), n
    assert delays[17] == pytest.approx(655.36)  # the last one below the cap
    assert delays[18] == 1000.0
    assert limiter.num_requeues("a") == 25


def test_exponential_backoff_is_per_key_and_forget_resets() -> None:
    limiter: ratelimit.ItemExponentialBackoff[str] = ratelimit.ItemExponentialBackoff()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.when("a") == pytest.approx(0.02)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


def test_exponential_backoff_survives_very_many_failures() -> None:
    limiter: ratelimit.ItemExponentialBackoff[str] = ratelimit.ItemExponentialBackoff(1.0, 5.0)
    for _ in range(2000):
        assert limiter.when("a") <= 5.0


@pytest.mark.parametrize(("base", "cap"), [(0, 1), (-1, 1), (2, 1)])
def test_exponential_backoff_rejects_bad_bounds(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="base_delay"):
        ratelimit.ItemExponentialBackoff(base, cap)


def test_token_bucket_allows_a_burst_of_100_then_10_per_second(clock: FakeAsyncClock) -> None:
    bucket = ratelimit.TokenBucket(clock)
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("x") == pytest.approx(0.1)
    assert bucket.when("y") == pytest.approx(0.2)  # booked behind the previous one
    clock.advance(0.2)  # both booked tokens are now paid for
    assert bucket.when("z") == pytest.approx(0.1)
    clock.advance(60)  # refills, but never beyond the burst
    assert [bucket.when(i) for i in range(100)] == [0.0] * 100
    assert bucket.when("w") == pytest.approx(0.1)
    assert bucket.num_requeues("w") == 0


def test_token_bucket_rejects_bad_settings(clock: FakeAsyncClock) -> None:
    with pytest.raises(ValueError, match="rate"):
        ratelimit.TokenBucket(clock, rate=0)
    with pytest.raises(ValueError, match="burst"):
        ratelimit.TokenBucket(clock, burst=0)


def test_default_controller_limiter_is_the_max_of_both(clock: FakeAsyncClock) -> None:
    limiter: ratelimit.MaxOf[str] = ratelimit.default_controller_rate_limiter(clock)
    # one key failing: the per-key backoff dominates
    assert [limiter.when("a") for _ in range(3)] == pytest.approx([0.005, 0.01, 0.02])
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    # many keys failing once each: the bucket (3 tokens spent above) dominates after 100
    delays = [limiter.when(f"k{i}") for i in range(97)]
    assert max(delays) == pytest.approx(0.005)
    assert limiter.when("k97") == pytest.approx(0.1)


def test_max_of_needs_a_limiter() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ratelimit.MaxOf()
