"""resourceVersion parsing: Go's strconv.ParseUint, not Python's int()."""

from __future__ import annotations

import pytest

from setpoint.apimachinery import resourceversion


@pytest.mark.parametrize(("text", "revision"), [
    ("0", 0), ("1", 1), ("01", 1), ("18446744073709551615", (1 << 64) - 1),
    ("000000000000000000000000042", 42),
])
def test_decimal_digits_within_uint64_are_revisions(text: str, revision: int) -> None:
    assert resourceversion.parse(text) == revision


@pytest.mark.parametrize("text", [
    " 1", "1 ", "+1", "-1", "1_000", "0x10", "1.0", "1e3", "", "\u0661", "\uff11", "abc",
])
def test_anything_else_is_invalid_syntax(text: str) -> None:
    with pytest.raises(resourceversion.ResourceVersionError, match="invalid syntax"):
        resourceversion.parse(text)


def test_beyond_uint64_is_out_of_range() -> None:
    with pytest.raises(resourceversion.ResourceVersionError,
                       match='parsing "18446744073709551616": value out of range'):
        resourceversion.parse("18446744073709551616")
    with pytest.raises(resourceversion.ResourceVersionError, match=r"\.\.\.\": value out"):
        resourceversion.parse("9" * 5000)


@pytest.mark.parametrize("value", [1, 1.0, True, None, ["1"]])
def test_only_strings_are_resource_versions(value: object) -> None:
    with pytest.raises(resourceversion.ResourceVersionError, match="must be a string"):
        resourceversion.parse(value)
