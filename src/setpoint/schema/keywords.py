"""Per-keyword value checks of kube-openapi's validators, and the raw-error vocabulary.

Each ``*_checker`` compiles one group of keywords of a node into a closure (or ``None`` when
the node has none of them): the type validator, the string validator (``maxLength``,
``minLength``, ``pattern`` — only the first failure is reported, as upstream), the format
validator, the number validator (``multipleOf``, ``minimum``, ``maximum`` with Go's native-type
quirks) and the enum validator. :func:`to_field_errors` maps raw errors to
:class:`~setpoint.apimachinery.fields.FieldError` as ``kubeOpenAPIResultToFieldErrors`` does.

Invariants: a raw error is ``(code, name, value, detail)`` where ``name`` is kube-openapi's path
string (``spec.items[0].name``; ``None`` for errors without a path); checks never mutate the
value they look at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from setpoint.apimachinery import fields, goregexp, govalues, regexp
from setpoint.schema import formats
from setpoint.schema.structural import Node

REQUIRED = "required"
ENUM = "enum"
TOO_LONG = "toolong"
TOO_MANY = "toomany"
TYPE = "type"
INVALID = "invalid"
COMPOSITE = "composite"

RawError = tuple[str, Any, Any, Any]
Errs = list[RawError]
ValidateFn = Callable[[Any, str, Errs], int]
RatchetFn = Callable[[Any, Any, str, Errs], None]
EqualFn = Callable[[Any, Any], bool]

_I64_MIN = govalues.INT64_MIN
_I64_MAX = govalues.INT64_MAX
_quote = govalues.quote
_fv = govalues.format_float_v


# --- type checking ----------------------------------------------------------------------------

# kind -> (JSON schema type, Go format) as typeValidator.schemaInfoForType reports them.
_SCHEMA_INFO = {
    "str": ("string", ""), "dict": ("object", ""), "list": ("array", ""),
    "bool": ("boolean", ""), "int": ("integer", "int64"),
    "float": ("number", "float64"), "floatint": ("number", "float64"),
}


def type_outcome(types: tuple[str, ...], fmt: str, kind: str) -> str | None:
    """The bad-value text of typeValidator's error for ``kind``, or ``None`` if it passes."""
    sch, gofmt = _SCHEMA_INFO[kind]
    is_float_int = kind == "floatint" and "integer" in types
    is_int_float = sch == "integer" and "number" in types
    go_kind_is_str_or_slice = kind in ("str", "list")
    if (not go_kind_is_str_or_slice and fmt
            and not (sch in types or gofmt == fmt or is_float_int or is_int_float)):
        return "\x00" + fmt + "\x00" + gofmt
    if not ("number" in types or "integer" in types) and fmt and go_kind_is_str_or_slice:
        return None
    if not (sch in types or is_float_int or is_int_float):
        return "\x00" + ",".join(types) + "\x00" + sch
    return None


TypeFn = Callable[[Any, type, str, Errs], int]


def type_checker(types: tuple[str, ...], fmt: str) -> TypeFn | None:
    if not types and not fmt:
        return None
    table: dict[type, tuple[str, str] | None] = {}
    for py, kind in ((str, "str"), (dict, "dict"), (list, "list"), (bool, "bool"), (int, "int")):
        out = type_outcome(types, fmt, kind)
        table[py] = None if out is None else _split(out)
    out_float = type_outcome(types, fmt, "float")
    out_floatint = type_outcome(types, fmt, "floatint")
    f_bad = None if out_float is None else _split(out_float)
    fi_bad = None if out_floatint is None else _split(out_floatint)
    float_depends = f_bad != fi_bad
    table[float] = f_bad

    if all(v is None for v in table.values()) and fi_bad is None:
        return None

    def check(value: Any, t: type, path: str, errs: Errs) -> int:
        if t is float and float_depends and govalues.is_json_integer(value):
            bad = fi_bad
        else:
            bad = table.get(t, f_bad)
        if bad is None:
            return 1
        tname, shown = bad
        errs.append((TYPE, path, shown, f"{path} in body must be of type {tname}: {_quote(shown)}"))
        return 0

    return check


def _split(out: str) -> tuple[str, str]:
    _, tname, shown = out.split("\x00")
    return tname, shown


# --- per-keyword checks -----------------------------------------------------------------------

StrFn = Callable[[str, str, Errs], None]


def string_checker(node: Node) -> StrFn | None:
    max_len = node.max_length
    min_len = node.min_length
    pattern = node.pattern
    compiled = None
    pattern_error = None
    if pattern:
        try:
            compiled = goregexp.compile_pattern(pattern)
        except goregexp.PatternError as e:
            pattern_error = str(e)
    if max_len is None and min_len is None and not pattern:
        return None
    search = compiled.search if compiled is not None else None

    def check(value: str, path: str, errs: Errs) -> None:
        if max_len is not None and len(value) > max_len:
            errs.append((TOO_LONG, path, None, max_len))
            return
        if min_len is not None and len(value) < min_len:
            errs.append((INVALID, path, value,
                         f"{path} in body should be at least {min_len} chars long"))
            return
        if search is not None:
            try:
                found = search(value)
            except regexp.BudgetExceeded:
                errs.append((INVALID, path, value,
                             f"{path} in body should match '{pattern}', but checking a value "
                             f"this long against it would take too long"))
                return
            if not found:
                errs.append((INVALID, path, value, f"{path} in body should match '{pattern}'"))
        elif pattern_error is not None:
            errs.append((INVALID, path, value,
                         f"{path} in body should match '{pattern}, but pattern is invalid: "
                         f"{pattern_error}'"))

    return check


def format_checker(fmt: str) -> StrFn | None:
    if not fmt:
        return None
    valid = formats.validator(fmt)
    if valid is None:
        return None

    def check(value: str, path: str, errs: Errs) -> None:
        if not valid(value):
            errs.append((TYPE, path, value,
                         f"{path} in body must be of type {fmt}: {_quote(value)}"))

    return check


NumFn = Callable[[Any, type, str, Errs], None]


def number_checker(node: Node) -> NumFn | None:
    mult = node.multiple_of
    mx = node.maximum
    mn = node.minimum
    ex_max = node.exclusive_maximum
    ex_min = node.exclusive_minimum
    if mult is None and mx is None and mn is None:
        return None
    mult_i = govalues.float_to_int64(mult) if mult is not None else 0
    mx_i = govalues.float_to_int64(mx) if mx is not None else 0
    mn_i = govalues.float_to_int64(mn) if mn is not None else 0
    max_word = "less than" if ex_max else "less than or equal to"
    min_word = "greater than" if ex_min else "greater than or equal to"

    def check(value: Any, t: type, path: str, errs: Errs) -> None:
        if t is int:
            if mult is not None:
                if mult_i <= 0:
                    errs.append((INVALID, path, mult_i, f"factor MultipleOf declared for {path} "
                                 f"must be positive: {mult_i}"))
                elif value % mult_i != 0:
                    errs.append((INVALID, path, value,
                                 f"{path} in body should be a multiple of {mult_i}"))
            if mn is not None and (value <= mn_i if ex_min else value < mn_i):
                errs.append((INVALID, path, value, f"{path} in body should be {min_word} {mn_i}"))
            if mx is not None and (value >= mx_i if ex_max else value > mx_i):
                errs.append((INVALID, path, value, f"{path} in body should be {max_word} {mx_i}"))
            return
        if mult is not None:
            if mult <= 0:
                errs.append((INVALID, path, mult, f"factor MultipleOf declared for {path} "
                             f"must be positive: {_fv(mult)}"))
            else:
                try:
                    q = (1 / mult * value) if mult < 1 else (value / mult)
                except (OverflowError, ZeroDivisionError):
                    q = math.inf
                if not govalues.is_json_integer(q):
                    errs.append((INVALID, path, value,
                                 f"{path} in body should be a multiple of {_fv(mult)}"))
        if mn is not None and (value <= mn if ex_min else value < mn):
            errs.append((INVALID, path, value, f"{path} in body should be {min_word} {_fv(mn)}"))
        if mx is not None and (value >= mx if ex_max else value > mx):
            errs.append((INVALID, path, value, f"{path} in body should be {max_word} {_fv(mx)}"))

    return check


AnyFn = Callable[[Any, str, Errs], None]


def enum_checker(node: Node) -> AnyFn | None:
    enum = node.enum
    if not enum:
        return None
    supported = tuple(e if isinstance(e, str) else govalues.to_json(e) for e in enum)
    str_set = frozenset(e for e in enum if type(e) is str)
    others = tuple(e for e in enum if type(e) is not str)
    strings = tuple(e for e in enum if type(e) is str)

    def check(value: Any, path: str, errs: Errs) -> None:
        if type(value) is str:
            if value in str_set:
                return
        elif value is not None:
            for e in others:
                if govalues.enum_matches(value, e):
                    return
            if type(value) is int:
                for e in strings:
                    if govalues.enum_matches(value, e):
                        return
        errs.append((ENUM, path, value, supported))

    return check


def _canonical(value: Any) -> Any:
    """A hashable key equal for two values iff ``reflect.DeepEqual`` holds."""
    t = type(value)
    if t is str:
        return ("s", value)
    if t is bool:
        return ("b", value)
    if t is int:
        return ("i", value) if _I64_MIN <= value <= _I64_MAX else ("f", float(value))
    if t is float:
        return ("f", value) if value == value else ("nan", id(value))
    if value is None:
        return ("n",)
    if t is dict:
        return ("m", tuple(sorted((k, _canonical(v)) for k, v in value.items())))
    if t is list:
        return ("l", tuple(_canonical(v) for v in value))
    return ("s", str(value))


def has_duplicates(items: list[Any]) -> bool:
    seen: set[Any] = set()
    for item in items:
        key = _canonical(item)
        if key in seen:
            return True
        seen.add(key)
    return False


# --- conversion to field errors ---------------------------------------------------------------

def _field_name(name: Any, prefix: str | None) -> str:
    if name and name != ".":
        child = name[1:] if name.startswith(".") else name
        return f"{prefix}.{child}" if prefix else child
    return prefix if prefix else "<nil>"


def to_field_errors(raw: Errs, prefix: str | None = None) -> list[fields.FieldError]:
    """Map raw errors to field errors as ``kubeOpenAPIResultToFieldErrors`` does.

    ``prefix`` is the field path the validated value sits at (``None`` for a whole object).
    Duplicates (the same check reached twice, e.g. through two ``allOf`` branches) collapse.
    """
    out: list[fields.FieldError] = []
    seen: set[tuple[str, Any, Any]] = set()
    for code, name, value, detail in raw:
        key = (code, name, detail)
        if key in seen:
            continue
        seen.add(key)
        if code == COMPOSITE:
            out.append(fields.invalid(prefix if prefix else "<nil>", "", detail))
            continue
        field_name = _field_name(name, prefix)
        if code == REQUIRED:
            out.append(fields.required(field_name))
        elif code == ENUM:
            out.append(fields.not_supported(field_name, value, detail))
        elif code == TOO_LONG:
            out.append(fields.too_long(field_name, detail))
        elif code == TOO_MANY:
            out.append(fields.too_many(field_name, value, detail))
        elif code == TYPE:
            out.append(fields.type_invalid(field_name, "" if value is None else value, detail))
        else:
            out.append(fields.invalid(field_name, "" if value is None else value, detail))
    return out
