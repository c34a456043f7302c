"""cel-go's string extension library at version 2, as Kubernetes enables it.

``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``,
``split``, ``substring``, ``trim``, ``join``, ``format`` and ``strings.quote``. Indices count
code points (Go runes), not bytes. ``trim`` strips Go's ``unicode.IsSpace`` characters.

Not guaranteed: ``format``'s ``%e`` prints ``2.718280e+00`` (cel-go before strings v4 used
locale-aware output); other verbs match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from setpoint.cel import types as t
from setpoint.cel.conversions import format_double, to_string
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import (
    MAX_RESULT_CHARS,
    Function,
    actual_size,
    guard_size,
    library,
    member,
    overload,
    string_cost,
)
from setpoint.cel.objects import CelMap, Duration, Timestamp, TypeValue, UInt
from setpoint.cel.operators import is_list, is_map

_GO_SPACE: Final = frozenset(
    "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _s(*values: Any) -> None:
    if any(type(v) is not str for v in values):
        raise NoSuchOverload()


def _i(*values: Any) -> None:
    if any(type(v) is not int for v in values):
        raise NoSuchOverload()


def char_at(s: Any, i: Any) -> str:
    _s(s)
    _i(i)
    if i < 0 or i > len(s):
        raise EvalError(f"index out of range: {i}")
    return str(s[i]) if i < len(s) else ""


def index_of(s: Any, sub: Any, offset: Any = 0) -> int:
    _s(s, sub)
    _i(offset)
    if sub == "":
        return int(offset)
    if offset < 0:
        raise EvalError(f"index out of range: {offset}")
    if offset >= len(s):
        return -1
    return int(s.find(sub, offset))


def last_index_of(s: Any, sub: Any, offset: Any = None) -> int:
    _s(s, sub)
    if offset is None:
        return int(s.rfind(sub))
    _i(offset)
    if sub == "":
        return int(offset)
    if offset < 0 or offset >= len(s):
        raise EvalError(f"index out of range: {offset}")
    last = min(offset, len(s) - len(sub))
    if last < 0:
        return -1
    return int(s.rfind(sub, 0, last + len(sub)))


def lower_ascii(s: Any) -> str:
    _s(s)
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in s)


def upper_ascii(s: Any) -> str:
    _s(s)
    return "".join(chr(ord(c) - 32) if "a" <= c <= "z" else c for c in s)


def replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    _s(s, old, new)
    _i(n)
    count = s.count(old) if old else len(s) + 1
    if n >= 0:
        count = min(count, n)
    guard_size(len(s) + count * (len(new) - len(old)), MAX_RESULT_CHARS)
    return str(s.replace(old, new, n if n >= 0 else -1))


def split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    _s(s, sep)
    _i(n)
    if n == 0:
        return []
    if n == 1:
        return [s]
    if sep == "":
        chars = list(s)
        if n > 0 and len(chars) > n:
            return [*chars[:n - 1], "".join(chars[n - 1:])]
        return chars
    return list(s.split(sep, n - 1 if n > 0 else -1))


def substring(s: Any, start: Any, end: Any = None) -> str:
    _s(s)
    _i(start)
    stop = len(s) if end is None else end
    _i(stop)
    if start > stop:
        raise EvalError(f"invalid substring range. start: {start}, end: {stop}")
    if start < 0 or start > len(s):
        raise EvalError(f"index out of range: {start}")
    if stop < 0 or stop > len(s):
        raise EvalError(f"index out of range: {stop}")
    return str(s[start:stop])


def trim(s: Any) -> str:
    _s(s)
    i, j = 0, len(s)
    while i < j and s[i] in _GO_SPACE:
        i += 1
    while j > i and s[j - 1] in _GO_SPACE:
        j -= 1
    return str(s[i:j])


def join(items: Any, sep: Any = "") -> str:
    if not is_list(items):
        raise NoSuchOverload()
    _s(sep)
    values = list(items)
    if any(type(v) is not str for v in values):
        raise EvalError("join: list elements must be strings")
    guard_size(sum(len(v) for v in values) + len(sep) * len(values), MAX_RESULT_CHARS)
    return str(sep).join(values)


def quote(s: Any) -> str:
    _s(s)
    out = ['"']
    for c in s:
        out.append(_QUOTE_ESCAPES.get(c, c))
    out.append('"')
    return "".join(out)


_QUOTE_ESCAPES: Final = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
                         "\t": "\\t", "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def _format_nested(v: Any) -> str:
    if type(v) is str:
        return quote(v)
    if type(v) is bytes:
        return quote(v.decode("utf-8", "replace"))
    return _format_s(v)


def _format_s(v: Any) -> str:
    if v is None:
        return "null"
    if type(v) is float:
        return format_double(v)
    if is_list(v):
        return "[" + ", ".join(_format_nested(x) for x in v) + "]"
    if is_map(v):
        items = sorted(((_format_nested(k), _format_nested(x)) for k, x in
                        (v.items() if isinstance(v, dict | CelMap) else [])))
        return "{" + ", ".join(f"{k}:{x}" for k, x in items) + "}"
    if type(v) in (Timestamp, Duration, TypeValue, bytes, bool, int, UInt, str):
        return to_string(v)
    raise EvalError(f"error during formatting: string clause can only be used on strings, "
                    f"bools, bytes, ints, doubles, maps, lists, types, durations, and "
                    f"timestamps, was given {type(v).__name__}")


def _format_int(v: Any, verb: str) -> str:
    if type(v) is bool and verb == "b":
        return "1" if v else "0"
    if type(v) is str and verb in "xX":
        text = v.encode().hex()
        return text.upper() if verb == "X" else text
    if type(v) is bytes and verb in "xX":
        return v.hex().upper() if verb == "X" else v.hex()
    if type(v) not in (int, UInt):
        raise EvalError(f"error during formatting: integer clause can only be used on "
                        f"integers, was given {type(v).__name__}")
    n = int(v)
    sign = "-" if n < 0 else ""
    body = {"d": str(abs(n)), "b": bin(abs(n))[2:], "o": oct(abs(n))[2:],
            "x": hex(abs(n))[2:], "X": hex(abs(n))[2:].upper()}[verb]
    return sign + body


def _format_float(v: Any, verb: str, precision: int | None) -> str:
    if type(v) is not float:
        raise EvalError(f"error during formatting: fixed-point clause can only be used on "
                        f"doubles, was given {type(v).__name__}")
    p = 6 if precision is None else precision
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return f"{v:.{p}{verb}}"


def format_string(fmt: Any, args: Any) -> str:
    _s(fmt)
    if not is_list(args):
        raise NoSuchOverload()
    values = list(args)
    out: list[str] = []
    i, n, used = 0, len(fmt), 0
    while i < n:
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        i += 1
        if i < n and fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        precision: int | None = None
        if i < n and fmt[i] == ".":
            j = i + 1
            while j < n and fmt[j].isdigit():
                j += 1
            precision = int(fmt[i + 1:j] or "0")
            i = j
        if i >= n:
            raise EvalError("error during formatting: unexpected end of string")
        verb = fmt[i]
        i += 1
        if used >= len(values):
            raise EvalError(f"index {used} out of range")
        arg = values[used]
        used += 1
        if verb == "s":
            out.append(_format_s(arg))
        elif verb in "dboxX":
            out.append(_format_int(arg, verb))
        elif verb in "fe":
            out.append(_format_float(arg, verb, precision))
        else:
            raise EvalError(f'could not parse formatting clause: unrecognized formatting clause '
                            f'"{verb}"')
    return "".join(out)


def _traversal(factor: float) -> Any:
    def cost(args: Sequence[Any], result: Any) -> int:
        return string_cost(actual_size(args[0]), factor)
    return cost


def _join_cost(args: Sequence[Any], result: Any) -> int:
    return string_cost(actual_size(result), 2)


_S, _I, _LS = t.STRING, t.INT, t.list_of(t.STRING)

STRINGS = library(
    Function("charAt", (member("string_char_at_int", (_S, _I), _S),), char_at),
    Function("indexOf", (member("string_index_of_string", (_S, _S), _I),
                         member("string_index_of_string_int", (_S, _S, _I), _I)), index_of),
    Function("lastIndexOf", (member("string_last_index_of_string", (_S, _S), _I),
                             member("string_last_index_of_string_int", (_S, _S, _I), _I)),
             last_index_of),
    Function("lowerAscii", (member("string_lower_ascii", (_S,), _S),), lower_ascii,
             _traversal(1)),
    Function("upperAscii", (member("string_upper_ascii", (_S,), _S),), upper_ascii,
             _traversal(1)),
    Function("replace", (member("string_replace_string_string", (_S, _S, _S), _S),
                         member("string_replace_string_string_int", (_S, _S, _S, _I), _S)),
             replace, _traversal(2)),
    Function("split", (member("string_split_string", (_S, _S), _LS),
                       member("string_split_string_int", (_S, _S, _I), _LS)),
             split, _traversal(2)),
    Function("substring", (member("string_substring_int", (_S, _I), _S),
                           member("string_substring_int_int", (_S, _I, _I), _S)),
             substring, _traversal(1)),
    Function("trim", (member("string_trim", (_S,), _S),), trim, _traversal(1)),
    Function("join", (member("list_join", (_LS,), _S), member("list_join_string", (_LS, _S), _S)),
             join, _join_cost),
    Function("format", (member("string_format", (_S, t.LIST_DYN), _S),), format_string,
             _traversal(1)),
    Function("strings.quote", (overload("strings_quote", (_S,), _S),), quote, _traversal(1)),
)
