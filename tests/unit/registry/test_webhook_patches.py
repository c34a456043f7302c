"""A mutating webhook's JSON patch as the server applies it: within ``patch.json_patch``'s
bounds, and a patch that does not apply (or nests the object deeper than can be walked) is
a 500 ``Internal error occurred``, never another exception."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors, patch
from setpoint.registry import webhooks


def doubling_copies(times: int) -> list[dict[str, Any]]:
    """Each copy puts the whole of ``/x`` at its own deepest point: the depth doubles."""
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": {"a": {}}}]
    ops += [{"op": "copy", "from": "/x", "path": "/x" + "/a" * (2 ** k)}
            for k in range(times)]
    return ops


def test_a_patch_nesting_the_object_too_deep_to_walk_is_an_internal_error() -> None:
    obj = {"metadata": {"name": "n"}}
    with pytest.raises(errors.ApiError) as caught:
        webhooks.apply_patch(obj, doubling_copies(15))
    assert caught.value.code == 500
    assert caught.value.reason == "InternalError"
    assert str(caught.value) == ("Internal error occurred: the patched object nests deeper "
                                 "than 128 levels")
    assert obj == {"metadata": {"name": "n"}}


def test_a_few_doubling_copies_apply() -> None:
    got = webhooks.apply_patch({}, doubling_copies(3))
    depth = 0
    node: Any = got["x"]
    while node:
        node, depth = node["a"], depth + 1
    assert depth == 2 ** 3


def test_copies_are_bounded_as_kubernetes_bounds_them() -> None:
    big = "v" * (patch.MAX_COPY_BYTES // 4)
    ops = [{"op": "add", "path": "/big", "value": big}]
    ops += [{"op": "copy", "from": "/big", "path": f"/c{i}"} for i in range(8)]
    with pytest.raises(errors.ApiError) as caught:
        webhooks.apply_patch({}, ops)
    assert caught.value.code == 500
    assert str(caught.value) == ("Internal error occurred: the copy operations of the patch "
                                 f"add more than {patch.MAX_COPY_BYTES} bytes")


@pytest.mark.parametrize(("ops", "message"), [
    ([{"op": "remove", "path": "/missing"}], "Internal error occurred: "),
    ([{"op": "replace", "path": "", "value": []}],
     "Internal error occurred: the patched object is not a JSON object"),
])
def test_a_patch_that_does_not_apply_is_an_internal_error(ops: list[Any], message: str
                                                          ) -> None:
    with pytest.raises(errors.ApiError) as caught:
        webhooks.apply_patch({"a": 1}, ops)
    assert caught.value.code == 500
    assert str(caught.value).startswith(message)
