"""Limits: their validation, how requests are classified, and the in-flight counter."""

from __future__ import annotations

import pytest

from setpoint.server import limits
from setpoint.server.limits import InflightLimiter, Kind, Limits
from setpoint.server.request_info import parse


def test_defaults_are_kubernetes() -> None:
    defaults = Limits()
    assert defaults.max_body_bytes == 3 * 1024 * 1024
    assert defaults.max_requests_inflight == 400
    assert defaults.max_mutating_requests_inflight == 200
    assert defaults.header_timeout == 32
    assert defaults.idle_timeout == 90
    assert defaults.body_timeout == 60
    assert defaults.retry_after == 1


@pytest.mark.parametrize("changes", [
    {"max_requests_inflight": 0}, {"max_mutating_requests_inflight": -1},
    {"max_connections": 0}, {"max_body_bytes": 10}, {"max_body_bytes": 2 ** 31},
    {"header_timeout": 0}, {"body_timeout": -1}, {"idle_timeout": 1e9},
    {"retry_after": 0}, {"max_requests_inflight": 10 ** 9}])
def test_unbounded_or_nonsense_values_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        Limits(**changes)  # type: ignore[arg-type]


CM = "/api/v1/namespaces/default/configmaps"


@pytest.mark.parametrize(("method", "path", "watch", "kind"), [
    ("GET", CM, None, Kind.READ_ONLY),
    ("GET", CM + "/x", None, Kind.READ_ONLY),
    ("HEAD", CM, None, Kind.READ_ONLY),
    ("GET", CM, "true", Kind.LONG_RUNNING),
    ("GET", CM, "1", Kind.LONG_RUNNING),
    ("GET", CM, "", Kind.LONG_RUNNING),
    ("GET", CM, "yes", Kind.LONG_RUNNING),  # refused by the handler at once
    ("GET", CM, "false", Kind.READ_ONLY),
    ("GET", CM, "0", Kind.READ_ONLY),
    ("GET", CM + "/x", "true", Kind.READ_ONLY),  # a named GET is a GET
    ("GET", "/api/v1/namespaces/default/pods/p/log", None, Kind.LONG_RUNNING),
    ("POST", "/api/v1/namespaces/default/pods/p/exec", None, Kind.LONG_RUNNING),
    ("POST", CM, None, Kind.MUTATING),
    ("PUT", CM + "/x", None, Kind.MUTATING),
    ("PATCH", CM + "/x", None, Kind.MUTATING),
    ("DELETE", CM, None, Kind.MUTATING),
    ("GET", "/apis", None, Kind.READ_ONLY),
    ("GET", "/version", None, Kind.READ_ONLY),
    ("POST", "/version", None, Kind.MUTATING),
    ("GET", "/readyz", None, Kind.EXEMPT),
    ("GET", "/livez/etcd", None, Kind.EXEMPT),
    ("GET", "/healthz", None, Kind.EXEMPT),
    ("GET", "/metrics", None, Kind.EXEMPT),
])
def test_classify(method: str, path: str, watch: str | None, kind: Kind) -> None:
    assert limits.classify(method, path, parse(path), watch) is kind


def test_the_limiter_counts_each_kind_separately() -> None:
    limiter = InflightLimiter(Limits(max_requests_inflight=2, max_mutating_requests_inflight=1))
    assert limiter.try_acquire(Kind.MUTATING)
    assert not limiter.try_acquire(Kind.MUTATING)
    assert limiter.try_acquire(Kind.READ_ONLY)
    assert limiter.try_acquire(Kind.READ_ONLY)
    assert not limiter.try_acquire(Kind.READ_ONLY)
    assert (limiter.in_flight(Kind.READ_ONLY), limiter.in_flight(Kind.MUTATING)) == (2, 1)
    limiter.release(Kind.MUTATING)
    assert limiter.try_acquire(Kind.MUTATING)
    assert limiter.limit(Kind.READ_ONLY) == 2


def test_too_many_requests_is_kubernetes_message_with_retry_after() -> None:
    status = limits.too_many_requests(1).status()
    assert status["code"] == 429
    assert status["reason"] == "TooManyRequests"
    assert status["message"] == "Too many requests, please try again later."
    assert status["details"] == {"retryAfterSeconds": 1}
