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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from setpoint.apimachinery import govalues
from setpoint.schema import correlation, formats, keywords
from setpoint.schema.correlation import NO_MATCH
from setpoint.schema.keywords import (
    COMPOSITE,
    ENUM,
    INVALID,
    REQUIRED,
    TOO_MANY,
    TYPE,
    AnyFn,
    EqualFn,
    Errs,
    NumFn,
    RatchetFn,
    StrFn,
    ValidateFn,
    to_field_errors,
)
from setpoint.schema.structural import Node

__all__ = ["DEFAULTS", "RUNTIME", "CompiledNode", "Errs", "Options", "compile_validator",
           "to_field_errors"]

_I64_MIN = govalues.INT64_MIN
_I64_MAX = govalues.INT64_MAX
_quote = govalues.quote
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
        type_check = keywords.type_checker(types, fmt)
        nullable = node.nullable
        null_fails = bool(types) and not nullable
        null_type_msg = ",".join(types)
        str_check = keywords.string_checker(node)
        fmt_check = keywords.format_checker(fmt) if fmt else None
        str_count = 1 + (1 if fmt_check is not None else 0)
        num_check = keywords.number_checker(node)
        enum_check = keywords.enum_checker(node)
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
            if unique and size > 1 and keywords.has_duplicates(value):
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

        list_key = correlation.list_key_fn(node)
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
                index = correlation.index_list(old, list_key)
                for v in new:
                    ov = correlation.correlate(v, index, list_key)
                    if ov is NO_MATCH or not items_equal(v, ov):
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
                    index = (correlation.index_list(old, list_key)
                             if list_key is not None and type(old) is list and old else None)
                    for i, v in enumerate(value):
                        item_path = f"{path}[{i}]"
                        ov = (correlation.correlate(v, index, list_key) if index is not None
                              else NO_MATCH)
                        if ov is NO_MATCH:
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
        if types == ("integer", "string") and keywords.type_outcome(types, fmt, "str") is None:
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
        if kind is None or keywords.type_outcome(types, fmt, kind) is not None:
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
