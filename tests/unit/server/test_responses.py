"""Warning headers: quoted, bounded, and unable to inject other headers."""

from __future__ import annotations

from aiohttp import web

from setpoint.server import responses


def test_control_characters_and_quotes_are_escaped() -> None:
    value = responses.warning_header('unknown field "a\r\nSet-Cookie: x\\y\x7f"')
    assert value == ('299 - "unknown field \\"a\\u000d\\u000aSet-Cookie: x\\\\y\\u007f\\""')
    assert "\r" not in value
    assert "\n" not in value


def test_lone_surrogates_are_escaped_and_long_texts_cut() -> None:
    assert responses.warning_header("\udb73") == '299 - "\\udb73"'
    long = responses.warning_header("x" * 10_000)
    assert len(long) < responses.MAX_WARNING_TEXT + 20
    assert long.endswith('..."')


def test_warnings_are_deduplicated_and_bounded() -> None:
    response = web.Response()
    responses.add_warnings(response, ["same", "same", *(f"w{i}" for i in range(500))])
    values = response.headers.getall("Warning")
    assert len(values) == responses.MAX_WARNINGS + 1
    assert values[0] == '299 - "same"'
    assert values[-1] == '299 - "further warnings were dropped"'
