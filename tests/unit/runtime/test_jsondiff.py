"""json_diff: the patch it computes turns the old value into the new one, for any JSON."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery.patch import json_patch
from setpoint.runtime.jsondiff import json_diff

keys = st.sampled_from(["a", "b", "~", "/", "a/b~c", "", "labels"])
scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.floats(
    allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=3)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=20)


@given(values, values)
def test_the_patch_turns_old_into_new(old: Any, new: Any) -> None:
    before = copy.deepcopy(old), copy.deepcopy(new)
    patch = json_diff(old, new)
    assert json_patch(old, patch) == new
    assert (old, new) == before


@given(values)
def test_equal_values_give_no_patch(value: Any) -> None:
    assert json_diff(value, copy.deepcopy(value)) == []


def test_kinds_of_change() -> None:
    assert json_diff({"a": 1, "b": [1]}, {"a": 1.0, "b": [1, 2], "c": True}) == [
        {"op": "replace", "path": "/b", "value": [1, 2]},
        {"op": "add", "path": "/c", "value": True}]
    assert json_diff({"x/y": 1, "t~": 0}, {"t~": False}) == [
        {"op": "remove", "path": "/x~1y"}, {"op": "replace", "path": "/t~0", "value": False}]
