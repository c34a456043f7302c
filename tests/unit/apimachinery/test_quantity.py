"""The one quantity parser: Kubernetes' values, rounding, errors and bounds."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import quantity
from setpoint.apimachinery.quantity import ERR_FORMAT, ERR_NUMERIC, ERR_SUFFIX, QuantityError


@pytest.mark.parametrize(("text", "value"), [
    ("1", Fraction(1)), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)),
    ("64Mi", Fraction(64 << 20)), ("1G", Fraction(10**9)), ("1e3", Fraction(1000)),
    ("1E-3", Fraction(1, 1000)), ("1e0000000003", Fraction(1000)),
    ("-2", Fraction(-2)), ("+2k", Fraction(2000)), (".5", Fraction(1, 2)), ("5.", Fraction(5)),
    ("100u", Fraction(1, 10000)), ("0.0000000001", Fraction(1, 10**9)),
    ("-0.0000000001", Fraction(-1, 10**9)), ("16Ei", Fraction(2**63 - 1)),
    ("Ki", Fraction(0)), ("0", Fraction(0)), ("1" * 100, Fraction(int("1" * 100))),
])
def test_values_as_kubernetes(text: str, value: Fraction) -> None:
    assert quantity.parse_quantity(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("", ERR_FORMAT), ("abc", ERR_FORMAT), ("1.2.3", ERR_FORMAT), ("1 k", ERR_FORMAT),
    ("1Xi", ERR_FORMAT), ("10Mm", ERR_SUFFIX), ("1e", ERR_SUFFIX), ("1KiB", ERR_FORMAT),
    ("1e" + "9" * 40, ERR_SUFFIX), ("1e10001", ERR_NUMERIC), ("1" * 4001, ERR_NUMERIC),
])
def test_errors_as_kubernetes(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as e:
        quantity.parse_quantity(text)
    assert str(e.value) == message


@pytest.mark.parametrize(("value", "expected"), [
    (3, Fraction(3)), (0.5, Fraction(1, 2)), ("250m", Fraction(1, 4)),
])
def test_value_of_takes_json_numbers(value: object, expected: Fraction) -> None:
    assert quantity.value_of(value) == expected


@pytest.mark.parametrize("value", [True, None, float("nan"), float("inf"), [], {"a": 1}])
def test_value_of_refuses_what_is_not_a_quantity(value: object) -> None:
    with pytest.raises(QuantityError):
        quantity.value_of(value)


def test_ceil_div_rounds_up_and_needs_a_positive_divisor() -> None:
    assert quantity.ceil_div(Fraction(1, 4), Fraction(1)) == 1
    assert quantity.ceil_div(Fraction(64 << 20), Fraction(1 << 20)) == 64
    with pytest.raises(QuantityError):
        quantity.ceil_div(Fraction(1), Fraction(0))


_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}


@given(st.decimals(min_value=-10**6, max_value=10**6, places=9, allow_nan=False,
                   allow_infinity=False),
       st.sampled_from(sorted(_DECIMAL_SUFFIXES)))
def test_decimal_text_is_its_exact_value(number: Decimal, suffix: str) -> None:
    text = format(number, "f") + suffix
    exact = Fraction(number) * Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    nano = exact * 10**9
    rounded = Fraction(-(-abs(nano) // 1), 10**9)  # away from zero, at nano precision
    assert quantity.parse_quantity(text) == (rounded if exact >= 0 else -rounded)


@given(st.text(max_size=40))
def test_any_text_is_a_value_or_a_quantity_error(text: str) -> None:
    outcome: object
    try:
        outcome = quantity.parse_quantity(text)
    except QuantityError as e:
        outcome = str(e)
    assert isinstance(outcome, Fraction) or outcome in (ERR_FORMAT, ERR_SUFFIX, ERR_NUMERIC)
