"""How the Kubernetes API server sees JSON values, reproduced for Python's JSON values.

The API server decodes a custom resource into Go values: ``int64`` for integral numbers that
fit, ``float64`` for every other number, ``string``, ``bool``, ``map[string]interface{}``,
``[]interface{}`` and ``nil``. Python's JSON decoders give ``int``, ``float``, ``str``, ``bool``,
``dict``, ``list`` and ``None``. The two agree except where Python is looser:

* ``1 == 1.0 == True`` in Python, but Go's ``reflect.DeepEqual`` tells ``int64(1)``,
  ``float64(1)`` and ``true`` apart (:func:`deep_equal`);
* a Python ``int`` outside the int64 range is a ``float64`` to Go (:func:`kind_of`);
* Go prints floats differently from ``repr`` (:func:`format_float_v`, :func:`format_float_json`)
  and quotes strings differently from ``json.dumps`` (:func:`quote`).

Invariants: every function here is pure and total on JSON values (it never raises for a value a
JSON decoder can produce), and none mutates its arguments.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Kinds, as Go's reflect would report them for a decoded JSON value.
NIL = "nil"
BOOL = "bool"
STRING = "string"
INT = "int"
FLOAT = "float"
MAP = "map"
SLICE = "slice"

_MAX_JSON_FLOAT = float((1 << 53) - 1)
_EPSILON = 1e-9


def kind_of(value: Any) -> str:
    """The Go kind of a decoded JSON value (``int`` only for integers that fit in int64)."""
    t = type(value)
    if t is str:
        return STRING
    if t is dict:
        return MAP
    if t is list:
        return SLICE
    if t is bool:
        return BOOL
    if t is int:
        return INT if INT64_MIN <= value <= INT64_MAX else FLOAT
    if t is float:
        return FLOAT
    if value is None:
        return NIL
    # Subclasses and other types: classify by the nearest JSON type.
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return INT if INT64_MIN <= value <= INT64_MAX else FLOAT
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, str):
        return STRING
    if isinstance(value, dict):
        return MAP
    if isinstance(value, list | tuple):
        return SLICE
    return STRING


def is_json_integer(f: float) -> bool:
    """go-openapi's ``swag.IsFloat64AJSONInteger``: integral (within a relative 1e-9) and ≤ 2^53."""
    if math.isnan(f) or math.isinf(f) or f < -_MAX_JSON_FLOAT or f > _MAX_JSON_FLOAT:
        return False
    g = float(math.trunc(f))
    if f == g:
        return True
    diff = abs(f - g)
    if g == 0:
        return diff < _EPSILON * 5e-324
    return diff / min(abs(f) + abs(g), 1.7976931348623157e308) < _EPSILON


def float_to_int64(f: float) -> int:
    """Go's ``int64(f)`` on amd64: truncation, and the "integer indefinite" value on overflow."""
    if math.isnan(f) or not (-9.223372036854775808e18 <= f < 9.223372036854775808e18):
        return INT64_MIN
    return int(f)


def _shortest_digits(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of ``abs(f)`` and the decimal point position.

    The value is ``0.<digits> * 10**dp``. Zero is ``("0", 1)``.
    """
    text = repr(abs(f))
    mantissa, _, exp_text = text.partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    dp = len(int_part) + exp
    stripped = digits.lstrip("0")
    dp -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    if not digits:
        return "0", 1
    return digits, dp


def _fmt_e(neg: bool, digits: str, dp: int, min_exp_digits: int) -> str:
    exp = dp - 1
    text = digits[0]
    if len(digits) > 1:
        text += "." + digits[1:]
    sign = "-" if exp < 0 else "+"
    text += "e" + sign + str(abs(exp)).rjust(min_exp_digits, "0")
    return ("-" if neg else "") + text


def _fmt_f(neg: bool, digits: str, dp: int) -> str:
    if dp <= 0:
        text = "0." + "0" * (-dp) + digits
    elif dp >= len(digits):
        text = digits + "0" * (dp - len(digits))
    else:
        text = digits[:dp] + "." + digits[dp:]
    return ("-" if neg else "") + text


def format_float_v(f: float) -> str:
    """Go's ``fmt.Sprintf("%v", f)`` for a float64: ``10``, ``1.5``, ``1e+08``, ``1e-05``."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    neg = f < 0 or (f == 0 and math.copysign(1.0, f) < 0)
    digits, dp = _shortest_digits(f)
    if digits == "0":
        return "-0" if neg else "0"
    exp = dp - 1
    if exp < -4 or exp >= 6:
        return _fmt_e(neg, digits, dp, 2)
    return _fmt_f(neg, digits, dp)


def format_float_json(f: float) -> str:
    """Go's ``encoding/json`` rendering of a float64: ``1``, ``1.5``, ``1e+21``, ``1e-7``."""
    if math.isnan(f) or math.isinf(f):
        return "null"
    neg = f < 0
    digits, dp = _shortest_digits(f)
    if digits == "0":
        return "-0" if neg and math.copysign(1.0, f) < 0 else "0"
    a = abs(f)
    if a < 1e-6 or a >= 1e21:
        text = _fmt_e(neg, digits, dp, 2)
        # Go's encoder cleans "e-07" up to "e-7" (only for negative exponents).
        if len(text) >= 4 and text[-4] == "e" and text[-3] == "-" and text[-2] == "0":
            text = text[:-2] + text[-1]
        return text
    return _fmt_f(neg, digits, dp)


def format_value_v(value: Any) -> str:
    """Go's ``%v`` for the numbers that appear in kube-openapi messages."""
    if type(value) is float:
        return format_float_v(value)
    if type(value) is bool:
        return "true" if value else "false"
    return str(value)


_GO_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
    "\\": "\\\\", '"': '\\"',
}


def quote(s: str) -> str:
    """Go's ``strconv.Quote`` (what ``%q`` prints)."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return '"' + s + '"'
    out = ['"']
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        else:
            cp = ord(ch)
            if 0xD800 <= cp <= 0xDFFF:
                out.append("\\ufffd")
            elif cp < 0x80:
                out.append(f"\\x{cp:02x}")
            elif cp < 0x10000:
                out.append(f"\\u{cp:04x}")
            else:
                out.append(f"\\U{cp:08x}")
    out.append('"')
    return "".join(out)


def _json_string(s: str) -> str:
    """A string as Go's ``encoding/json`` writes it (HTML-safe, U+2028/9 escaped)."""
    out = ['"']
    for ch in s:
        cp = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif cp < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, f"\\u{cp:04x}"))
        elif ch in "<>&" or cp in (0x2028, 0x2029):
            out.append(f"\\u{cp:04x}")
        elif 0xD800 <= cp <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def to_json(value: Any) -> str:
    """Go's ``json.Marshal`` of a decoded JSON value: compact, map keys sorted."""
    k = kind_of(value)
    if k == STRING:
        return _json_string(value)
    if k == INT:
        return str(int(value))
    if k == FLOAT:
        return format_float_json(float(value))
    if k == BOOL:
        return "true" if value else "false"
    if k == NIL:
        return "null"
    if k == MAP:
        items = sorted(value.items(), key=lambda kv: kv[0])
        return "{" + ",".join(_json_string(str(key)) + ":" + to_json(v) for key, v in items) + "}"
    return "[" + ",".join(to_json(v) for v in value) + "]"


def deep_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` on decoded JSON values (types must match: ``1`` is not ``1.0``)."""
    if a is b:
        return not (type(a) is float and math.isnan(a))
    try:
        if a != b:
            return False
    except Exception:  # pragma: no cover - exotic user types
        return False
    return _strict_equal(a, b)


def _strict_equal(a: Any, b: Any) -> bool:
    """Called only when ``a == b`` in Python: checks that the Go types also agree."""
    ta = type(a)
    if ta is not type(b):
        ka = kind_of(a)
        if ka != kind_of(b):
            return False
        if ka in (MAP, SLICE):
            return _container_equal(a, b)
        return True
    if ta is dict:
        return all(_strict_equal(va, b[key]) for key, va in a.items())
    if ta is list:
        return all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if ta is int and not (INT64_MIN <= a <= INT64_MAX):
        return float(a) == float(b)
    return True


def _container_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return all(_strict_equal(va, b[key]) for key, va in a.items())
    return all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))


def enum_matches(data: Any, allowed: Any) -> bool:
    """kube-openapi's enum comparison: convert ``data`` to the enum value's Go type, then compare.

    Go can convert an int64 to float64 (and back, truncating) and an int64 to a one-rune
    string; every other pair of different types never matches.
    """
    dk = kind_of(data)
    ak = kind_of(allowed)
    if dk == NIL or ak == NIL:
        return False
    if dk == ak:
        if dk == INT:
            return bool(data == allowed)
        return deep_equal(data, allowed)
    if dk == INT and ak == FLOAT:
        return bool(float(data) == float(allowed))
    if dk == FLOAT and ak == INT:
        return bool(float_to_int64(float(data)) == allowed)
    if dk == INT and ak == STRING:
        return bool(rune_string(int(data)) == allowed)
    return False


def rune_string(code: int) -> str:
    """Go's ``string(rune(i))``: invalid code points become U+FFFD."""
    if 0 <= code <= 0x10FFFF and not (0xD800 <= code <= 0xDFFF):
        return chr(code)
    return "\ufffd"


def is_scalar(value: Any) -> bool:
    return type(value) not in (dict, list)
