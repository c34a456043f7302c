"""Health check listings in kube-apiserver's format."""

from __future__ import annotations

import asyncio

import pytest

from setpoint.server.health import HealthChecks

OK_BODY = "[+]ping ok\n[+]etcd ok\n[+]informer-sync ok\nreadyz check passed\n"


def registry(failing: set[str] | None = None) -> HealthChecks:
    failing = failing if failing is not None else set()
    checks = HealthChecks(timeout=0.2)

    def check(name: str):  # type: ignore[no-untyped-def]
        async def run() -> None:
            if name in failing:
                raise RuntimeError(f"{name} is down")
        return run

    checks.add("etcd", check("etcd"), livez=True)
    checks.add("informer-sync", check("informer-sync"))
    return checks


async def answer(checks: HealthChecks, endpoint: str, name: str = "", verbose: bool = False,
                 excluded: tuple[str, ...] = ()) -> tuple[int, str]:
    response = await checks.respond(endpoint, name, verbose, excluded)
    assert response.body is not None
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"
    return response.status, bytes(response.body).decode()  # type: ignore[arg-type]


async def test_passing() -> None:
    checks = registry()
    assert await answer(checks, "readyz") == (200, "ok")
    assert await answer(checks, "readyz", verbose=True) == (200, OK_BODY)
    assert await answer(checks, "livez", verbose=True) == (
        200, "[+]ping ok\n[+]etcd ok\nlivez check passed\n")
    assert await answer(checks, "healthz", verbose=True) == (
        200, "[+]ping ok\n[+]etcd ok\nhealthz check passed\n")


async def test_failing_is_always_verbose_and_withholds_the_reason() -> None:
    checks = registry({"etcd"})
    expected = ("[+]ping ok\n[-]etcd failed: reason withheld\n[+]informer-sync ok\n"
                "readyz check failed\n")
    assert await answer(checks, "readyz") == (503, expected)
    assert await answer(checks, "readyz", verbose=True) == (503, expected)
    assert await answer(checks, "readyz", "etcd") == (
        503, "internal server error: etcd is down\n")
    assert await answer(checks, "readyz", "informer-sync") == (200, "ok")
    assert await answer(checks, "livez", "informer-sync") == (404, "404 page not found\n")


async def test_exclusions() -> None:
    checks = registry({"etcd"})
    assert await answer(checks, "readyz", excluded=("etcd",)) == (200, "ok")
    assert await answer(checks, "readyz", verbose=True, excluded=("etcd", "nope")) == (
        200, "[+]ping ok\n[+]etcd excluded: ok\n[+]informer-sync ok\n"
             'warn: some health checks cannot be excluded: no matches for "nope"\n'
             "readyz check passed\n")


async def test_a_check_that_hangs_fails_after_the_timeout() -> None:
    checks = HealthChecks(timeout=0.05)

    async def hang() -> None:
        await asyncio.Event().wait()

    checks.add("stuck", hang)
    status, body = await answer(checks, "readyz", "stuck")
    assert (status, body) == (503, "internal server error: did not answer within 0.05s\n")


def test_names_are_unique_and_checks_go_somewhere() -> None:
    checks = registry()

    async def fine() -> None:
        pass

    with pytest.raises(ValueError, match="duplicate"):
        checks.add("etcd", fine)
    with pytest.raises(ValueError, match="duplicate"):
        checks.add("a?b", fine)
    with pytest.raises(ValueError, match="livez, /readyz or both"):
        checks.add("nowhere", fine, livez=False, readyz=False)
