"""Random webhook answers and configurations: parsing a response raises nothing but
InvalidResponse, validating a configuration never raises."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.admission import review, webhookconfig
from setpoint.apimachinery import validation

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=20)

response_fields = st.fixed_dictionaries({}, optional={
    "uid": st.sampled_from(["u", "other", ""]) | json_values,
    "allowed": st.booleans() | json_values,
    "status": json_values | st.fixed_dictionaries({}, optional={
        "code": json_values, "message": json_values, "reason": json_values}),
    "patch": json_values | st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode())
    | json_values.map(lambda v: base64.b64encode(orjson.dumps(v)).decode()),
    "patchType": st.sampled_from(["JSONPatch", "", "Merge"]) | json_values,
    "warnings": json_values | st.lists(st.text(max_size=2000), max_size=40),
    "auditAnnotations": json_values,
})

answers = st.one_of(
    st.binary(max_size=200),
    response_fields.map(lambda r: orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})),
    json_values.map(orjson.dumps),
)


@settings(max_examples=400, deadline=None)
@given(answers, st.booleans())
def test_any_answer_parses_or_is_invalid(body: bytes, mutating: bool) -> None:
    try:
        got = review.parse_response(body, "u", mutating=mutating)
    except review.InvalidResponse as e:
        message = str(e)
        assert message
        return
    assert isinstance(got.allowed, bool)
    assert len(got.warnings) <= review.MAX_WARNINGS
    assert all("\n" not in w and len(w) <= review.MAX_WARNING_BYTES for w in got.warnings)
    assert got.patch is None or (mutating and isinstance(got.patch, list))


def test_the_checks_kubernetes_makes() -> None:
    def body(**response: Any) -> bytes:
        return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                             "response": {"uid": "u", "allowed": True, **response}})
    cases = [
        (body(uid="x"), True, 'expected response.uid="u", got "x"'),
        (body(patch="W10="), True, "webhook returned response.patch but not "
                                   "response.patchType"),
        (body(patch="W10=", patchType="JSONPatch"), False,
         "validating webhook may not return response.patch"),
        (b'{"apiVersion": "v1", "kind": "Status"}', True,
         "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got v1, "
         "Kind=Status"),
    ]
    for data, mutating, message in cases:
        with pytest.raises(review.InvalidResponse) as caught:
            review.parse_response(data, "u", mutating=mutating)
        assert str(caught.value) == message


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values | st.fixed_dictionaries({}, optional={
    "name": json_values | st.sampled_from(["a.b.c", "x"]), "clientConfig": json_values,
    "rules": json_values, "sideEffects": json_values, "timeoutSeconds": json_values,
    "admissionReviewVersions": json_values, "matchConditions": json_values,
    "namespaceSelector": json_values}), max_size=3), st.booleans())
def test_validating_any_configuration_never_raises(hooks: list[Any], mutating: bool) -> None:
    obj = {"webhooks": hooks}
    webhookconfig.default_configuration(obj, mutating=mutating)
    errs = webhookconfig.validate_configuration(obj, mutating=mutating)
    assert isinstance(errs, list)


def test_audit_annotation_keys_are_kept_only_as_kubernetes_keeps_them() -> None:
    annotations = {"ok": "v", "a/b": "slash", "k" * 64: "long key", "bad key": "space",
                   "-dash": "edge", "long": "v" * (review.MAX_ANNOTATION_BYTES + 1)}
    annotations.update({f"n{i}": "x" for i in range(100)})
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": "u", "allowed": True,
                                      "auditAnnotations": annotations}})
    got = review.parse_response(body, "u", mutating=False).annotations
    assert list(got)[:2] == ["ok", "long"]
    assert got["long"] == "v" * review.MAX_ANNOTATION_BYTES
    assert len(got) == review.MAX_ANNOTATIONS
    assert set(got) - {"ok", "long"} == {f"n{i}" for i in range(review.MAX_ANNOTATIONS - 2)}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=80), st.text(max_size=20), max_size=40))
def test_every_audit_annotation_kept_makes_a_qualified_key(annotations: dict[str, str]
                                                           ) -> None:
    body = orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": "u", "allowed": True,
                                      "auditAnnotations": annotations}})
    got = review.parse_response(body, "u", mutating=True).annotations
    assert len(got) <= review.MAX_ANNOTATIONS
    for key in got:
        assert validation.is_qualified_name(f"hook.example.com/{key}") == []


def answer(**response: Any) -> bytes:
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": "u", **response}})


@pytest.mark.parametrize(("body", "message"), [
    (answer(allowed="true"), "json: cannot unmarshal string into Go struct field "
                             "AdmissionResponse.response.allowed of type bool"),
    (answer(allowed=False, status="no"), "json: cannot unmarshal string into Go struct "
                                         "field AdmissionResponse.response.status of type "
                                         "v1.Status"),
    (answer(allowed=False, status={"message": {"a": "b"}}),
     "json: cannot unmarshal object into Go struct field Status.response.status.message of "
     "type string"),
    (answer(allowed=False, status={"code": "403"}),
     "json: cannot unmarshal string into Go struct field Status.response.status.code of "
     "type int32"),
    (answer(allowed=False, status={"code": 2**40}),
     "json: cannot unmarshal number 1099511627776 into Go struct field "
     "Status.response.status.code of type int32"),
    (answer(allowed=False, status={"reason": 7}),
     "json: cannot unmarshal number 7 into Go struct field Status.response.status.reason "
     "of type v1.StatusReason"),
    (answer(allowed=True, warnings="w"), "json: cannot unmarshal string into Go struct "
                                         "field AdmissionResponse.response.warnings of type "
                                         "[]string"),
    (answer(allowed=True, warnings=["w", 1]), "json: cannot unmarshal number 1 into Go "
                                              "struct field AdmissionResponse.response."
                                              "warnings of type string"),
    (answer(allowed=True, auditAnnotations=[]), "json: cannot unmarshal array into Go "
                                                "struct field AdmissionResponse.response."
                                                "auditAnnotations of type map[string]string"),
    (answer(allowed=True, auditAnnotations={"k": True}),
     "json: cannot unmarshal bool into Go struct field AdmissionResponse.response."
     "auditAnnotations of type string"),
    (answer(allowed=True, patchType=["JSONPatch"]),
     "json: cannot unmarshal array into Go struct field AdmissionResponse.response."
     "patchType of type v1.PatchType"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": []}',
     "json: cannot unmarshal array into Go struct field AdmissionReview.response of type "
     "v1.AdmissionResponse"),
])
def test_a_member_of_the_wrong_type_makes_the_answer_invalid_as_in_go(
        body: bytes, message: str) -> None:
    with pytest.raises(review.InvalidResponse) as caught:
        review.parse_response(body, "u", mutating=True)
    assert str(caught.value) == message


def test_absent_and_null_members_are_go_zero_values() -> None:
    got = review.parse_response(answer(), "u", mutating=True)
    assert got.allowed is False
    got = review.parse_response(answer(allowed=None, status=None, warnings=None,
                                       auditAnnotations=None, patchType=None, patch=None),
                                "u", mutating=True)
    assert (got.allowed, got.code, got.message, got.warnings, got.annotations) == \
        (False, 0, "", [], {})


def test_what_a_message_quotes_of_the_answer_is_bounded() -> None:
    huge = "v" * 3_000_000
    for body in (orjson.dumps({"apiVersion": huge, "kind": huge}),
                 answer(uid=huge, allowed=True),
                 answer(allowed=True, patch="W10=", patchType=huge),
                 answer(allowed=True, status={"code": 1e300})):
        with pytest.raises(review.InvalidResponse) as caught:
            review.parse_response(body, "u", mutating=True)
        assert len(str(caught.value)) < 1024


def test_warnings_are_bounded_however_many_and_long() -> None:
    got = review.parse_response(answer(allowed=True, warnings=[
        "w" * 10_000_000, *(f"warning {i}" for i in range(10_000))]), "u", mutating=False)
    assert len(got.warnings) == review.MAX_WARNINGS
    assert got.warnings[0] == "w" * review.MAX_WARNING_BYTES
