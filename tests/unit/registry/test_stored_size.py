"""The bound on what a create or update stores: the object after admission, encoded."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.registry.storebase import MAX_STORED_BYTES, encode, encode_write


def test_the_stored_form_leaves_out_the_resource_version() -> None:
    obj = {"metadata": {"name": "a", "resourceVersion": "7"}, "data": {"k": "v"}}
    assert orjson.loads(encode_write(obj)) == {"metadata": {"name": "a"}, "data": {"k": "v"}}
    assert obj["metadata"]["resourceVersion"] == "7"  # the caller's object is left alone


def test_a_stored_form_over_the_limit_is_a_413() -> None:
    obj = {"metadata": {"name": "a"}, "data": {"k": "x" * 100}}
    size = len(encode(obj))
    assert encode_write(obj, limit=size) == encode(obj)
    with pytest.raises(errors.RequestEntityTooLarge) as e:
        encode_write(obj, limit=size - 1)
    assert e.value.code == 413
    assert f"stored as {size} bytes after admission; limit is {size - 1}" in str(e.value)


def test_the_default_limit_is_twice_the_request_body_limit() -> None:
    assert MAX_STORED_BYTES == 2 * 3 * 1024 * 1024


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=64), max_size=20),
       st.integers(min_value=1, max_value=2000))
def test_encode_write_is_encode_within_the_limit(data: dict[str, str], limit: int) -> None:
    obj = {"metadata": {"name": "a", "resourceVersion": "1"}, "data": data}
    stored = encode(obj)
    if len(stored) <= limit:
        assert encode_write(obj, limit) == stored
    else:
        with pytest.raises(errors.RequestEntityTooLarge):
            encode_write(obj, limit)
