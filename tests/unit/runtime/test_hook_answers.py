"""The answer of an operator's admission hook to any body: a review answered for its uid,
anything else refused with 400, never an unhandled error; a mutate hook's object becomes a
JSONPatch that turns what was sent into it."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery.patch import json_patch
from setpoint.runtime.hooks import AdmissionRequest, Hooks, _Admission, _admit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4), max_leaves=15)
request_fields = st.fixed_dictionaries({}, optional={
    "uid": st.text(max_size=8) | json_values, "operation": json_values,
    "kind": json_values, "resource": json_values, "userInfo": json_values,
    "object": json_values, "oldObject": json_values, "name": json_values,
    "namespace": json_values, "dryRun": json_values})


def _hook(mutating: bool) -> _Admission:
    def func(req: AdmissionRequest) -> Any:
        if mutating and req.object is not None:
            req.object["added"] = {"by": "hook"}
            return req.object
        return None
    return _Admission("h", func, ("v1", "ConfigMap"), ("CREATE",), "Fail", 10, mutating)


async def _answer(hook: _Admission, body: bytes) -> tuple[int, Any]:
    response = await _admit(hook, body)
    assert response.body is not None
    raw = response.body if isinstance(response.body, bytes) else b""
    return response.status, orjson.loads(raw) if response.status == 200 else None


@settings(max_examples=150, deadline=None)
@given(st.booleans(), st.one_of(
    st.binary(max_size=40),
    json_values.map(orjson.dumps),
    request_fields.map(lambda r: orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                                               "kind": "AdmissionReview", "request": r}))))
def test_any_body_gets_an_answer(mutating: bool, body: bytes) -> None:
    status, answer = asyncio.run(_answer(_hook(mutating), body))
    assert status in (200, 400)
    if status == 200:
        request = orjson.loads(body)["request"]
        assert answer["response"]["uid"] == request["uid"]
        assert answer["response"]["allowed"] is True
        if "patch" in answer["response"]:
            patch = orjson.loads(base64.b64decode(answer["response"]["patch"]))
            assert json_patch(request["object"], patch)["added"] == {"by": "hook"}


def test_hooks_in_finds_each_once() -> None:
    from setpoint.runtime import hooks_in
    a, b = Hooks("a"), Hooks("b")
    assert hooks_in({"a": a, "b": b, "again": a, "other": 1}) == [a, b]
