"""apimachinery.jsoncopy: the server's one deep copy of JSON values."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery.jsoncopy import deep_copy

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=4),
    max_leaves=30)


def containers(value: Any) -> list[int]:
    """The ids of every dict and list inside ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in containers(v))]
    return []


@given(JSON)
def test_a_copy_is_equal_and_shares_no_container(value: Any) -> None:
    copied = deep_copy(value)
    assert copied == value
    assert not set(containers(copied)) & set(containers(value))


def test_what_orjson_cannot_encode_is_walked() -> None:
    big = {"n": 2**80, "items": [{"m": -(2**70)}], 1: "non-string key"}
    copied = deep_copy(big)
    assert copied == big
    assert copied["items"] is not big["items"]
    assert copied["items"][0] is not big["items"][0]
