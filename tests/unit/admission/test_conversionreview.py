"""ConversionReview answers: random ones parse or are refused with InvalidResponse only; a
converted object that passes keeps the original's identity and metadata (labels and
annotations excepted); Kubernetes' messages for the rules webhook_converter.go enforces."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.admission import conversionreview as cr

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)

ORIGINAL: dict[str, Any] = {
    "apiVersion": "conv.example.com/v2", "kind": "Gadget",
    "metadata": {"name": "g", "namespace": "default", "uid": "u-1", "generation": 2,
                 "resourceVersion": "7", "labels": {"a": "1"},
                 "annotations": {"note": "kept"}},
    "spec": {"replicas": 3},
}
DESIRED = "conv.example.com/v1"

metadata = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["g", "other"]) | json_values,
    "namespace": st.sampled_from(["default", "x"]) | json_values,
    "uid": st.sampled_from(["u-1", "u-2"]) | json_values,
    "generation": json_values,
    "labels": json_values | st.dictionaries(
        st.sampled_from(["a", "b", "bad key", "x/y"]),
        st.sampled_from(["1", "2", "-bad"]) | json_values, max_size=3),
    "annotations": json_values | st.dictionaries(st.text(max_size=6), st.text(max_size=6),
                                                 max_size=3),
})

converted_objects = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={
        "apiVersion": st.sampled_from([DESIRED, "conv.example.com/v2"]) | json_values,
        "kind": st.sampled_from(["Gadget", "Other"]) | json_values,
        "metadata": metadata | json_values,
        "spec": json_values,
    }),
)

responses = st.fixed_dictionaries({}, optional={
    "uid": st.sampled_from(["r", "other"]) | json_values,
    "result": json_values | st.fixed_dictionaries({}, optional={
        "status": st.sampled_from(["Success", "Failure"]) | json_values,
        "message": json_values}),
    "convertedObjects": json_values | st.lists(converted_objects, max_size=3),
})

answers = st.one_of(
    st.binary(max_size=200),
    responses.map(lambda r: orjson.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": r})),
    json_values.map(orjson.dumps),
)


@settings(max_examples=400, deadline=None)
@given(answers)
def test_any_answer_parses_or_is_invalid(body: bytes) -> None:
    try:
        items = cr.parse_response(body, "v1", "r")
    except cr.InvalidResponse as e:
        message = str(e)
        assert message
        return
    assert isinstance(items, list)


@settings(max_examples=600, deadline=None)
@given(converted_objects)
def test_a_converted_object_is_checked_and_keeps_the_original_metadata(item: Any) -> None:
    original = copy.deepcopy(ORIGINAL)
    try:
        out = cr.check_converted(original, copy.deepcopy(item), DESIRED, 0)
    except cr.InvalidResponse as e:
        message = str(e)
        assert message.startswith("returned ")
        assert original == ORIGINAL  # never changed
        return
    assert original == ORIGINAL
    assert out["apiVersion"] == DESIRED
    assert out["kind"] == "Gadget"
    meta = out["metadata"]
    for key in ("name", "namespace", "uid", "generation", "resourceVersion"):
        assert meta[key] == ORIGINAL["metadata"][key]
    for key in ("labels", "annotations"):
        assert meta.get(key) == item["metadata"].get(key)
        assert all(isinstance(v, str) for v in (meta.get(key) or {}).values())
    assert meta is not original["metadata"]


def test_a_review_names_the_desired_version_and_carries_the_objects() -> None:
    body = orjson.loads(cr.review("v1beta1", "r", DESIRED, [ORIGINAL]))
    assert body == {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview",
                    "request": {"uid": "r", "desiredAPIVersion": DESIRED,
                                "objects": [ORIGINAL]}}


@pytest.mark.parametrize(("listed", "chosen"), [
    (["v1", "v1beta1"], "v1"), (["v2", "v1beta1"], "v1beta1"), (["v2"], None), ([], None)])
def test_the_first_review_version_spoken_is_chosen(listed: list[str],
                                                   chosen: str | None) -> None:
    assert cr.choose_version(listed) == chosen


def _answer(**response: Any) -> bytes:
    return orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                         "response": response})


@pytest.mark.parametrize(("body", "message"), [
    (_answer(uid="x", result={"status": "Success"}), 'expected response.uid="r", got "x"'),
    (_answer(uid="r", result={"status": "Failure"}),
     "response.result.status was 'Failure', not 'Success'"),
    (_answer(uid="r", result={"status": "Failure", "message": "no way"}), "no way"),
    (_answer(uid="r"), "response.result.status was '', not 'Success'"),
    (orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "ConversionReview"}),
     "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got "
     "apiextensions.k8s.io/v1beta1, Kind=ConversionReview"),
    (orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}),
     "no response provided"),
])
def test_kubernetes_messages_for_bad_answers(body: bytes, message: str) -> None:
    with pytest.raises(cr.InvalidResponse) as caught:
        cr.parse_response(body, "v1", "r")
    assert str(caught.value) == message


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "Other"}, "returned invalid converted object at index 0: invalid kind "
                        "(expected Gadget, received Other)"),
    ({"apiVersion": "conv.example.com/v3"},
     "returned invalid converted object at index 0: invalid groupVersion (expected "
     "conv.example.com/v1, received conv.example.com/v3)"),
    ({"metadata": {"name": "g", "namespace": "default", "uid": "u-2"}},
     "returned invalid converted object: must have the same UID: u-1 != u-2"),
    ({"metadata": {"name": "g", "namespace": "other", "uid": "u-1"}},
     "returned invalid converted object: must have the same namespace: default != other"),
    ({"metadata": {"name": "g", "namespace": "default", "uid": "u-1", "labels": {"a": 1}}},
     "returned invalid metadata in object at index 0: metadata.labels[a] must be a string, "
     "but is int64 in converted object"),
    ({"metadata": {"name": "g", "namespace": "default", "uid": "u-1", "labels": []}},
     "returned invalid metadata in object at index 0: invalid metadata.labels of type "
     "[]interface {} in converted object"),
])
def test_kubernetes_messages_for_bad_objects(change: dict[str, Any], message: str) -> None:
    item = {**copy.deepcopy(ORIGINAL), "apiVersion": DESIRED, **change}
    with pytest.raises(cr.InvalidResponse) as caught:
        cr.check_converted(copy.deepcopy(ORIGINAL), item, DESIRED, 0)
    assert str(caught.value) == message
