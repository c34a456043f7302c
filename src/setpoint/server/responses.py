"""Building responses and reading query parameters.

The only place where an :class:`~setpoint.apimachinery.errors.ApiError` becomes HTTP: a
``metav1.Status`` body with ``Content-Type: application/json`` exactly (lightkube compares the
string), the Status code as HTTP code, and ``Retry-After`` when the error says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import orjson
from aiohttp import web

from setpoint.apimachinery import errors, lossyjson, regexp

JSON = "application/json"

_DECIMAL = regexp.Regexp(r"[+-]?[0-9]+")
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})
_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})


def json_response(body: Any, *, status: int = 200, content_type: str = JSON,
                  warnings: Iterable[str] = ()) -> web.Response:
    response = web.Response(body=orjson.dumps(body), status=status,
                            headers={"Content-Type": content_type})
    add_warnings(response, warnings)
    return response


#: how much of a streamed list is encoded before it is written out
STREAM_CHUNK = 256 * 1024


def stream_body(request: web.Request, response: web.StreamResponse) -> None:
    """Send ``response``'s body as it is written: in chunks over HTTP/1.1, and over HTTP/1.0
    (which has no chunks) as bytes that end when the server closes the connection, as
    Kubernetes answers an HTTP/1.0 list or watch."""
    if request.version >= (1, 1):
        response.enable_chunked_encoding()
    else:
        response.force_close()


async def stream_list(request: web.Request, head: Any, items: Iterable[Any], *,
                      content_type: str = JSON, warnings: Iterable[str] = (),
                      chunk: int = STREAM_CHUNK) -> web.StreamResponse:
    """Send ``{**head, "items": items}`` as JSON, encoded a chunk at a time.

    The bytes are those of :func:`json_response` (``items`` must be the last key); the
    memory is one chunk, not the whole body, and writing waits for the connection to take
    each chunk, so other requests are served between chunks. Call it only once nothing can
    fail any more: after the status line has gone out, errors cannot become a Status. A
    client that goes away ends the stream quietly.
    """
    response = web.StreamResponse(status=200, headers={"Content-Type": content_type})
    add_warnings(response, warnings)
    stream_body(request, response)
    await response.prepare(request)
    opening = orjson.dumps({**head, "items": []})
    if not opening.endswith(b"[]}"):
        raise ValueError("items must be the last key of a streamed list")
    buffer = bytearray(opening[:-2])
    first = True
    try:
        for item in items:
            if not first:
                buffer += b","
            first = False
            buffer += orjson.dumps(item)
            if len(buffer) >= chunk:
                await response.write(bytes(buffer))
                buffer.clear()
                await asyncio.sleep(0)  # other requests get their turn between chunks
        buffer += b"]}"
        await response.write(bytes(buffer))
        await response.write_eof()
    except ConnectionError:
        # the client went away, possibly while a write waited for it to read (aiohttp's
        # lost connection is a ConnectionError): nothing to log, nothing more to send
        pass
    return response


#: at most this many Warning headers, each at most this many characters (Kubernetes bounds
#: warnings too: a request that prunes a million fields must not answer a million headers)
MAX_WARNINGS = 50
MAX_WARNING_TEXT = 2048


def warning_header(text: str) -> str:
    """A ``Warning: 299 - "text"`` value: quoted, with control characters escaped (text can
    hold what a client sent, such as unknown field names, and must not inject headers)."""
    if len(text) > MAX_WARNING_TEXT:
        text = text[:MAX_WARNING_TEXT] + "..."
    out = []
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch < " " or ch == "\x7f" or "\ud800" <= ch <= "\udfff":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return f'299 - "{"".join(out)}"'


def add_warnings(response: web.StreamResponse, warnings: Iterable[str]) -> None:
    seen: set[str] = set()
    for text in warnings:
        if text in seen:
            continue
        if len(seen) == MAX_WARNINGS:
            response.headers.add("Warning", warning_header("further warnings were dropped"))
            return
        seen.add(text)
        response.headers.add("Warning", warning_header(text))


def error_response(error: errors.ApiError) -> web.Response:
    headers = {"Content-Type": JSON}
    retry = error.retry_after
    if retry is None:
        detail = error.details.get("retryAfterSeconds")
        retry = int(detail) if isinstance(detail, int) else None
    if retry is not None:
        headers["Retry-After"] = str(retry)
    # encoding/json's Encoder, which kube-apiserver writes with, ends the body with a newline;
    # a message quoting bytes that are not UTF-8 has U+FFFD in their place, as it writes them
    return web.Response(body=lossyjson.dumps(error.status(), option=orjson.OPT_APPEND_NEWLINE),
                        status=error.status_code, headers=headers)


def parse_bool(query: Mapping[str, str], name: str, default: bool = False) -> bool:
    """Go's ``strconv.ParseBool``: what kube-apiserver accepts (``True``, ``t``, ``1`` ...)."""
    value = query.get(name)
    if value is None:
        return default
    if value == "":
        return True
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise errors.BadRequest(
        f'invalid boolean value for {name}: strconv.ParseBool: parsing "{value}": '
        "invalid syntax")


def parse_int(query: Mapping[str, str], name: str, default: int | None = None) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 64)``: an optional sign and decimal digits, in the
    int64 range (Python's ``int`` would also take spaces, underscores and any size)."""
    value = query.get(name)
    if value is None or value == "":
        return default
    if not _DECIMAL.fullmatch(value):
        raise errors.BadRequest(
            f'invalid value for {name}: strconv.ParseInt: parsing "{_clip(value)}": '
            "invalid syntax")
    if len(value.lstrip("+-").lstrip("0")) > 19 or not INT64_MIN <= int(value) <= INT64_MAX:
        raise errors.BadRequest(
            f'invalid value for {name}: strconv.ParseInt: parsing "{_clip(value)}": value '
            "out of range")
    return int(value)


def _clip(value: str) -> str:
    return value if len(value) <= 64 else value[:64] + "..."
