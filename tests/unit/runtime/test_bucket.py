"""The token bucket every runtime rate limit uses: its invariants under any sequence of
calls (hypothesis), and the exact arithmetic of each call."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from setpoint.runtime.bucket import Bucket

_rates = st.floats(min_value=0.01, max_value=1000, allow_nan=False)
_bursts = st.integers(min_value=1, max_value=1000)
_steps = st.lists(st.tuples(st.sampled_from(["take", "book", "give_back", "refill", "resize"]),
                            st.floats(min_value=-5, max_value=50, allow_nan=False),
                            st.floats(min_value=0.01, max_value=100, allow_nan=False)),
                  max_size=60)


@given(_rates, _bursts, _steps)
def test_tokens_never_pass_the_burst_and_time_never_runs_back(
        rate: float, burst: int, steps: list[tuple[str, float, float]]) -> None:
    bucket = Bucket.full(rate, burst, 0.0)
    now = 0.0
    booked = False
    for op, delta, value in steps:
        now += delta  # a caller's now may even be earlier than the bucket's
        at_before, tokens_before = bucket.at, bucket.tokens
        if op == "take":
            before = bucket.refill(now)
            taken = bucket.take(now)
            assert taken == (before >= 1.0)
            assert bucket.tokens == (before - 1.0 if taken else before)
        elif op == "book":
            wait = bucket.book(now)
            booked = True
            assert wait >= 0
            assert math.isclose(wait, max(0.0, -bucket.tokens / bucket.rate))
        elif op == "give_back":
            bucket.give_back(value)
        elif op == "resize":
            bucket.refill(now)
            bucket.resize(value, max(1, int(value)))
        else:
            bucket.refill(now)
            if now <= at_before:
                assert bucket.tokens == tokens_before
        assert bucket.at >= at_before
        assert bucket.tokens <= bucket.burst
        if not booked:
            assert bucket.tokens >= 0


def test_refill_take_and_wait_arithmetic() -> None:
    bucket = Bucket.full(2.0, 3, now=10.0)
    assert [bucket.take(10.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.seconds_until(1.0) == 0.5
    assert not bucket.take(10.4)  # 0.8 tokens
    assert bucket.take(10.4, epsilon=0.25)  # float rounding forgiven
    assert math.isclose(bucket.tokens, -0.2)
    assert bucket.refill(100.0) == 3.0  # never above the burst
    bucket.give_back(5)
    assert bucket.tokens == 3.0


def test_booking_lends_from_the_future() -> None:
    bucket = Bucket.full(10.0, 1, now=0.0)
    assert bucket.book(0.0) == 0.0
    assert bucket.book(0.0) == 0.1
    assert math.isclose(bucket.book(0.0), 0.2)
    assert math.isclose(bucket.book(0.25), 0.05)  # 1 + 2.5 tokens for 4 booked


def test_a_smaller_bucket_loses_what_is_above_its_size() -> None:
    bucket = Bucket.full(1.0, 10, now=0.0)
    bucket.resize(0.5, 4)
    assert (bucket.rate, bucket.burst, bucket.tokens) == (0.5, 4.0, 4.0)
    bucket.take(0.0, 4)
    assert bucket.refill(2.0) == 1.0  # earned at the new rate
