"""Value validation, compiled: kube-openapi's ``SchemaValidator`` as apiextensions runs it.

:func:`compile_validator` turns a :class:`~setpoint.schema.structural.Node` into closures once;
validating a value never looks at the schema dict again. The behaviour follows
``k8s.io/kube-openapi/pkg/validation/validate`` (as vendored by Kubernetes up to 1.35) and the
error mapping of apiextensions' ``kubeOpenAPIResultToFieldErrors``:

* the same validators run in the same cases (type, allOf/anyOf/oneOf/not, string, format,
  number, array, enum, object), with the same messages (``spec.x in body should be at least 3
  chars long``) and the same Go quirks (an integer is checked against ``int64(maximum)``, an
  enum compares after Go type conversion, a ``null`` never matches an enum);
* ``anyOf``/``oneOf`` report the failures of the branch with the highest *match count*, which
  is computed exactly as kube-openapi counts it, so the same branch is chosen;
* error paths are kube-openapi's strings (``spec.items[0].name``, map keys joined with ``.``),
  and errors without a path (``anyOf``, ``oneOf``, ``allOf``, ``not``) get the field ``<nil>``
  as Kubernetes prints them.

Ratcheting (:attr:`CompiledNode.ratchet`) implements CRDValidationRatcheting: a value that is
correlated with the old object (same map key, or same list-map key) and deep-equal to it
reports no errors, nor does anything below it. Errors raised inside ``allOf``/``anyOf``/
``oneOf``/``not`` branches are ratcheted with the node that owns the junctor, not per
descendant (a simplification of upstream, which threads ratcheting through the branches).

Invariants: compiled closures never mutate the value; a raw error is a tuple
``(code, name, value, detail)`` converted to :class:`~setpoint.apimachinery.fields.FieldError`
only by :func:`to_field_errors`, which also deduplicates as kube-openapi's ``Result`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.apimachinery import fields
from setpoint.schema import formats, govalues, regex
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


@dataclass(frozen=True, slots=True)
class Options:
    """How Kubernetes builds the validator.

    For custom resources, unsupported formats are stripped and ``x-kubernetes-int-or-string``
    means ``type: [integer, string]``. For CRD-time default validation, apiextensions builds
    the validator from the structural schema as is: neither happens.
    """

    strip_formats: bool = True
    int_or_string_type: bool = True


RUNTIME = Options()
DEFAULTS = Options(strip_formats=False, int_or_string_type=False)


class CompiledNode:
    """The compiled validator of one node.

    ``validate(value, path, errs) -> match count`` appends raw errors; ``ratchet(new, old,
    path, errs)`` does the same with ratcheting against a correlated old value; ``equal(new,
    old)`` is apiextensions' ``CorrelatedObject.CachedDeepEqual`` for this node.
    """

    __slots__ = ("equal", "node", "ratchet", "trivial", "validate")

    def __init__(self, node: Node, validate: ValidateFn, ratchet: RatchetFn,
                 equal: EqualFn, trivial: tuple[type, int] | None = None) -> None:
        self.node = node
        self.validate = validate
        self.ratchet = ratchet
        self.equal = equal
        # (Python type, match count) when a value of exactly that type has nothing to check.
        self.trivial = trivial


class _Never:
    """A type no JSON value has: the "no shortcut" marker of object_validate's table."""


# --- type checking ----------------------------------------------------------------------------

# kind -> (JSON schema type, Go format) as typeValidator.schemaInfoForType reports them.
_SCHEMA_INFO = {
    "str": ("string", ""), "dict": ("object", ""), "list": ("array", ""),
    "bool": ("boolean", ""), "int": ("integer", "int64"),
    "float": ("number", "float64"), "floatint": ("number", "float64"),
}


def _type_outcome(types: tuple[str, ...], fmt: str, kind: str) -> str | None:
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


def _type_checker(types: tuple[str, ...], fmt: str) -> TypeFn | None:
    if not types and not fmt:
        return None
    table: dict[type, tuple[str, str] | None] = {}
    for py, kind in ((str, "str"), (dict, "dict"), (list, "list"), (bool, "bool"), (int, "int")):
        out = _type_outcome(types, fmt, kind)
        table[py] = None if out is None else _split(out)
    out_float = _type_outcome(types, fmt, "float")
    out_floatint = _type_outcome(types, fmt, "floatint")
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


def _string_checker(node: Node) -> StrFn | None:
    max_len = node.max_length
    min_len = node.min_length
    pattern = node.pattern
    compiled = None
    pattern_error = None
    if pattern:
        tr = regex.translate(pattern)
        pattern_error = tr.error
        if tr.python is not None:
            compiled = regex.compile_pattern(pattern)
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
            if search(value) is None:
                errs.append((INVALID, path, value, f"{path} in body should match '{pattern}'"))
        elif pattern_error is not None:
            errs.append((INVALID, path, value,
                         f"{path} in body should match '{pattern}, but pattern is invalid: "
                         f"{pattern_error}'"))

    return check


def _format_checker(fmt: str) -> StrFn | None:
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


def _number_checker(node: Node) -> NumFn | None:
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


def _enum_checker(node: Node) -> AnyFn | None:
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


def _has_duplicates(items: list[Any]) -> bool:
    seen: set[Any] = set()
    for item in items:
        key = _canonical(item)
        if key in seen:
            return True
        seen.add(key)
    return False


# --- compiling a node -------------------------------------------------------------------------

def compile_validator(node: Node, options: Options = RUNTIME, *,
                      root: bool = False) -> CompiledNode:
    """Compile ``node`` (and everything under it) into closures."""
    return _Compiler(options).build(node, root)


def _effective_types(node: Node, options: Options) -> tuple[str, ...]:
    if node.int_or_string and options.int_or_string_type:
        return ("integer", "string")
    return (node.type,) if node.type else ()


def _effective_format(node: Node, types: tuple[str, ...], options: Options) -> str:
    schema_type = types[0] if len(types) == 1 else ""
    return formats.effective_format(schema_type, node.format, strip=options.strip_formats)


class _Compiler:
    def __init__(self, options: Options) -> None:
        self.options = options

    def build(self, node: Node, root: bool = False) -> CompiledNode:
        opts = self.options
        types = _effective_types(node, opts)
        fmt = _effective_format(node, types, opts)
        type_check = _type_checker(types, fmt)
        nullable = node.nullable
        null_fails = bool(types) and not nullable
        null_type_msg = ",".join(types)
        str_check = _string_checker(node)
        fmt_check = _format_checker(fmt) if fmt else None
        str_count = 1 + (1 if fmt_check is not None else 0)
        num_check = _number_checker(node)
        enum_check = _enum_checker(node)
        junctors = self._junctors(node)

        props: dict[str, CompiledNode] = {}
        if node.properties:
            props = {k: self.build(v) for k, v in node.properties.items()}
        props_get = props.get
        # name -> (type whose values need no check, their match count, validator)
        props_table = {k: (*(c.trivial or (_Never, 0)), c.validate) for k, c in props.items()}
        pv_get = props_table.get
        ap = node.additional_properties
        additional = self.build(ap) if isinstance(ap, Node) else None
        additional_false = ap is False
        items = self.build(node.items) if node.items is not None else None
        required = node.required or ()
        min_props = node.min_properties
        max_props = node.max_properties
        min_items = node.min_items
        max_items = node.max_items
        unique = node.unique_items
        add_validate = additional.validate if additional is not None else None
        items_validate = items.validate if items is not None else None
        has_object_checks = bool(props or required or additional is not None or additional_false
                                 or min_props is not None or max_props is not None)
        has_slice_checks = (items is not None or min_items is not None or max_items is not None
                            or unique)

        def object_own(value: dict[str, Any], path: str, errs: Errs) -> None:
            n = len(value)
            if min_props is not None and n < min_props:
                errs.append((INVALID, path, n,
                             f"{path} in body should have at least {min_props} properties"))
            if max_props is not None and n > max_props:
                errs.append((TOO_MANY, path, n, max_props))
            if additional_false:
                for k in value:
                    if k not in props:
                        errs.append((INVALID, path, k,
                                     f"{path}.{k} in body is a forbidden property"))
            for r in required:
                if r not in value:
                    errs.append((REQUIRED, path + "." + r, None, None))

        has_object_own = bool(required or additional_false or min_props is not None
                              or max_props is not None)
        has_slice_own = min_items is not None or max_items is not None or unique

        def object_validate(value: dict[str, Any], path: str, errs: Errs) -> int:
            if has_object_own:
                object_own(value, path, errs)
            count = 0
            pfx = path + "." if path else ""
            for k, v in value.items():
                entry = pv_get(k)
                if entry is not None:
                    if type(v) is entry[0]:
                        count += entry[1]
                    else:
                        count += entry[2](v, pfx + k, errs)
                elif add_validate is not None:
                    count += add_validate(v, path + "." + k, errs)
            return count

        def slice_own(value: list[Any], path: str, errs: Errs) -> None:
            size = len(value)
            if min_items is not None and size < min_items:
                errs.append((INVALID, path, size,
                             f"{path} in body should have at least {min_items} items"))
            if max_items is not None and size > max_items:
                errs.append((TOO_MANY, path, size, max_items))
            if unique and size > 1 and _has_duplicates(value):
                errs.append((INVALID, path, None, f"{path} in body shouldn't contain duplicates"))

        def slice_validate(value: list[Any], path: str, errs: Errs) -> int:
            count = 0
            if items_validate is not None:
                for i, v in enumerate(value):
                    count += items_validate(v, f"{path}[{i}]", errs)
            if has_slice_own:
                slice_own(value, path, errs)
            return count

        def null_path(path: str, errs: Errs) -> int:
            count = 1
            if null_fails:
                errs.append((TYPE, path, "null",
                             f"{path} in body must be of type {null_type_msg}: \"null\""))
                count = 0
            if enum_check is not None:
                errs.append((ENUM, path, None, tuple(
                    e if isinstance(e, str) else govalues.to_json(e) for e in node.enum or ())))
            return count

        def validate(value: Any, path: str, errs: Errs) -> int:
            if value is None:
                return null_path(path, errs)
            t = type(value)
            if t is int and not (_I64_MIN <= value <= _I64_MAX):
                value = float(value)
                t = float
            count = 4
            if type_check is not None:
                count += 1 + type_check(value, t, path, errs)
            if junctors is not None:
                count += junctors(value, path, errs)
            if t is str:
                count += str_count
                if str_check is not None:
                    str_check(value, path, errs)
                if fmt_check is not None:
                    fmt_check(value, path, errs)
            elif t is dict:
                count += 1
                if has_object_checks:
                    count += object_validate(value, path, errs)
            elif t is list:
                count += 2
                if has_slice_checks:
                    count += slice_validate(value, path, errs)
            elif t is int or t is float:
                count += 2
                if num_check is not None:
                    num_check(value, t, path, errs)
            if enum_check is not None:
                enum_check(value, path, errs)
            return count

        # --- ratcheting ---------------------------------------------------------------------

        list_key = _list_key_fn(node)
        items_ratchet = items.ratchet if items is not None else None
        items_equal = items.equal if items is not None else None
        add_ratchet = additional.ratchet if additional is not None else None
        add_equal = additional.equal if additional is not None else None

        def equal(new: Any, old: Any) -> bool:
            if new is None or old is None:
                return new is None and old is None
            tn = type(new)
            to = type(old)
            if tn is list or to is list:
                if tn is not to or len(new) != len(old):
                    return False
                if not new:
                    return True
                if list_key is None:
                    return govalues.deep_equal(new, old)
                if items_equal is None:
                    return False
                index = _index_list(old, list_key)
                for v in new:
                    ov = _correlate(v, index, list_key)
                    if ov is _NO_MATCH or not items_equal(v, ov):
                        return False
                return True
            if tn is dict or to is dict:
                if tn is not to or len(new) != len(old):
                    return False
                if new != old:
                    return False
                for k, v in new.items():
                    if k not in old:
                        return False
                    c = props_get(k)
                    if c is not None:
                        if not c.equal(v, old[k]):
                            return False
                    elif add_equal is not None:
                        if not add_equal(v, old[k]):
                            return False
                    else:
                        return False
                return True
            return govalues.deep_equal(new, old)

        def ratchet(new: Any, old: Any, path: str, errs: Errs) -> None:
            if equal(new, old):
                return
            value = new
            if value is None:
                null_path(path, errs)
                return
            t = type(value)
            if t is int and not (_I64_MIN <= value <= _I64_MAX):
                value = float(value)
                t = float
            if type_check is not None:
                type_check(value, t, path, errs)
            if junctors is not None:
                junctors(value, path, errs)
            if t is str:
                if str_check is not None:
                    str_check(value, path, errs)
                if fmt_check is not None:
                    fmt_check(value, path, errs)
            elif t is dict:
                object_own(value, path, errs)
                old_map = old if type(old) is dict else None
                pfx = path + "." if path else ""
                for k, v in value.items():
                    c = props_get(k)
                    correlated = (old_map is not None and k in old_map
                                  and not (root and (k == "apiVersion" or k == "kind")))
                    if c is not None:
                        if correlated:
                            c.ratchet(v, old_map[k], pfx + k, errs)  # type: ignore[index]
                        else:
                            c.validate(v, pfx + k, errs)
                    elif additional is not None:
                        if correlated and add_ratchet is not None:
                            add_ratchet(v, old_map[k], path + "." + k, errs)  # type: ignore[index]
                        else:
                            additional.validate(v, path + "." + k, errs)
            elif t is list:
                if items is not None:
                    index = (_index_list(old, list_key)
                             if list_key is not None and type(old) is list and old else None)
                    for i, v in enumerate(value):
                        item_path = f"{path}[{i}]"
                        ov = _correlate(v, index, list_key) if index is not None else _NO_MATCH
                        if ov is _NO_MATCH:
                            items.validate(v, item_path, errs)
                        else:
                            items_ratchet(v, ov, item_path, errs)  # type: ignore[misc]
                slice_own(value, path, errs)
            elif (t is int or t is float) and num_check is not None:
                num_check(value, t, path, errs)
            if enum_check is not None:
                enum_check(value, path, errs)

        fast = self._fast_path(types, fmt, validate, junctors, str_check, fmt_check, str_count,
                               num_check, enum_check, object_validate, has_object_checks,
                               slice_validate, has_slice_checks)
        trivial: tuple[type, int] | None = None
        if fast is not validate and junctors is None and enum_check is None:
            if types == ("string",) and str_check is None and fmt_check is None:
                trivial = (str, 6 + str_count)
            elif types == ("boolean",):
                trivial = (bool, 6)
        return CompiledNode(node, fast, ratchet, equal, trivial)

    @staticmethod
    def _fast_path(types: tuple[str, ...], fmt: str, validate: ValidateFn,
                   junctors: Callable[[Any, str, Errs], int] | None, str_check: StrFn | None,
                   fmt_check: StrFn | None, str_count: int, num_check: NumFn | None,
                   enum_check: AnyFn | None,
                   object_validate: Callable[[dict[str, Any], str, Errs], int],
                   has_object_checks: bool,
                   slice_validate: Callable[[list[Any], str, Errs], int],
                   has_slice_checks: bool) -> ValidateFn:
        """``validate`` specialised for values of the declared type (the common case).

        Values of any other type go to the generic ``validate``; both give the same errors
        and match counts.
        """
        if types == ("integer", "string") and _type_outcome(types, fmt, "str") is None:
            k_s = 6 + str_count
            k_i = 8

            def fast_int_or_string(value: Any, path: str, errs: Errs) -> int:
                t = type(value)
                if t is str:
                    count = k_s
                    if str_check is not None:
                        str_check(value, path, errs)
                    if fmt_check is not None:
                        fmt_check(value, path, errs)
                elif t is int and _I64_MIN <= value <= _I64_MAX:
                    count = k_i
                    if num_check is not None:
                        num_check(value, t, path, errs)
                else:
                    return validate(value, path, errs)
                if junctors is not None:
                    count += junctors(value, path, errs)
                if enum_check is not None:
                    enum_check(value, path, errs)
                return count

            return fast_int_or_string
        if len(types) != 1:
            return validate
        declared = types[0]
        kind = {"string": "str", "object": "dict", "array": "list", "boolean": "bool",
                "integer": "int", "number": "int"}.get(declared)
        if kind is None or _type_outcome(types, fmt, kind) is not None:
            return validate
        base = 6  # final + props (2) + common (1) + type validator applied and passed (2)

        if declared == "string":
            k_str = base + str_count

            def fast_str(value: Any, path: str, errs: Errs) -> int:
                if type(value) is not str:
                    return validate(value, path, errs)
                count = k_str
                if junctors is not None:
                    count += junctors(value, path, errs)
                if str_check is not None:
                    str_check(value, path, errs)
                if fmt_check is not None:
                    fmt_check(value, path, errs)
                if enum_check is not None:
                    enum_check(value, path, errs)
                return count

            return fast_str

        if declared == "object":
            k_obj = base + 1

            def fast_obj(value: Any, path: str, errs: Errs) -> int:
                if type(value) is not dict:
                    return validate(value, path, errs)
                count = k_obj
                if junctors is not None:
                    count += junctors(value, path, errs)
                if has_object_checks:
                    count += object_validate(value, path, errs)
                if enum_check is not None:
                    enum_check(value, path, errs)
                return count

            return fast_obj

        if declared == "array":
            k_list = base + 2

            def fast_list(value: Any, path: str, errs: Errs) -> int:
                if type(value) is not list:
                    return validate(value, path, errs)
                count = k_list
                if junctors is not None:
                    count += junctors(value, path, errs)
                if has_slice_checks:
                    count += slice_validate(value, path, errs)
                if enum_check is not None:
                    enum_check(value, path, errs)
                return count

            return fast_list

        if declared == "boolean":
            def fast_bool(value: Any, path: str, errs: Errs) -> int:
                if type(value) is not bool or junctors is not None:
                    return validate(value, path, errs)
                if enum_check is not None:
                    enum_check(value, path, errs)
                return base

            return fast_bool

        k_num = base + 2
        accepts_float = declared == "number"

        def fast_num(value: Any, path: str, errs: Errs) -> int:
            t = type(value)
            if not ((t is int and _I64_MIN <= value <= _I64_MAX) or (t is float and accepts_float)):
                return validate(value, path, errs)
            count = k_num
            if junctors is not None:
                count += junctors(value, path, errs)
            if num_check is not None:
                num_check(value, t, path, errs)
            if enum_check is not None:
                enum_check(value, path, errs)
            return count

        return fast_num

    def _junctors(self, node: Node) -> Callable[[Any, str, Errs], int] | None:
        if not (node.all_of or node.any_of or node.one_of or node.not_ is not None):
            return None
        all_of = tuple(self.build(n).validate for n in node.all_of)
        any_of = tuple(self.build(n).validate for n in node.any_of)
        one_of = tuple(self.build(n).validate for n in node.one_of)
        not_ = self.build(node.not_).validate if node.not_ is not None else None

        def check(value: Any, path: str, errs: Errs) -> int:
            count = 0
            q = _quote(path)
            if any_of:
                best: Errs | None = None
                best_count = -1
                success_count = -1
                for branch in any_of:
                    r: Errs = []
                    c = branch(value, path, r)
                    if not r:
                        best = None
                        success_count = c
                        break
                    if best is None or c > best_count:
                        best = r
                        best_count = c
                if success_count < 0:
                    errs.append((COMPOSITE, None, "",
                                 f"{q} must validate at least one schema (anyOf)"))
                if best is not None:
                    errs.extend(best)
                    count += best_count
                elif success_count >= 0:
                    count += success_count
            if one_of:
                validated = 0
                best = None
                best_count = -1
                first = -1
                for branch in one_of:
                    r = []
                    c = branch(value, path, r)
                    if not r:
                        validated += 1
                        best = None
                        if first < 0:
                            first = c
                        continue
                    if validated == 0 and (best is None or c > best_count):
                        best = r
                        best_count = c
                if validated != 1:
                    extra = ("Found none valid" if validated == 0
                             else f"Found {validated} valid alternatives")
                    errs.append((COMPOSITE, None, "",
                                 f"{q} must validate one and only one schema (oneOf). {extra}"))
                    if best is not None:
                        errs.extend(best)
                        count += best_count
                elif first >= 0:
                    count += first
            if all_of:
                ok = 0
                for branch in all_of:
                    r = []
                    count += branch(value, path, r)
                    if r:
                        errs.extend(r)
                    else:
                        ok += 1
                if ok != len(all_of):
                    extra = ". None validated" if ok == 0 else ""
                    errs.append((COMPOSITE, None, "",
                                 f"{q} must validate all the schemas (allOf){extra}"))
            if not_ is not None:
                r = []
                not_(value, path, r)
                if not r:
                    errs.append((COMPOSITE, None, "", f"{q} must not validate the schema (not)"))
            return count

        return check


# --- list-map correlation ---------------------------------------------------------------------

class _NoMatch:
    __slots__ = ()


_NO_MATCH: Any = _NoMatch()
KeyFn = Callable[[Mapping[str, Any]], Any]


def _scalar_key(v: Any) -> Any:
    t = type(v)
    if t is str or t is bool:
        return (t.__name__, v)
    if t is int:
        return ("int", v) if _I64_MIN <= v <= _I64_MAX else ("float", float(v))
    if t is float:
        return ("float", v)
    return None


def _list_key_fn(node: Node) -> KeyFn | None:
    """The map-list key of an item (``None`` = not keyable), or ``None`` for other lists."""
    if node.type != "array" or node.list_type != "map" or not node.list_map_keys:
        return None
    keys = node.list_map_keys
    if len(keys) == 1:
        key = keys[0]

        def single(item: Mapping[str, Any]) -> Any:
            if key not in item:
                return None
            return _scalar_key(item[key])

        return single

    def multi(item: Mapping[str, Any]) -> Any:
        parts = []
        for key in keys:
            if key not in item:
                return None
            v = item[key]
            t = type(v)
            if t is float or (t is int and not (_I64_MIN <= v <= _I64_MAX)):
                parts.append(("f", f"{float(v):f}"))
            elif t is int or t is str or t is bool:
                parts.append((t.__name__, v))
            else:
                return None
        return tuple(parts)

    return multi


def _index_list(old: Any, key_fn: KeyFn) -> dict[Any, Any]:
    index: dict[Any, Any] = {}
    if type(old) is not list:
        return index
    for item in old:
        if type(item) is dict:
            k = key_fn(item)
            if k is not None and k not in index:
                index[k] = item
    return index


def _correlate(value: Any, index: dict[Any, Any] | None, key_fn: KeyFn | None) -> Any:
    if index is None or key_fn is None or type(value) is not dict:
        return _NO_MATCH
    k = key_fn(value)
    if k is None:
        return _NO_MATCH
    return index.get(k, _NO_MATCH)


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
