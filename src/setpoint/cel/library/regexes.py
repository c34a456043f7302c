"""Kubernetes' regex library: ``s.find(re)`` and ``s.findAll(re[, n])``.

Patterns are RE2 (checked and compiled by :mod:`setpoint.apimachinery.goregexp`), matched in linear
time; matching follows Go's
``FindString``/``FindAllString``: leftmost-first, and an empty match right after the previous
match is skipped. An invalid constant pattern fails the rule's compilation
(``program instantiation failed: error parsing regexp: ...``); an invalid computed one is the
evaluation error ``Illegal regex: error parsing regexp: ...``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from setpoint.apimachinery import regexp
from setpoint.cel import types as t
from setpoint.cel.errors import (
    CELCompileError,
    CostLimitExceeded,
    EvalError,
    NoSuchOverload,
)
from setpoint.cel.functions import (
    REGEX_LENGTH_FACTOR,
    Function,
    actual_size,
    library,
    member,
)
from setpoint.cel.stdlib import Regex, compile_regex, regex_size


def _compile(p: Any) -> Regex:
    if type(p) is Regex:
        return p
    if type(p) is not str:
        raise NoSuchOverload()
    try:
        return compile_regex(p)
    except EvalError as e:
        raise EvalError(f"Illegal regex: {e}") from None


def _prepare(p: Any) -> Any:
    """A constant pattern is compiled with the program; a bad one fails compilation, as
    cel-go's regex optimization makes it fail (``program instantiation failed``)."""
    if type(p) is not str:
        return p
    try:
        return compile_regex(p)
    except EvalError as e:
        raise CELCompileError(str(e)) from None


def find(s: Any, p: Any) -> str:
    if type(s) is not str:
        raise NoSuchOverload()
    try:
        return _compile(p).compiled.find(s) or ""
    except regexp.BudgetExceeded:
        raise CostLimitExceeded() from None


def find_all(s: Any, p: Any, n: Any = -1) -> list[str]:
    if type(s) is not str or type(n) is not int:
        raise NoSuchOverload()
    try:
        return _compile(p).compiled.findall(s, n if n >= 0 else -1)
    except regexp.BudgetExceeded:
        raise CostLimitExceeded() from None


def _cost(args: Sequence[Any], result: Any) -> int:
    s, p = args[0], args[1]
    return math.ceil((1 + actual_size(s)) * 0.1) * math.ceil(regex_size(p) * REGEX_LENGTH_FACTOR)


REGEXES = library(
    Function("find", (member("string_find_string", (t.STRING, t.STRING), t.STRING),),
             find, _cost, prepare=_prepare),
    Function("findAll", (
        member("string_find_all_string", (t.STRING, t.STRING), t.list_of(t.STRING)),
        member("string_find_all_string_int", (t.STRING, t.STRING, t.INT), t.list_of(t.STRING)),
    ), find_all, _cost, prepare=_prepare, prepare_arg=0),
)
