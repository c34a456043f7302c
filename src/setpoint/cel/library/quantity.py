"""Kubernetes' quantity library over ``resource.Quantity`` semantics.

``quantity(s)``, ``isQuantity(s)``, ``sign(q)``, and on a quantity: ``isGreaterThan``,
``isLessThan``, ``compareTo``, ``asApproximateFloat``, ``asInteger``, ``isInteger``, ``add``
and ``sub`` (with a quantity or an int). Two quantities are ``==`` when their values are
(``quantity('1Gi') == quantity('1024Mi')``).

Parsing follows ``resource.ParseQuantity``: an optional sign, digits with at most one ``.``,
then a suffix (``n u m k M G T P E``, ``Ki .. Ei`` or ``e``/``E`` and a signed exponent).
Values are exact rationals, rounded away from zero to nano precision, binary-suffixed ones
capped at ``2**63 - 1``, as Kubernetes does. Not supported: more than 4000 digits or a decimal
exponent beyond ±10000 (an error here; Go represents such values symbolically).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Final

from setpoint.apimachinery import regexp
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import (
    Function,
    actual_size,
    library,
    member,
    overload,
    string_cost,
    string_predicate,
)
from setpoint.cel.objects import INT64_MAX, INT64_MIN, Opaque

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
_MAX: Final = Fraction(INT64_MAX)
# Guards against values whose exact form would be huge (Go keeps them symbolically).
_MAX_DIGITS: Final = 4000
_MAX_EXPONENT: Final = 10_000


class QuantityError(ValueError):
    pass


def parse_quantity(text: str) -> Fraction:
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


def _round_up_nano(v: Fraction) -> Fraction:
    scaled = v / _NANO
    whole = scaled.numerator // scaled.denominator
    if whole * scaled.denominator != scaled.numerator:
        whole += 1
    return Fraction(whole) * _NANO


@dataclass(frozen=True, slots=True, eq=False)
class Quantity(Opaque):
    type_name: ClassVar[str] = "kubernetes.Quantity"
    value: Fraction

    def equals(self, other: Any) -> bool:
        return isinstance(other, Quantity) and self.value == other.value


def _q(v: Any) -> Fraction:
    if not isinstance(v, Quantity):
        raise NoSuchOverload()
    return v.value


def to_quantity(s: Any) -> Quantity:
    if type(s) is not str:
        raise NoSuchOverload()
    try:
        return Quantity(parse_quantity(s))
    except QuantityError as e:
        raise EvalError(str(e)) from None


is_quantity = string_predicate(parse_quantity, QuantityError)


def _as_int(v: Fraction) -> int | None:
    if v.denominator != 1 or not INT64_MIN <= v.numerator <= INT64_MAX:
        return None
    return v.numerator


def as_integer(q: Any) -> int:
    n = _as_int(_q(q))
    if n is None:
        raise EvalError("cannot convert value to integer")
    return n


def _other(v: Any) -> Fraction:
    if type(v) is int:
        return Fraction(v)
    return _q(v)


def _cmp(a: Fraction, b: Fraction) -> int:
    return (a > b) - (a < b)


_Q = t.QUANTITY

QUANTITIES = library(
    Function("quantity", (overload("string_to_quantity", (t.STRING,), _Q),), to_quantity,
             lambda args, result: string_cost(actual_size(args[0]))),
    Function("isQuantity", (overload("is_quantity_string", (t.STRING,), t.BOOL),), is_quantity,
             lambda args, result: string_cost(actual_size(args[0]))),
    Function("sign", (overload("quantity_sign", (_Q,), t.INT),),
             lambda q: _cmp(_q(q), Fraction(0))),
    Function("isGreaterThan", (member("quantity_is_greater_than", (_Q, _Q), t.BOOL),),
             lambda a, b: _q(a) > _q(b)),
    Function("isLessThan", (member("quantity_is_less_than", (_Q, _Q), t.BOOL),),
             lambda a, b: _q(a) < _q(b)),
    Function("compareTo", (member("quantity_compare_to", (_Q, _Q), t.INT),),
             lambda a, b: _cmp(_q(a), _q(b))),
    Function("asApproximateFloat", (member("quantity_get_float", (_Q,), t.DOUBLE),),
             lambda q: float(_q(q))),
    Function("asInteger", (member("quantity_get_int", (_Q,), t.INT),), as_integer),
    Function("isInteger", (member("quantity_is_integer", (_Q,), t.BOOL),),
             lambda q: _as_int(_q(q)) is not None),
    Function("add", (member("quantity_add", (_Q, _Q), _Q),
                     member("quantity_add_int", (_Q, t.INT), _Q)),
             lambda a, b: Quantity(_q(a) + _other(b))),
    Function("sub", (member("quantity_sub", (_Q, _Q), _Q),
                     member("quantity_sub_int", (_Q, t.INT), _Q)),
             lambda a, b: Quantity(_q(a) - _other(b))),
)
