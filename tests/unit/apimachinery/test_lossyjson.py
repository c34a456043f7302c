"""JSON of text read from undecodable bytes: written with U+FFFD, never refused."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import lossyjson

#: text as an HTTP header's bytes are read: undecodable bytes become lone surrogates
WIRE_TEXT = st.binary(max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape")) | \
    st.text(max_size=30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | WIRE_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(WIRE_TEXT, inner, max_size=4),
    max_leaves=20)


@given(JSON)
def test_any_value_with_undecodable_text_is_written_as_json(value: object) -> None:
    written = lossyjson.dumps(value)
    assert orjson.loads(written) is not None or written == b"null"
    try:
        expected = orjson.dumps(value)
    except TypeError:
        assert "\ufffd" in written.decode()
    else:
        assert written == expected


def test_each_undecodable_byte_is_one_replacement_character() -> None:
    header = b"kubectl\xff\xfe/1".decode("utf-8", "surrogateescape")
    assert lossyjson.dumps({"userAgent": header, header: [header]}) == \
        '{"userAgent":"kubectl\ufffd\ufffd/1","kubectl\ufffd\ufffd/1":["kubectl\ufffd\ufffd/1"]}' \
        .encode()
    assert lossyjson.text("a\ud800b") == "a\ufffdb"  # a surrogate no byte stands for


def test_nesting_deeper_than_the_recursion_limit_is_scrubbed() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(50_000):
        child: dict[str, object] = {}
        node["a"] = child
        node = child
    node["x"] = "\udcff"
    scrubbed = lossyjson.scrub(deep)
    for _ in range(50_000):
        scrubbed = scrubbed["a"]
    assert scrubbed == {"x": "\ufffd"}


def test_values_orjson_refuses_for_another_reason_still_raise() -> None:
    with pytest.raises(TypeError):
        lossyjson.dumps({"a": object(), "b": "\udcff"})
