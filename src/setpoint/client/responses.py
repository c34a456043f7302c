"""Turning HTTP responses into values or into :mod:`setpoint.apimachinery.errors` exceptions.

This module adds no exception classes: every failure the server reports becomes the same
``ApiError`` subclass the server raised, via :func:`errors.from_status`, so code on both sides
of the wire catches the same exceptions.

Rules:

- A JSON ``Status`` body (``kind: Status``) is authoritative: its ``reason`` picks the class,
  its ``code`` wins over the HTTP code, and ``details`` and ``retryAfterSeconds`` are kept.
- Any other error body (an HTML page from a proxy, plain text) becomes the class for the HTTP
  code, with the body text, truncated to :data:`MAX_MESSAGE` characters, as its message.
- A ``Retry-After`` header fills ``retry_after`` when the Status does not carry it.
- A success body that is not JSON raises ``InternalError`` (the server broke the protocol).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from setpoint.apimachinery import errors

#: longest message taken from a non-Status error body
MAX_MESSAGE = 512


def truncate(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    return text if len(text) <= limit else text[:limit] + "... (truncated)"


def _retry_after(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        seconds = int(value.strip())
    except ValueError:
        return None  # an HTTP date: not used by Kubernetes, ignored
    return max(seconds, 0)


def error_from_response(code: int, body: bytes, *, reason_phrase: str = "",
                        retry_after: str | None = None) -> errors.ApiError:
    """The exception for an error response with HTTP ``code`` and raw ``body``."""
    status: Any = None
    if body:
        try:
            status = orjson.loads(body)
        except orjson.JSONDecodeError:
            status = None
    if isinstance(status, Mapping) and status.get("kind") == "Status":
        error = errors.from_status(status, http_code=code)
    else:
        text = body.decode("utf-8", "replace").strip()
        message = truncate(text) if text else (reason_phrase or f"HTTP {code}")
        error = errors.from_status({"code": code, "message": message}, http_code=code)
    if error.retry_after is None:
        error.retry_after = _retry_after(retry_after)
    return error


def decode(body: bytes, what: str) -> Any:
    """The JSON value of a success body; ``what`` names the request for the error message."""
    if not body:
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as e:
        text = truncate(body.decode("utf-8", "replace"), 200)
        raise errors.InternalError(f"{what}: the response is not JSON: {text!r}") from e

