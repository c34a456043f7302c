"""Kubernetes' quantity library over ``resource.Quantity`` semantics.

``quantity(s)``, ``isQuantity(s)``, ``sign(q)``, and on a quantity: ``isGreaterThan``,
``isLessThan``, ``compareTo``, ``asApproximateFloat``, ``asInteger``, ``isInteger``, ``add``
and ``sub`` (with a quantity or an int). Two quantities are ``==`` when their values are
(``quantity('1Gi') == quantity('1024Mi')``).

Parsing is :mod:`setpoint.apimachinery.quantity` (``resource.ParseQuantity``: exact values
rounded away from zero to nano precision), the parser the API server validates with.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

from setpoint.apimachinery.quantity import QuantityError, parse_quantity
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
