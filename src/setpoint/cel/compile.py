"""Compiling ``x-kubernetes-validations`` rules: parse, type-check against the schema, plan.

* :class:`Rule` is one entry of ``x-kubernetes-validations``.
* :func:`compile_rule` compiles one rule for a given ``self`` type, or raises
  :class:`~setpoint.cel.errors.CELCompileError` whose ``detail`` is the text
  Kubernetes puts in the CRD-time error (``compilation failed: ERROR: <input>:1:6: ...``).
* :class:`RuleCache` compiles each (rule, schema node) once; keep one per CRD version.
* :func:`rule_errors` are the CRD-time ``FieldError`` s for a node's rules; as in Kubernetes,
  the bad value of a compile error is the whole entry as Go prints it
  (``Invalid value: apiextensions.ValidationRule{Rule:"self.x > 0", Message:"", ...}:
  compilation failed: ...``, see :func:`go_rule`).

A rule *uses oldSelf* (a transition rule) when the identifier ``oldSelf`` occurs free in it;
such a rule runs only on update when an old value exists, unless it sets
``optionalOldSelf: true`` (then ``oldSelf`` is an optional, ``optional.none()`` on create).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.apimachinery.govalues import quote
from setpoint.cel import ast, checker, interpreter, parser
from setpoint.cel import types as t
from setpoint.cel.errors import CELCompileError
from setpoint.cel.functions import Library
from setpoint.cel.library import KUBERNETES
from setpoint.cel.schemas import RuleEntry, Schema
from setpoint.cel.values import decl_type

NO_DECL_TYPE: Final = "failed to convert to declType for CEL validation rules"
SELF: Final = "self"
OLD_SELF: Final = "oldSelf"
SUPPORTED_REASONS: Final = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                            "FieldValueRequired")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One ``x-kubernetes-validations`` entry."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str | None = None
    field_path: str = ""
    optional_old_self: bool | None = None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> Rule:
        """From the JSON of one entry (``rule``, ``message``, ``messageExpression``, ...)."""
        reason = entry.get("reason")
        oos = entry.get("optionalOldSelf")
        return cls(rule=str(entry.get("rule") or ""), message=str(entry.get("message") or ""),
                   message_expression=str(entry.get("messageExpression") or ""),
                   reason=reason if isinstance(reason, str) else None,
                   field_path=str(entry.get("fieldPath") or ""),
                   optional_old_self=oos if isinstance(oos, bool) else None)

    @classmethod
    def of(cls, rule: Rule | RuleEntry) -> Rule:
        if isinstance(rule, Rule):
            return rule
        return cls(rule=rule.rule, message=rule.message,
                   message_expression=rule.message_expression, reason=rule.reason,
                   field_path=rule.field_path, optional_old_self=rule.optional_old_self)

    @property
    def error_text(self) -> str:
        """``ruleErrorString``: the trimmed message if set, else the trimmed rule."""
        return self.message.strip() or self.rule.strip()


@dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule ready to evaluate. ``program`` is ``None`` for an empty rule (never fails)."""

    rule: Rule
    program: interpreter.Program | None
    uses_old_self: bool
    message_program: interpreter.Program | None = None
    message_error: str | None = None
    field_path: str = ""

    @property
    def optional_old_self(self) -> bool:
        return bool(self.rule.optional_old_self)


def _issues_text(src: str, issues: Sequence[checker.Issue]) -> str:
    return "\n".join(parser.format_issue(src, i.pos, i.message) for i in issues)


def _compile_expression(src: str, variables: Mapping[str, t.Type], functions: Library,
                        expect: t.Type, what: str) -> tuple[ast.Node, interpreter.Program]:
    prefix = "compilation failed: " if what == "rule" else "messageExpression compilation failed: "
    try:
        tree = parser.parse(src)
        result, issues = checker.check(tree, functions, variables)
    except CELCompileError as e:
        raise CELCompileError(prefix + e.detail) from None
    except RecursionError:
        raise CELCompileError(prefix + "expression recursion limit exceeded") from None
    if issues:
        raise CELCompileError(prefix + _issues_text(src, issues))
    try:
        program = interpreter.plan(tree, functions, variables)
    except CELCompileError as e:
        where = "program" if what == "rule" else "messageExpression"
        raise CELCompileError(f"{where} instantiation failed: {e.detail}") from None
    except RecursionError:
        raise CELCompileError(prefix + "expression recursion limit exceeded") from None
    if not t.is_dyn_like(expect) and not t.is_dyn_like(result) and result != expect:
        if what == "rule":
            raise CELCompileError("cel expression must evaluate to a bool")
        raise CELCompileError("messageExpression must evaluate to a string")
    return tree, program


def compile_rule(rule: Rule | RuleEntry | str, *, self_type: t.Type = t.DYN,
                 node: Schema | None = None, functions: Library = KUBERNETES) -> CompiledRule:
    """Compile ``rule`` with ``self`` (and ``oldSelf``) of ``self_type``.

    ``node`` (the schema node the rule sits on) is used to normalize ``fieldPath``. A
    ``messageExpression`` that fails to compile does not fail the rule (Kubernetes reports it
    separately); its detail is in :attr:`CompiledRule.message_error`.
    """
    r = Rule(rule=rule) if isinstance(rule, str) else Rule.of(rule)
    if not r.rule.strip():
        return CompiledRule(r, None, uses_old_self=False)
    old_type = t.optional_of(self_type) if r.optional_old_self else self_type
    variables = {SELF: self_type, OLD_SELF: old_type}
    tree, program = _compile_expression(r.rule, variables, functions, t.BOOL, "rule")
    message_program = None
    message_error = None
    if r.message_expression:
        try:
            _, message_program = _compile_expression(r.message_expression, variables, functions,
                                                     t.STRING, "messageExpression")
        except CELCompileError as e:
            message_error = e.detail
    field_path = ""
    if r.field_path and node is not None:
        normalized = normalize_field_path(r.field_path, node)
        field_path = normalized or ""
    return CompiledRule(r, program, ast.references(tree, OLD_SELF), message_program,
                        message_error, field_path)


class RuleCache:
    """Compiled rules by (rule, schema node); one cache per CRD version.

    Entries hold their schema node, so an ``id`` is never reused while cached. Compile errors
    are cached too and re-raised. Safe to share between threads (a race compiles twice).
    """

    def __init__(self, functions: Library = KUBERNETES) -> None:
        self._functions = functions
        self._entries: dict[tuple[Rule, int, bool], tuple[Schema, CompiledRule | CELCompileError]]
        self._entries = {}
        self._types: dict[tuple[int, bool], tuple[Schema, t.Type | None]] = {}

    def self_type(self, node: Schema, *, resource_root: bool = False) -> t.Type | None:
        key = (id(node), resource_root)
        hit = self._types.get(key)
        if hit is None:
            hit = (node, decl_type(node, resource_root=resource_root))
            self._types[key] = hit
        return hit[1]

    def get(self, rule: Rule, node: Schema, *, resource_root: bool = False) -> CompiledRule:
        key = (rule, id(node), resource_root)
        hit = self._entries.get(key)
        if hit is None:
            result: CompiledRule | CELCompileError
            self_type = self.self_type(node, resource_root=resource_root)
            try:
                if self_type is None:
                    raise CELCompileError(NO_DECL_TYPE)
                result = compile_rule(rule, self_type=self_type, node=node,
                                      functions=self._functions)
            except CELCompileError as e:
                result = e
            hit = (node, result)
            self._entries[key] = hit
        if isinstance(hit[1], CELCompileError):
            raise hit[1]
        return hit[1]

    def __len__(self) -> int:
        return len(self._entries)


def rules_of(node: Schema) -> tuple[Rule, ...]:
    return tuple(Rule.of(v) for v in node.validations)


# Go prints a non-nil pointer as its address; any address reads the same to a user.
_GO_POINTER: Final = "0xc000010000"


def go_rule(rule: Rule | RuleEntry) -> str:
    """``%#v`` of Kubernetes' internal ``apiextensions.ValidationRule`` for this entry: what a
    field error prints as the bad value of a rule that does not compile."""
    r = Rule.of(rule)
    reason = "nil" if r.reason is None else _GO_POINTER
    optional = "nil" if r.optional_old_self is None else _GO_POINTER
    return (f"apiextensions.ValidationRule{{Rule:{quote(r.rule)}, Message:{quote(r.message)}, "
            f"MessageExpression:{quote(r.message_expression)}, "
            f"Reason:(*apiextensions.FieldValueErrorReason)({reason}), "
            f"FieldPath:{quote(r.field_path)}, OptionalOldSelf:(*bool)({optional})}}")


def _uses_old_self_after_error(rule: Rule, error: CELCompileError) -> bool:
    """Whether Kubernetes knows the rule uses ``oldSelf`` when compiling it failed: only once
    it type-checked (a failed program instantiation), never after a parse or type error."""
    if not error.detail.startswith("program instantiation failed"):
        return False
    try:
        return ast.references(parser.parse(rule.rule), OLD_SELF)
    except (CELCompileError, RecursionError):
        return False


def rule_errors(node: Schema, path: FieldPath, *, cache: RuleCache, resource_root: bool = False,
                rules: Sequence[Rule | RuleEntry] | None = None,
                uncorrelatable: FieldPath | None = None) -> list[FieldError]:
    """The CRD-time errors of ``node``'s rules, at ``path.x-kubernetes-validations[i]...``.

    Covers what needs the CEL engine (compilation, ``messageExpression``, ``fieldPath``,
    ``optionalOldSelf`` without ``oldSelf``, unsupported ``reason``); structural checks of
    the entries themselves (empty rule, line breaks) belong to the schema checker. ``rules``
    defaults to ``node``'s own; rules of an ``allOf`` branch are given here with the
    structural node they apply to, which types ``self``. ``uncorrelatable``: the path of the
    outermost list above ``node`` whose items cannot be correlated with an old object (any
    list but ``x-kubernetes-list-type: map``); rules there may not use ``oldSelf``.
    """
    errors: list[FieldError] = []
    base = path.child("x-kubernetes-validations")
    rules = tuple(Rule.of(r) for r in rules) if rules is not None else rules_of(node)
    if rules and cache.self_type(node, resource_root=resource_root) is None:
        return [FieldError(ErrorType.INTERNAL, str(base), NO_DECL_TYPE)]
    for i, rule in enumerate(rules):
        at = base.index(i)
        if rule.reason is not None and rule.reason not in SUPPORTED_REASONS:
            errors.append(FieldError(ErrorType.NOT_SUPPORTED, str(at.child("reason")), "",
                                     rule.reason, SUPPORTED_REASONS))
        if rule.field_path and normalize_field_path(rule.field_path, node) is None:
            errors.append(FieldError(ErrorType.INVALID, str(at.child("fieldPath")),
                                     "fieldPath must be a valid path", rule.field_path))
        if not rule.rule.strip():
            continue
        # The bad value is a Go struct: printed through the detail, as no JSON value reads so.
        try:
            compiled = cache.get(rule, node, resource_root=resource_root)
        except CELCompileError as e:
            errors.append(FieldError(ErrorType.INVALID, str(at.child("rule")),
                                     f"{go_rule(rule)}: {e.detail}"))
            uses_old_self = _uses_old_self_after_error(rule, e)
        else:
            if compiled.message_error is not None:
                errors.append(FieldError(ErrorType.INVALID, str(at.child("messageExpression")),
                                         f"{go_rule(rule)}: {compiled.message_error}"))
            uses_old_self = compiled.uses_old_self
        if uses_old_self:
            if uncorrelatable is not None:
                errors.append(FieldError(
                    ErrorType.INVALID, str(at.child("rule")),
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                    f"{uncorrelatable}", rule.rule))
        elif rule.optional_old_self is not None:
            errors.append(FieldError(ErrorType.INVALID, str(at.child("optionalOldSelf")),
                                     "may not be set if oldSelf is not used in rule",
                                     rule.optional_old_self))
    return errors


# -- fieldPath (ValidFieldPath) --------------------------------------------------------------

_SINGLE_QUOTE_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                                "t": "\t", "v": "\v", "'": "'", "\\": "\\"}


def _tokens(path: str) -> list[str]:
    out: list[str] = []
    i, n = 0, len(path)
    while i < n:
        c = path[i]
        if c in ".[]":
            out.append(c)
            i += 1
        elif c == "'":
            j = i + 1
            while j < n and not (path[j] == "'" and path[j - 1] != "\\"):
                j += 1
            out.append(path[i:j + 1])
            i = j + 1
        else:
            j = i
            while j < n and path[j] not in ".[]":
                j += 1
            out.append(path[i:j])
            i = j
    return out


def _unquote(token: str) -> str | None:
    if len(token) < 2 or token[0] != "'" or token[-1] != "'":
        return None
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            e = _SINGLE_QUOTE_ESCAPES.get(body[i + 1])
            if e is None:
                return None
            out.append(e)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def normalize_field_path(path: str, node: Schema) -> str | None:
    """``ValidFieldPath``: ``.a['b'].c`` relative to ``node`` as Kubernetes prints it
    (``a.b.c``; map keys as ``a[key]``), or ``None`` when it names no field of the schema."""
    result = FieldPath()
    current: Schema | None = node
    tokens = _tokens(path)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "[":
            if i + 2 >= len(tokens) or tokens[i + 2] != "]":
                return None
            name = _unquote(tokens[i + 1])
            if name is None:
                return None
            i += 3
        elif tok == ".":
            if i + 1 >= len(tokens):
                return None
            name = tokens[i + 1]
            i += 2
        else:
            return None
        if current is None:
            return None
        if current.properties is not None:
            current = current.properties.get(name)
            if current is None:
                return None
            result = result.child(name)
        elif current.additional_properties is not None:
            result = result.key(name)
            current = current.additional_schema
        else:
            return None
    return str(result)
