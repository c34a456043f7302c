"""Resource quantities (``500m``, ``64Mi``, ``1e3``) as exact fractions, for the agent.

The agent reads quantities from pod specs (``resources.limits``, ``resourceFieldRef``
divisors, ``emptyDir.sizeLimit``) that the API server has already validated, so this is the
reading half of ``resource.ParseQuantity`` only: an optional sign, digits with at most one
``.``, then a decimal (``n u m k M G T P E``), binary (``Ki .. Ei``) or exponent (``e3``)
suffix. Values are exact :class:`~fractions.Fraction` s.

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

from setpoint.apimachinery.regexp import Regexp

__all__ = ["QuantityError", "ceil_div", "parse_quantity"]

_DECIMAL: Final = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15,
                   "E": 18}
_BINARY: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SHAPE: Final = Regexp(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")
_EXPONENT: Final = Regexp(r"[+-]?[0-9]{1,3}")
_MAX_TEXT: Final = 64  # validated quantities are short; anything longer is not one


class QuantityError(ValueError):
    """Not a quantity."""


def parse_quantity(text: object) -> Fraction:
    """The exact value of a quantity string (an int or float is taken as is)."""
    if isinstance(text, bool):
        raise QuantityError(f"not a quantity: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"not a quantity: {text!r}")
        return Fraction(text)
    if not isinstance(text, str) or not text or len(text) > _MAX_TEXT:
        raise QuantityError(f"not a quantity: {text!r}")
    m = _SHAPE.groups(text)
    if m is None or not (m[1] or m[2]):
        raise QuantityError(f"not a quantity: {text!r}")
    sign, whole, frac, suffix = m[0] or "", m[1] or "", m[2] or "", m[3] or ""
    if suffix in _DECIMAL:
        scale = Fraction(10) ** _DECIMAL[suffix]
    elif suffix in _BINARY:
        scale = Fraction(2) ** _BINARY[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT.fullmatch(suffix[1:]):
        scale = Fraction(10) ** int(suffix[1:])
    else:
        raise QuantityError(f"not a quantity: {text!r}")
    value = Fraction(int((whole + frac) or "0"), 10 ** len(frac)) * scale
    return -value if sign == "-" else value


def ceil_div(value: Fraction, divisor: Fraction) -> int:
    """``value / divisor`` rounded up, as the downward API renders resources."""
    if divisor <= 0:
        raise QuantityError("a divisor must be positive")
    return math.ceil(value / divisor)
