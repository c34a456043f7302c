"""CEL optional values (``cel.OptionalTypes()``), used by ``optionalOldSelf`` rules.

``optional.of(x)``, ``optional.none()``, ``optional.ofNonZeroValue(x)``, and on an optional:
``hasValue()``, ``value()`` (an error on none), ``orValue(default)``, ``or(other)``. The syntax
forms ``a.?b``, ``a[?k]``, ``[?x]``, ``{?k: v}`` and the ``optMap``/``optFlatMap`` macros are
handled by the parser and interpreter.
"""

from __future__ import annotations

from typing import Any

from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import Function, library, member, overload
from setpoint.cel.objects import (
    MIN_UNIX_SECONDS,
    NANOS,
    NONE,
    CelList,
    CelMap,
    Duration,
    Optional,
    Timestamp,
)


def _opt(v: Any) -> Optional:
    if type(v) is not Optional:
        raise NoSuchOverload()
    return v


def _is_zero(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, int | float | str | bytes):
        return not v
    if isinstance(v, list | dict | CelList | CelMap):
        return len(v) == 0
    if type(v) is Duration:
        return bool(v.nanos == 0)
    if type(v) is Timestamp:
        return bool(v.nanos == MIN_UNIX_SECONDS * NANOS)  # Go's zero time: year 1
    return False


def _value(o: Any) -> Any:
    o = _opt(o)
    if not o.present:
        raise EvalError("optional.none() dereference")
    return o.value


def _or_value(o: Any, default: Any) -> Any:
    o = _opt(o)
    return o.value if o.present else default


def _or(o: Any, other: Any) -> Optional:
    o = _opt(o)
    return o if o.present else _opt(other)


OPTIONALS = library(
    Function("optional.of", (overload("optional_of", (t.A,), t.optional_of(t.A)),),
             Optional.of),
    Function("optional.none", (overload("optional_none", (), t.optional_of(t.DYN)),),
             lambda: NONE),
    Function("optional.ofNonZeroValue",
             (overload("optional_ofNonZeroValue", (t.A,), t.optional_of(t.A)),),
             lambda v: NONE if _is_zero(v) else Optional.of(v)),
    Function("hasValue", (member("optional_hasValue", (t.optional_of(t.A),), t.BOOL),),
             lambda o: _opt(o).present),
    Function("value", (member("optional_value", (t.optional_of(t.A),), t.A),), _value),
    Function("orValue", (member("optional_orValue_value", (t.optional_of(t.A), t.A), t.A),),
             _or_value),
    Function("or", (member("optional_or_optional",
                           (t.optional_of(t.A), t.optional_of(t.A)), t.optional_of(t.A)),),
             _or),
)
