"""Watch lines: splitting a byte stream into events, and ERROR events as exceptions."""

from __future__ import annotations

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.client import watch


def line(event_type: str, obj: dict[str, object]) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj})


def test_parse_added() -> None:
    event = watch.parse_event(line("ADDED", {"kind": "ConfigMap",
                                             "metadata": {"name": "a", "resourceVersion": "7"}}))
    assert event.type == watch.ADDED
    assert event.object["metadata"]["name"] == "a"
    assert event.resource_version == "7"


def test_bookmark_carries_only_a_resource_version() -> None:
    event = watch.parse_event(line("BOOKMARK", {"kind": "ConfigMap", "apiVersion": "v1",
                                                "metadata": {"resourceVersion": "42"}}))
    assert (event.type, event.resource_version) == ("BOOKMARK", "42")
    assert watch.WatchEvent("ADDED", {}).resource_version is None


@pytest.mark.parametrize(("code", "reason", "cls"), [
    (410, "Expired", errors.Expired),
    (410, "Gone", errors.Gone),
    (500, "InternalError", errors.InternalError),
    (410, "", errors.Gone),
], ids=["expired", "gone", "internal", "code-only"])
def test_error_events_raise(code: int, reason: str, cls: type[errors.ApiError]) -> None:
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
              "message": "too old resource version: 1 (5)", "reason": reason, "code": code}
    with pytest.raises(cls) as caught:
        watch.parse_event(line("ERROR", status))
    assert caught.value.status_code == code
    assert "too old" in caught.value.message


@pytest.mark.parametrize("raw", [
    b"not json", b"[]", b'{"type": "ADDED"}', b'{"type": 1, "object": {}}',
    b'{"type": "ADDED", "object": []}',
], ids=["text", "list", "no-object", "numeric-type", "list-object"])
def test_malformed_lines(raw: bytes) -> None:
    with pytest.raises(errors.InternalError, match="malformed watch event"):
        watch.parse_event(raw)


def test_line_buffer_splits_across_chunks() -> None:
    buffer = watch.LineBuffer()
    assert buffer.feed(b'{"a"') == []
    assert buffer.feed(b':1}\n{"b":2}\n\n  \n{"c"') == [b'{"a":1}', b'{"b":2}']
    assert buffer.pending == b'{"c"'
    assert buffer.feed(b":3}\r\n") == [b'{"c":3}']
    assert buffer.pending == b""


def test_line_buffer_byte_by_byte() -> None:
    buffer = watch.LineBuffer()
    data = b'{"x":1}\n{"y":2}\n'
    lines: list[bytes] = []
    for i in range(len(data)):
        lines.extend(buffer.feed(data[i:i + 1]))
    assert lines == [b'{"x":1}', b'{"y":2}']


def test_line_buffer_limit() -> None:
    buffer = watch.LineBuffer(max_line=10)
    assert buffer.feed(b"0123456789\n") == [b"0123456789"]
    with pytest.raises(errors.InternalError, match="exceeds 10 bytes"):
        buffer.feed(b"0123456789A")


def test_watch_rejects_a_non_positive_timeout() -> None:
    async def never() -> tuple[object, str, str]:
        raise AssertionError

    with pytest.raises(ValueError, match="inactivity_timeout"):
        watch.Watch(never, inactivity_timeout=0)  # type: ignore[arg-type]
