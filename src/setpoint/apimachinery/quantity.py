"""Resource quantities (``500m``, ``64Mi``, ``1e3``) as exact fractions, as Kubernetes parses them.

One parser for every reader: the API server's validation of pod resources and table
columns, CEL's ``quantity()`` library, the controllers' and the node agent's arithmetic on
requests, limits and ``resourceFieldRef`` divisors.

Syntax: an optional sign, digits with at most one ``.``, then a decimal (``n u m k M G T P
E``), binary (``Ki .. Ei``) or exponent (``e3``, ``E-2``) suffix. As in Kubernetes, a number
with no digits (``.``, ``Ki``) is zero.

Invariants: the value is exact, rounded away from zero to nano precision; a binary-suffixed
value is capped at ``2**63 - 1``; the error messages are Kubernetes' (``ERR_FORMAT``,
``ERR_SUFFIX``, ``ERR_NUMERIC``).

Non-guarantees: more than 4,000 significant digits or a decimal exponent beyond ±10,000 is
an error here (Go keeps such values symbolically), which bounds the work a hostile string
can cause.

>>> parse_quantity("500m")
Fraction(1, 2)
>>> parse_quantity("1Gi") == 2**30
True
>>> ceil_div(parse_quantity("250m"), parse_quantity("1"))
1
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Final

from setpoint.apimachinery import regexp

__all__ = ["ERR_FORMAT", "ERR_NUMERIC", "ERR_SUFFIX", "QuantityError", "ceil_div",
           "parse_quantity", "value_of"]

ERR_FORMAT: Final = ("quantities must match the regular expression "
                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
ERR_NUMERIC: Final = "unable to parse numeric part of quantity"
ERR_SUFFIX: Final = "unable to parse quantity's suffix"

_DECIMAL: Final = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                   "E": 18}
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SHAPE: Final = regexp.Regexp(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT: Final = regexp.Regexp(r"[+-]?[0-9]+")
_NANO: Final = Fraction(1, 10**9)
_MAX: Final = Fraction(2**63 - 1)
_MAX_DIGITS: Final = 4000
_MAX_EXPONENT: Final = 10_000


class QuantityError(ValueError):
    """Not a quantity; the message is Kubernetes'."""


def parse_quantity(text: str) -> Fraction:
    """The value of a quantity string (see the module doc)."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    m = _SHAPE.groups(text)
    if m is None:
        raise QuantityError(ERR_FORMAT)
    sign, whole, frac, suffix = (group or "" for group in m)
    if suffix in _DECIMAL:
        base, exponent = 10, _DECIMAL[suffix]
    elif suffix in _BINARY:
        base, exponent = 2, _BINARY[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        if len(suffix[1:].lstrip("+-").lstrip("0")) > 18:  # not an int64, as Go's ParseInt
            raise QuantityError(ERR_SUFFIX)
        base, exponent = 10, int(suffix[1:])
    else:
        raise QuantityError(ERR_SUFFIX)
    digits = (whole + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    if len(digits) > _MAX_DIGITS or abs(exponent) > _MAX_EXPONENT:
        raise QuantityError(ERR_NUMERIC)
    magnitude = Fraction(int(digits), 10 ** len(frac))
    if base == 10:
        magnitude *= Fraction(10) ** exponent
    else:
        # Only binary-suffixed quantities are capped, as in resource.ParseQuantity.
        magnitude = min(magnitude * 2 ** exponent, _MAX)
    magnitude = _round_up_nano(magnitude)
    return -magnitude if sign == "-" else magnitude


def value_of(value: object) -> Fraction:
    """A quantity given as a string, or as the int or float a JSON body may carry."""
    if isinstance(value, bool):
        raise QuantityError(ERR_FORMAT)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(ERR_FORMAT)
        return Fraction(value)
    if not isinstance(value, str):
        raise QuantityError(ERR_FORMAT)
    return parse_quantity(value)


def ceil_div(value: Fraction, divisor: Fraction) -> int:
    """``value / divisor`` rounded up, as the downward API renders resources."""
    if divisor <= 0:
        raise QuantityError("a divisor must be positive")
    return math.ceil(value / divisor)


def _round_up_nano(v: Fraction) -> Fraction:
    scaled = v / _NANO
    whole = scaled.numerator // scaled.denominator
    if whole * scaled.denominator != scaled.numerator:
        whole += 1
    return Fraction(whole) * _NANO
