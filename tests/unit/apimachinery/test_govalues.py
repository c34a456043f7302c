"""Go value semantics for JSON values: float formatting, quoting, deep equality."""

from __future__ import annotations

import pytest

from setpoint.apimachinery import govalues


@pytest.mark.parametrize(("value", "v", "json"), [
    (10.0, "10", "10"), (1.5, "1.5", "1.5"), (1e8, "1e+08", "100000000"),
    (123456.0, "123456", "123456"), (1234567.0, "1.234567e+06", "1234567"),
    (0.0001, "0.0001", "0.0001"), (0.00001, "1e-05", "0.00001"), (1e-7, "1e-07", "1e-7"),
    (1e21, "1e+21", "1e+21"), (-2.5, "-2.5", "-2.5"), (0.0, "0", "0"),
])
def test_go_float_formatting(value: float, v: str, json: str) -> None:
    assert govalues.format_float_v(value) == v
    assert govalues.format_float_json(value) == json


def test_go_deep_equal_and_json() -> None:
    assert govalues.deep_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not govalues.deep_equal(1, 1.0)
    assert not govalues.deep_equal(True, 1)
    assert not govalues.deep_equal({"a": 1}, {"a": 1.0})
    assert govalues.to_json({"b": 1.0, "a": ["<x>", None, True]}) == \
        '{"a":["\\u003cx\\u003e",null,true],"b":1}'
    assert govalues.quote('a"b\n\x00\u00e9') == '"a\\"b\\n\\x00\u00e9"'
    assert govalues.is_json_integer(3.0)
    assert govalues.is_json_integer(1e15 + 0.5)
    assert not govalues.is_json_integer(2.0**60)
    assert govalues.float_to_int64(-1.9) == -1
    assert govalues.float_to_int64(1e30) == govalues.INT64_MIN
