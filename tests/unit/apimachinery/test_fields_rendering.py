"""How field errors render values: as Go's %v and %q print the JSON-decoded values."""

from __future__ import annotations

import pytest

from setpoint.apimachinery import fields


@pytest.mark.parametrize(("value", "expected"), [
    (250000000.0, "2.5e+08"), (100.0, "100"), (1.0, "1"), (0.5, "0.5"), (123456.0, "123456"),
    (1234567.0, "1.234567e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"), (-3.25, "-3.25"),
    (1e21, "1e+21"), (0.0, "0"), (float("inf"), "+Inf"), (float("nan"), "NaN"),
], ids=lambda v: str(v))
def test_go_float(value: float, expected: str) -> None:
    assert fields.go_float(value) == expected


def test_too_many_names_the_count() -> None:
    err = fields.too_many(fields.FieldPath.root("spec", "items"), 3, 2)
    assert err.error() == "spec.items: Too many: 3: must have at most 2 items"


def test_supported_values_are_quoted_as_go_does() -> None:
    err = fields.not_supported("spec.mode", "x", ['say "hi"', "plain"])
    assert err.error() == ('spec.mode: Unsupported value: "x": supported values: '
                           '"say \\"hi\\"", "plain"')
