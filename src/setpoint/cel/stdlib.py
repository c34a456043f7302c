"""CEL's standard definitions: the declarations of every standard function and operator,
and the string, regex and time functions.

The operators themselves live in :mod:`~setpoint.cel.operators` and the conversions in
:mod:`~setpoint.cel.conversions`; :data:`STANDARD` binds them to their overloads and
cel-go's costs.

Regular expressions are RE2 (Go's ``regexp``): patterns are checked and compiled by
:mod:`setpoint.apimachinery.goregexp`, so an invalid one fails with Go's message, and matching
runs on RE2 in time linear in the text (the cost limit could not interrupt a backtracking
match).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from setpoint.apimachinery import goregexp, regexp
from setpoint.cel import types as t
from setpoint.cel.conversions import (
    size,
    to_bool,
    to_bytes,
    to_double,
    to_duration,
    to_int,
    to_string,
    to_timestamp,
    to_uint,
)
from setpoint.cel.errors import CostLimitExceeded, EvalError, NoSuchOverload
from setpoint.cel.functions import (
    REGEX_LENGTH_FACTOR,
    Function,
    Library,
    actual_size,
    library,
    member,
    overload,
    string_cost,
)
from setpoint.cel.objects import NANOS, Duration, Timestamp, TypeValue, type_of
from setpoint.cel.operators import (
    add,
    contains_value,
    divide,
    equals,
    greater,
    greater_equal,
    is_list,
    less,
    less_equal,
    logical_not,
    modulo,
    multiply,
    negate,
    subtract,
)
from setpoint.cel.timevals import local_fields, parse_duration, parse_timestamp

# -- strings ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Regex:
    """A compiled RE2 pattern; ``source`` is the pattern as written (it sizes the cost)."""

    source: str
    compiled: regexp.Regexp


def compile_regex(pattern: str) -> Regex:
    """Compile with Go's rules; invalid patterns fail with Go's ``error parsing regexp``."""
    try:
        return Regex(pattern, goregexp.compile_pattern(pattern))
    except goregexp.PatternError as e:
        raise EvalError(str(e)) from None


def _pattern(p: Any) -> Regex:
    if type(p) is Regex:
        return p
    if type(p) is str:
        return compile_regex(p)
    raise NoSuchOverload()


def matches(s: Any, p: Any) -> bool:
    if type(s) is not str:
        raise NoSuchOverload()
    try:
        return _pattern(p).compiled.search(s)
    except regexp.BudgetExceeded:
        raise CostLimitExceeded() from None


def prepare_regex(p: Any) -> Any:
    """Precompile a constant pattern; leave anything else (or a bad pattern) for run time."""
    if type(p) is str:
        try:
            return compile_regex(p)
        except EvalError:
            return p
    return p


def regex_size(p: Any) -> int:
    return len(p.source) if type(p) is Regex else actual_size(p)


def _str_args(*args: Any) -> None:
    if any(type(a) is not str for a in args):
        raise NoSuchOverload()


def contains(s: Any, sub: Any) -> bool:
    _str_args(s, sub)
    return bool(sub in s)


def starts_with(s: Any, prefix: Any) -> bool:
    _str_args(s, prefix)
    return bool(s.startswith(prefix))


def ends_with(s: Any, suffix: Any) -> bool:
    _str_args(s, suffix)
    return bool(s.endswith(suffix))


# -- time ---------------------------------------------------------------------------------

def _timestamp_getter(field: str) -> Any:
    def get(ts: Any, zone: Any = "UTC") -> int:
        if type(ts) is Duration and field in _DURATION_FIELDS and zone == "UTC":
            return _DURATION_FIELDS[field](ts)
        if type(ts) is not Timestamp or type(zone) is not str:
            raise NoSuchOverload()
        f = local_fields(ts, zone)
        return {
            "getFullYear": f.year, "getMonth": f.month - 1, "getDate": f.day,
            "getDayOfMonth": f.day - 1, "getDayOfWeek": f.weekday,
            "getDayOfYear": f.yearday - 1, "getHours": f.hour, "getMinutes": f.minute,
            "getSeconds": f.second, "getMilliseconds": f.millisecond,
        }[field]
    return get


_DURATION_FIELDS: Final = {
    "getHours": lambda d: int(d.nanos / (3600 * NANOS)),
    "getMinutes": lambda d: int(d.nanos / (60 * NANOS)),
    "getSeconds": lambda d: int(d.nanos / NANOS),
    "getMilliseconds": lambda d: int(d.nanos / 1_000_000),
}


# -- declarations -------------------------------------------------------------------------

def _eq_cost(args: Sequence[Any], result: Any) -> int:
    """cel-go charges equality by the smaller operand's size (0 for two empty strings)."""
    return string_cost(min(actual_size(args[0]), actual_size(args[1])))


def _cmp_cost(args: Sequence[Any], result: Any) -> int:
    a, b = args
    if type(a) in (str, bytes):
        return string_cost(min(actual_size(a), actual_size(b)))
    return 1


def _add_cost(args: Sequence[Any], result: Any) -> int:
    a, b = args
    if type(a) in (str, bytes):
        return string_cost(actual_size(a) + actual_size(b))
    if is_list(result):
        # cel-go charges 1; charging a tenth per element beyond ten keeps repeated
        # concatenation of large lists bounded (identical for lists of up to ten elements).
        return max(1, string_cost(len(result)))
    return 1


def _in_cost(args: Sequence[Any], result: Any) -> int:
    container = args[1]
    return actual_size(container) if is_list(container) else 1


def _matches_cost(args: Sequence[Any], result: Any) -> int:
    s, p = args
    return math.ceil((1 + actual_size(s)) * 0.1) * math.ceil(regex_size(p) * REGEX_LENGTH_FACTOR)


def _contains_cost(args: Sequence[Any], result: Any) -> int:
    return string_cost(actual_size(args[0])) * string_cost(actual_size(args[1]))


def _prefix_cost(args: Sequence[Any], result: Any) -> int:
    # Kubernetes' cost tests charge startsWith/endsWith by the prefix, not the receiver.
    return string_cost(actual_size(args[1]))


def _regex_literal_check(args: Sequence[Any]) -> str | None:
    if args and type(args[0]) is str and goregexp.error(args[0]) is not None:
        return "invalid matches argument"
    return None


def _eval_literal_check(name: str, fn: Any) -> Any:
    def check(args: Sequence[Any]) -> str | None:
        if args and type(args[0]) is str:
            try:
                fn(args[0])
            except EvalError:
                return f"invalid {name} argument"
        return None
    return check


_A, _B = t.A, t.B
_NUMS: Final = (t.INT, t.UINT, t.DOUBLE)


def _relational(name: str, impl: Any) -> Function:
    ovs = [overload(f"{name}_{x}", (x, x), t.BOOL) for x in t.COMPARABLE]
    ovs += [overload(f"{name}_{x}_{y}", (x, y), t.BOOL) for x in _NUMS for y in _NUMS if x != y]
    return Function(name, tuple(ovs), impl, _cmp_cost)


def _time_accessor(name: str) -> Function:
    ovs = [member(f"timestamp_{name}", (t.TIMESTAMP,), t.INT),
           member(f"timestamp_{name}_with_tz", (t.TIMESTAMP, t.STRING), t.INT)]
    if name in _DURATION_FIELDS:
        ovs.append(member(f"duration_{name}", (t.DURATION,), t.INT))
    return Function(name, tuple(ovs), _timestamp_getter(name))


def _equals_fn(a: Any, b: Any) -> bool:
    return equals(a, b)


def _not_equals_fn(a: Any, b: Any) -> bool:
    return not equals(a, b)


def _type_fn(v: Any) -> TypeValue:
    return type_of(v)


def _dyn_fn(v: Any) -> Any:
    return v


STANDARD: Final[Library] = library(
    Function("_==_", (overload("equals", (_A, _A), t.BOOL),), _equals_fn, _eq_cost),
    Function("_!=_", (overload("not_equals", (_A, _A), t.BOOL),), _not_equals_fn, _eq_cost),
    _relational("_<_", less),
    _relational("_<=_", less_equal),
    _relational("_>_", greater),
    _relational("_>=_", greater_equal),
    Function("_+_", (
        overload("add_int64", (t.INT, t.INT), t.INT),
        overload("add_uint64", (t.UINT, t.UINT), t.UINT),
        overload("add_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE),
        overload("add_string", (t.STRING, t.STRING), t.STRING),
        overload("add_bytes", (t.BYTES, t.BYTES), t.BYTES),
        overload("add_list", (t.list_of(_A), t.list_of(_A)), t.list_of(_A)),
        overload("add_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP),
        overload("add_duration_timestamp", (t.DURATION, t.TIMESTAMP), t.TIMESTAMP),
        overload("add_duration_duration", (t.DURATION, t.DURATION), t.DURATION),
    ), add, _add_cost),
    Function("_-_", (
        overload("subtract_int64", (t.INT, t.INT), t.INT),
        overload("subtract_uint64", (t.UINT, t.UINT), t.UINT),
        overload("subtract_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE),
        overload("subtract_timestamp_timestamp", (t.TIMESTAMP, t.TIMESTAMP), t.DURATION),
        overload("subtract_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP),
        overload("subtract_duration_duration", (t.DURATION, t.DURATION), t.DURATION),
    ), subtract),
    Function("_*_", tuple(overload(f"multiply_{x}", (x, x), x) for x in _NUMS), multiply),
    Function("_/_", tuple(overload(f"divide_{x}", (x, x), x) for x in _NUMS), divide),
    Function("_%_", tuple(overload(f"modulo_{x}", (x, x), x) for x in (t.INT, t.UINT)), modulo),
    Function("-_", (overload("negate_int64", (t.INT,), t.INT),
                    overload("negate_double", (t.DOUBLE,), t.DOUBLE)), negate),
    Function("!_", (overload("logical_not", (t.BOOL,), t.BOOL),), logical_not),
    Function("@in", (overload("in_list", (_A, t.list_of(_A)), t.BOOL),
                     overload("in_map", (_A, t.map_of(_A, _B)), t.BOOL)),
             lambda v, c: contains_value(c, v), _in_cost),
    Function("size", (
        overload("size_string", (t.STRING,), t.INT), member("string_size", (t.STRING,), t.INT),
        overload("size_bytes", (t.BYTES,), t.INT), member("bytes_size", (t.BYTES,), t.INT),
        overload("size_list", (t.list_of(_A),), t.INT),
        member("list_size", (t.list_of(_A),), t.INT),
        overload("size_map", (t.map_of(_A, _B),), t.INT),
        member("map_size", (t.map_of(_A, _B),), t.INT),
    ), size),
    Function("int", (overload("int64_to_int64", (t.INT,), t.INT),
                     overload("uint64_to_int64", (t.UINT,), t.INT),
                     overload("double_to_int64", (t.DOUBLE,), t.INT),
                     overload("string_to_int64", (t.STRING,), t.INT),
                     overload("timestamp_to_int64", (t.TIMESTAMP,), t.INT)), to_int),
    Function("uint", (overload("uint64_to_uint64", (t.UINT,), t.UINT),
                      overload("int64_to_uint64", (t.INT,), t.UINT),
                      overload("double_to_uint64", (t.DOUBLE,), t.UINT),
                      overload("string_to_uint64", (t.STRING,), t.UINT)), to_uint),
    Function("double", (overload("double_to_double", (t.DOUBLE,), t.DOUBLE),
                        overload("int64_to_double", (t.INT,), t.DOUBLE),
                        overload("uint64_to_double", (t.UINT,), t.DOUBLE),
                        overload("string_to_double", (t.STRING,), t.DOUBLE)), to_double),
    Function("string", (overload("string_to_string", (t.STRING,), t.STRING),
                        overload("int64_to_string", (t.INT,), t.STRING),
                        overload("uint64_to_string", (t.UINT,), t.STRING),
                        overload("double_to_string", (t.DOUBLE,), t.STRING),
                        overload("bool_to_string", (t.BOOL,), t.STRING),
                        overload("bytes_to_string", (t.BYTES,), t.STRING),
                        overload("timestamp_to_string", (t.TIMESTAMP,), t.STRING),
                        overload("duration_to_string", (t.DURATION,), t.STRING)), to_string,
             lambda args, result: string_cost(actual_size(args[0]))
             if type(args[0]) is bytes else 1),
    Function("bytes", (overload("bytes_to_bytes", (t.BYTES,), t.BYTES),
                       overload("string_to_bytes", (t.STRING,), t.BYTES)), to_bytes,
             lambda args, result: string_cost(actual_size(args[0])) if type(args[0]) is str
             else 1),
    Function("bool", (overload("bool_to_bool", (t.BOOL,), t.BOOL),
                      overload("string_to_bool", (t.STRING,), t.BOOL)), to_bool),
    Function("timestamp", (overload("timestamp_to_timestamp", (t.TIMESTAMP,), t.TIMESTAMP),
                           overload("string_to_timestamp", (t.STRING,), t.TIMESTAMP),
                           overload("int64_to_timestamp", (t.INT,), t.TIMESTAMP)),
             to_timestamp, literal_check=_eval_literal_check("timestamp", parse_timestamp)),
    Function("duration", (overload("duration_to_duration", (t.DURATION,), t.DURATION),
                          overload("string_to_duration", (t.STRING,), t.DURATION),
                          overload("int64_to_duration", (t.INT,), t.DURATION)),
             to_duration, literal_check=_eval_literal_check("duration", parse_duration)),
    Function("dyn", (overload("to_dyn", (t.DYN,), t.DYN),), _dyn_fn),
    Function("type", (overload("type", (_A,), t.type_of(_A)),), _type_fn),
    Function("matches", (overload("matches", (t.STRING, t.STRING), t.BOOL),
                         member("matches_string", (t.STRING, t.STRING), t.BOOL)),
             matches, _matches_cost, _regex_literal_check, prepare_regex),
    Function("contains", (member("contains_string", (t.STRING, t.STRING), t.BOOL),),
             contains, _contains_cost),
    Function("startsWith", (member("starts_with_string", (t.STRING, t.STRING), t.BOOL),),
             starts_with, _prefix_cost),
    Function("endsWith", (member("ends_with_string", (t.STRING, t.STRING), t.BOOL),),
             ends_with, _prefix_cost),
    *(_time_accessor(name) for name in (
        "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear",
        "getHours", "getMinutes", "getSeconds", "getMilliseconds")),
)
