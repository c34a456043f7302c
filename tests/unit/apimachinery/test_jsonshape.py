"""Reading members of untrusted shape: the value when it has the shape, else a new empty one
(never shared between calls)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery.jsonshape import as_dict, as_list

_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10)


@given(_json)
def test_the_value_itself_or_a_fresh_empty_one(value: Any) -> None:
    got, listed = as_dict(value), as_list(value)
    assert (got is value) == isinstance(value, dict)
    assert (listed is value) == isinstance(value, list)
    if not isinstance(value, dict):
        assert got == {}
        got["written"] = True
        assert as_dict(value) == {}  # what a caller wrote is shared with nobody
    if not isinstance(value, list):
        assert listed == []
