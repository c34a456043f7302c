"""Requests and results: keys, validation, the function adapter."""

from __future__ import annotations

import pytest

from setpoint.runtime.reconcile import (
    FuncReconciler,
    Reconciler,
    Request,
    Result,
    as_result,
)


def test_request_keys() -> None:
    assert Request("ns", "a").key == "ns/a"
    assert Request("", "node").key == "node"
    assert Request.from_key("ns/a") == Request("ns", "a")
    assert Request.from_key("node") == Request("", "node")
    assert Request.for_object({"metadata": {"name": "a", "namespace": "ns"}}) == Request("ns",
                                                                                         "a")
    assert len({Request("ns", "a"), Request("ns", "a")}) == 1
    assert sorted([Request("b", "a"), Request("a", "b")])[0] == Request("a", "b")
    with pytest.raises(ValueError, match="name"):
        Request.for_object({"metadata": {}})


def test_results() -> None:
    assert Result.done() == Result()
    assert Result.after(5).requeue_after == 5
    with pytest.raises(ValueError, match="positive"):
        Result(requeue_after=0)
    with pytest.raises(ValueError, match="exclude"):
        Result(requeue=True, requeue_after=1)
    assert as_result(None) == Result.done()
    with pytest.raises(TypeError, match="str"):
        as_result("done")


async def test_func_reconciler() -> None:
    seen: list[Request] = []

    async def func(request: Request) -> Result | None:
        seen.append(request)
        return None if request.name == "a" else Result.after(1)

    reconciler = FuncReconciler(func)
    assert isinstance(reconciler, Reconciler)
    assert await reconciler.reconcile(Request("ns", "a")) == Result.done()
    assert await reconciler.reconcile(Request("ns", "b")) == Result.after(1)
    assert seen == [Request("ns", "a"), Request("ns", "b")]
