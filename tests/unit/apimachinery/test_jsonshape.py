"""Reading members of untrusted shape: the value when it has the shape, else a new empty one
(never shared between calls)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery.jsonshape import as_dict, as_list, objects_in

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


@given(st.recursive(st.none() | st.integers() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=4), max_leaves=12))
def test_objects_in_keeps_the_objects_of_an_array(value: Any) -> None:
    found = objects_in(value)
    if isinstance(value, list):
        assert found == [v for v in value if isinstance(v, dict)]
        assert all(any(f is v for v in value) for f in found)  # no copies
    else:
        assert found == []
