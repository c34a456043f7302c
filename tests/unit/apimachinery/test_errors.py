"""Table tests for the messages and Status bodies of setpoint.apimachinery.errors."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors, fields

# (id, error, code, reason, message)
MESSAGES: list[tuple[str, errors.ApiError, int, str, str]] = [
    ("not-found-core", errors.not_found("configmaps", "", "x"), 404, "NotFound",
     'configmaps "x" not found'),
    ("not-found-group", errors.not_found("books", "example.com", "b1"), 404, "NotFound",
     'books.example.com "b1" not found'),
    ("already-exists", errors.already_exists("namespaces", "", "ns"), 409, "AlreadyExists",
     'namespaces "ns" already exists'),
    ("conflict", errors.conflict("books", "example.com", "b1"), 409, "Conflict",
     'Operation cannot be fulfilled on books.example.com "b1": the object has been modified; '
     "please apply your changes to the latest version and try again"),
    ("conflict-reason", errors.conflict("leases", "coordination.k8s.io", "l", "busy"), 409,
     "Conflict", 'Operation cannot be fulfilled on leases.coordination.k8s.io "l": busy'),
    ("method-not-allowed", errors.method_not_allowed("create", "books", "example.com"), 405,
     "MethodNotAllowed",
     'create is not supported on resources of kind "books.example.com"'),
    ("method-not-allowed-core", errors.method_not_allowed("delete", "events", ""), 405,
     "MethodNotAllowed", 'delete is not supported on resources of kind "events"'),
    ("method-not-allowed-no-resource", errors.method_not_allowed("patch", "", ""), 405,
     "MethodNotAllowed", "the server does not allow this method on the requested resource"),
    ("too-old", errors.too_old_resource_version(5, 9), 410, "Expired",
     "too old resource version: 5 (9)"),
    ("unsupported-patch", errors.unsupported_patch_type(["application/merge-patch+json"]), 415,
     "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
     "media types include: application/merge-patch+json"),
    ("invalid-one", errors.invalid("Book", "example.com", "b1",
                                   [fields.required("spec.title")]), 422, "Invalid",
     'Book.example.com "b1" is invalid: spec.title: Required value'),
    ("invalid-sorted", errors.invalid("ConfigMap", "", "c", [
        fields.invalid("metadata.name", "A", "bad"), fields.required("data")]), 422, "Invalid",
     'ConfigMap "c" is invalid: [data: Required value, metadata.name: Invalid value: "A": bad]'),
    ("invalid-none", errors.invalid("ConfigMap", "", "c", []), 422, "Invalid",
     'ConfigMap "c" is invalid'),
]


@pytest.mark.parametrize(("error", "code", "reason", "message"), [c[1:] for c in MESSAGES],
                         ids=[c[0] for c in MESSAGES])
def test_messages(error: errors.ApiError, code: int, reason: str, message: str) -> None:
    status = error.status()
    assert (status["code"], status["reason"], status["message"]) == (code, reason, message)
    assert status["kind"] == "Status"
    assert status["status"] == "Failure"


def test_invalid_causes() -> None:
    status = errors.invalid("Book", "example.com", "b1", [
        fields.invalid("spec.size", 1.5, "must be an integer")]).status()
    assert status["details"] == {
        "name": "b1", "group": "example.com", "kind": "Book",
        "causes": [{"reason": "FieldValueInvalid", "field": "spec.size",
                    "message": "Invalid value: 1.5: must be an integer"}]}


ROUND_TRIP: list[tuple[str, dict[str, Any], type[errors.ApiError]]] = [
    ("by-reason", {"code": 409, "reason": "AlreadyExists", "message": "m"},
     errors.AlreadyExists),
    ("expired", {"code": 410, "reason": "Expired", "message": "m"}, errors.Expired),
    ("by-code", {"code": 404, "message": "m"}, errors.NotFound),
    ("invalid", {"code": 422, "reason": "Invalid", "message": "m"}, errors.Invalid),
    ("unknown", {"code": 418, "reason": "Teapot", "message": "m"}, errors.ApiError),
]


@pytest.mark.parametrize(("status", "cls"), [c[1:] for c in ROUND_TRIP],
                         ids=[c[0] for c in ROUND_TRIP])
def test_from_status(status: dict[str, Any], cls: type[errors.ApiError]) -> None:
    error = errors.from_status(status)
    assert type(error) is cls
    assert error.status_code == status["code"]
    assert error.message == "m"
    if status.get("reason"):
        assert error.status()["reason"] == status["reason"]


def test_an_invalid_status_lists_at_most_max_causes_errors() -> None:
    # each error names its value and is listed twice: 64,000 of them made a 43 MB Status
    errs = [fields.invalid(f"metadata.finalizers[{i}]", "x" * 100, "not a qualified name")
            for i in range(2500)]
    e = errors.invalid("ConfigMap", "", "many", errs)
    assert len(e.details["causes"]) == errors.MAX_CAUSES == 1000
    assert e.details["causes"][0]["field"] == "metadata.finalizers[0]"
    assert e.message.endswith(", and 1500 more errors]")
    assert e.message.count("not a qualified name") == 1000
    assert len(e.errors) == 1000
    few = errors.invalid("ConfigMap", "", "few", errs[:3])
    assert len(few.details["causes"]) == 3
    assert "more errors" not in few.message


def test_retry_after_travels_in_details() -> None:
    error = errors.TooManyRequests("slow down", retry_after=3)
    assert error.status()["details"] == {"retryAfterSeconds": 3}
    assert errors.from_status(error.status()).retry_after == 3
