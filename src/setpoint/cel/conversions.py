"""CEL's type conversions, as cel-go performs them: ``int()``, ``uint()``, ``double()``,
``string()``, ``bytes()``, ``bool()``, ``timestamp()``, ``duration()``, and ``size()``.

Strings parse with Go's ``strconv`` rules (no surrounding spaces, no underscores) and error
texts; doubles print as Go's ``strconv.FormatFloat(d, 'g', -1, 64)``; timestamps and
durations with :mod:`setpoint.cel.timevals`.
"""

from __future__ import annotations

import math
from typing import Any, Final

from setpoint.apimachinery import regexp
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.objects import (
    INT64_MAX,
    INT64_MIN,
    NANOS,
    UINT64_MAX,
    CelList,
    CelMap,
    Duration,
    Opaque,
    Timestamp,
    TypeValue,
    UInt,
)
from setpoint.cel.timevals import (
    format_duration,
    format_timestamp,
    parse_duration,
    parse_timestamp,
)

_INT_TEXT: Final = regexp.Regexp(r"[+-]?[0-9]+")
_FLOAT_TEXT: Final = regexp.Regexp(
    r"(?i)[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)")
_BOOL_TEXT: Final = {"1": True, "t": True, "T": True, "TRUE": True, "true": True,
                     "True": True, "0": False, "f": False, "F": False, "FALSE": False,
                     "false": False, "False": False}


def to_int(v: Any) -> int:
    tv = type(v)
    if tv is int:
        return int(v)
    if tv is UInt:
        if v > INT64_MAX:
            raise EvalError("integer overflow")
        return int(v)
    if tv is float:
        if math.isnan(v) or not -9.223372036854776e18 < v < 9.223372036854776e18:
            raise EvalError("integer overflow")
        return int(v)
    if tv is str:
        if not _INT_TEXT.fullmatch(v):
            raise EvalError(f'strconv.ParseInt: parsing "{v}": invalid syntax')
        n = int(v)
        if not INT64_MIN <= n <= INT64_MAX:
            raise EvalError(f'strconv.ParseInt: parsing "{v}": value out of range')
        return n
    if tv is Timestamp:
        return int(v.nanos // NANOS)
    raise NoSuchOverload()


def to_uint(v: Any) -> UInt:
    tv = type(v)
    if tv is UInt:
        return UInt(v)
    if tv is int:
        if v < 0:
            raise EvalError("unsigned integer overflow")
        return UInt(v)
    if tv is float:
        if math.isnan(v) or not -1.0 < v < 1.8446744073709552e19:
            raise EvalError("unsigned integer overflow")
        return UInt(int(v))
    if tv is str:
        if not _INT_TEXT.fullmatch(v) or v.startswith("-"):
            raise EvalError(f'strconv.ParseUint: parsing "{v}": invalid syntax')
        n = int(v)
        if n > UINT64_MAX:
            raise EvalError(f'strconv.ParseUint: parsing "{v}": value out of range')
        return UInt(n)
    raise NoSuchOverload()


def to_double(v: Any) -> float:
    tv = type(v)
    if tv is float:
        return float(v)
    if tv is int or tv is UInt:
        return float(v)
    if tv is str:
        if not _FLOAT_TEXT.fullmatch(v):
            raise EvalError(f'strconv.ParseFloat: parsing "{v}": invalid syntax')
        return float(v)
    raise NoSuchOverload()


def format_double(d: float) -> str:
    """Go's ``strconv.FormatFloat(d, 'g', -1, 64)``, as cel-go prints doubles: the shortest
    digits that round-trip, in exponent form when the exponent is below -4 or at least 6."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == 0:
        return "-0" if math.copysign(1.0, d) < 0 else "0"
    mantissa, _, e = repr(abs(d)).partition("e")
    int_part, _, frac = mantissa.partition(".")
    all_digits = int_part + frac
    stripped = all_digits.lstrip("0")
    point = len(int_part) + int(e or "0") - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0") or "0"
    exp = point - 1
    sign = "-" if d < 0 else ""
    if exp < -4 or exp >= 6:
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return f"{sign}{digits}{'0' * (exp + 1 - len(digits))}"
    return f"{sign}{digits[:exp + 1]}.{digits[exp + 1:]}"


def to_string(v: Any) -> str:
    tv = type(v)
    if tv is str:
        return str(v)
    if tv is bool:
        return "true" if v else "false"
    if tv is int or tv is UInt:
        return str(int(v))
    if tv is float:
        return format_double(v)
    if tv is bytes:
        try:
            return str(v.decode("utf-8"))
        except UnicodeDecodeError:
            raise EvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    if tv is Timestamp:
        return format_timestamp(v)
    if tv is Duration:
        return format_duration(v)
    if tv is TypeValue:
        return str(v.name)
    if isinstance(v, Opaque):
        text = getattr(v, "cel_string", None)
        if text is not None:
            return str(text())
    raise NoSuchOverload()


def to_bytes(v: Any) -> bytes:
    if type(v) is bytes:
        return v
    if type(v) is str:
        return v.encode("utf-8")
    raise NoSuchOverload()


def to_bool(v: Any) -> bool:
    if type(v) is bool:
        return v
    if type(v) is str:
        if v in _BOOL_TEXT:
            return _BOOL_TEXT[v]
        raise EvalError(f'strconv.ParseBool: parsing "{v}": invalid syntax')
    raise NoSuchOverload()


def to_timestamp(v: Any) -> Timestamp:
    if type(v) is Timestamp:
        return v
    if type(v) is str:
        return parse_timestamp(v)
    if type(v) is int:
        return Timestamp(v * NANOS)
    raise NoSuchOverload()


def to_duration(v: Any) -> Duration:
    if type(v) is Duration:
        return v
    if type(v) is str:
        return parse_duration(v)
    if type(v) is int:
        return Duration(v * NANOS)
    raise NoSuchOverload()


def size(v: Any) -> int:
    if isinstance(v, str | bytes | list | dict | CelList | CelMap):
        return len(v)
    raise NoSuchOverload()
