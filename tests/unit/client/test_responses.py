"""Error responses become the apimachinery exception the server meant."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.client import responses


def status(code: int, reason: str, message: str = "m", **details: Any) -> bytes:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details:
        body["details"] = details
    return orjson.dumps(body)


@pytest.mark.parametrize(("code", "reason", "cls"), [
    (400, "BadRequest", errors.BadRequest),
    (401, "Unauthorized", errors.Unauthorized),
    (403, "Forbidden", errors.Forbidden),
    (404, "NotFound", errors.NotFound),
    (405, "MethodNotAllowed", errors.MethodNotAllowed),
    (409, "Conflict", errors.Conflict),
    (409, "AlreadyExists", errors.AlreadyExists),
    (410, "Expired", errors.Expired),
    (410, "Gone", errors.Gone),
    (415, "UnsupportedMediaType", errors.UnsupportedMediaType),
    (422, "Invalid", errors.Invalid),
    (429, "TooManyRequests", errors.TooManyRequests),
    (500, "InternalError", errors.InternalError),
    (503, "ServiceUnavailable", errors.ServiceUnavailable),
    (504, "Timeout", errors.Timeout),
], ids=lambda v: str(v) if not isinstance(v, type) else v.__name__)
def test_status_reason_picks_the_class(code: int, reason: str, cls: type[errors.ApiError]
                                       ) -> None:
    error = responses.error_from_response(code, status(code, reason, "the message"))
    assert type(error) is cls
    assert error.message == "the message"
    assert error.status_code == code
    assert error.status_reason == reason


def test_expired_is_a_gone() -> None:
    error = responses.error_from_response(410, status(410, "Expired", "too old"))
    assert isinstance(error, errors.Gone)


def test_details_and_causes_are_kept() -> None:
    causes = [{"reason": "FieldValueInvalid", "message": "bad", "field": "spec.size"}]
    body = status(422, "Invalid", 'Widget.example.com "w" is invalid', name="w",
                  group="example.com", kind="Widget", causes=causes)
    error = responses.error_from_response(422, body)
    assert isinstance(error, errors.Invalid)
    assert error.details["causes"] == causes
    assert error.details["name"] == "w"


def test_retry_after_from_status_details() -> None:
    error = responses.error_from_response(429, status(429, "TooManyRequests",
                                                      retryAfterSeconds=7))
    assert error.retry_after == 7


def test_retry_after_from_header_when_status_has_none() -> None:
    error = responses.error_from_response(429, status(429, "TooManyRequests"), retry_after="3")
    assert error.retry_after == 3
    dated = responses.error_from_response(429, b"", retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    assert dated.retry_after is None


def test_status_code_wins_over_http_code() -> None:
    error = responses.error_from_response(500, status(409, "Conflict"))
    assert isinstance(error, errors.Conflict)
    assert error.status_code == 409


def test_unknown_reason_falls_back_to_code() -> None:
    error = responses.error_from_response(409, status(409, "SomethingNew"))
    assert isinstance(error, errors.Conflict)
    assert error.status_reason == "SomethingNew"


@pytest.mark.parametrize(("code", "cls"), [
    (400, errors.BadRequest), (404, errors.NotFound), (500, errors.InternalError),
    (503, errors.ServiceUnavailable), (504, errors.Timeout),
], ids=lambda v: str(v) if not isinstance(v, type) else v.__name__)
def test_non_status_body_uses_the_code_and_the_text(code: int, cls: type[errors.ApiError]
                                                    ) -> None:
    error = responses.error_from_response(code, b"<html>upstream broke</html>\n")
    assert type(error) is cls
    assert error.message == "<html>upstream broke</html>"
    assert error.status_code == code


def test_json_that_is_not_a_status_is_text() -> None:
    error = responses.error_from_response(404, b'{"error": "nope"}')
    assert isinstance(error, errors.NotFound)
    assert error.message == '{"error": "nope"}'


def test_unmapped_code_keeps_its_number() -> None:
    error = responses.error_from_response(502, b"Bad Gateway")
    assert isinstance(error, errors.ApiError)
    assert error.status_code == 502
    assert error.message == "Bad Gateway"


def test_empty_body_uses_the_reason_phrase() -> None:
    error = responses.error_from_response(403, b"", reason_phrase="Forbidden")
    assert isinstance(error, errors.Forbidden)
    assert error.message == "Forbidden"
    assert responses.error_from_response(418, b"").message == "HTTP 418"


def test_long_bodies_are_truncated() -> None:
    error = responses.error_from_response(500, b"x" * 10_000)
    assert len(error.message) < 600
    assert error.message.endswith("(truncated)")


def test_decode() -> None:
    assert responses.decode(b'{"a": 1}', "GET /x") == {"a": 1}
    assert responses.decode(b"", "GET /x") is None
    with pytest.raises(errors.InternalError, match="GET /x: the response is not JSON"):
        responses.decode(b"<html>", "GET /x")
