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


def test_the_hook_names_are_imported_on_first_use() -> None:
    import subprocess
    import sys

    code = ("import sys, setpoint.runtime as r\n"
            "assert 'setpoint.runtime.hooks' not in sys.modules\n"
            "assert 'setpoint.runtime.conversion' not in sys.modules\n"
            "from setpoint.runtime import Hooks, ConversionWebhook, hooks_in\n"
            "from setpoint.runtime import hooks, conversion\n"
            "assert Hooks is hooks.Hooks and hooks_in is hooks.hooks_in\n"
            "assert ConversionWebhook is conversion.ConversionWebhook\n"
            "assert set(r.__all__) <= set(dir(r)) | set(r._LAZY)\n"
            "try:\n    r.NoSuchName\nexcept AttributeError:\n    print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.stdout == "ok\n", done.stderr
