"""Label and field selectors, as ``k8s.io/apimachinery/pkg/labels`` and ``pkg/fields``.

:class:`LabelSelector` parses the ``labelSelector`` query syntax (``k=v``, ``k==v``, ``k!=v``,
``k in (a,b)``, ``k notin (a)``, ``k``, ``!k``, and the integer comparisons ``k>1``/``k<1`` that
Kubernetes also accepts; a comma means AND) and the ``metav1.LabelSelector`` object form.
:class:`FieldSelector` parses the ``fieldSelector`` syntax (``f=v``, ``f==v``, ``f!=v``).

Invariants:

* a selector is immutable, and its requirements are sorted by key (labels) or by raw term
  (fields), so ``str()`` is canonical: two selectors that parse equal print equal;
* every syntax or validation failure raises :class:`~setpoint.apimachinery.errors.BadRequest`
  with the message a Kubernetes API server gives for the same input;
* the empty selector matches everything; there is no selector that matches nothing.

Matching costs at most the object's labels (or the fields named), not the selector's terms:
a selector is folded, once, into one condition per key (:class:`_LabelMatcher`,
:class:`_FieldMatcher`), so a LIST or watch of many objects with a selector of a thousand
terms (what a URL of 8 KiB holds) costs about as much as with one term.

Non-guarantees: which field names a resource supports is the caller's business
(:func:`check_supported`); label values are compared as strings, except by ``>``/``<``.

>>> sel = LabelSelector.parse("tier in (web, db), !canary")
>>> str(sel)
'!canary,tier in (db,web)'
>>> sel.matches({"tier": "db"}), sel.matches({"tier": "db", "canary": "1"})
(True, False)
>>> FieldSelector.parse("metadata.name=x,status.phase!=Active").requirements
(('metadata.name', '=', 'x'), ('status.phase', '!=', 'Active'))
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from setpoint.apimachinery import errors, fields, regexp, validation

__all__ = [
    "FieldSelector",
    "LabelSelector",
    "Operator",
    "Requirement",
    "check_supported",
]


class Operator(enum.Enum):
    """A label requirement's operator; values are Kubernetes' ``selection.Operator`` strings."""

    IN = "in"
    NOT_IN = "notin"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


# The order Kubernetes lists binary operators in its "expected:" messages.
_BINARY_OPERATORS = ", ".join(op.value for op in (
    Operator.IN, Operator.NOT_IN, Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS,
    Operator.GREATER_THAN, Operator.LESS_THAN))

_INT64 = regexp.Regexp(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``, or None where it fails."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _quote(text: str) -> str:
    """A double-quoted string, as field errors print bad values."""
    return orjson.dumps(text).decode()


def _go_string_slice(values: Sequence[str]) -> str:
    """How Go's ``%#v`` prints a ``[]string`` (the bad value of a values error)."""
    if not values:
        return "[]string(nil)"  # the parser never yields none; the object form copies into nil
    return "[]string{" + ", ".join(_quote(v) for v in values) + "}"


def _aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: duplicates dropped, brackets around several."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector. Build through :meth:`new`, which validates."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    @classmethod
    def new(cls, key: str, operator: Operator, values: Iterable[str] = (),
            *, key_path: str = "key") -> Requirement:
        """Validate as ``labels.NewRequirement``; raise BadRequest with its aggregated message."""
        vals = tuple(values)
        problems: list[str] = []
        if key_errs := validation.is_qualified_name(key):
            problems.append(fields.invalid(key_path, key, "; ".join(key_errs)).error())

        def bad_values(detail: str) -> str:
            return f"values: Invalid value: {_go_string_slice(vals)}: {detail}"

        if operator in (Operator.IN, Operator.NOT_IN):
            if not vals:
                problems.append(bad_values(
                    "for 'in', 'notin' operators, values set can't be empty"))
        elif operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
            if len(vals) != 1:
                problems.append(bad_values("exact-match compatibility requires one single value"))
        elif operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            if vals:
                problems.append(bad_values(
                    "values set must be empty for exists and does not exist"))
        elif len(vals) != 1:
            problems.append(bad_values("for 'Gt', 'Lt' operators, exactly one value is required"))
        if operator in (Operator.GREATER_THAN, Operator.LESS_THAN):
            for i, v in enumerate(vals):
                if _parse_int64(v) is None:
                    problems.append(fields.invalid(
                        f"values[{i}]", v,
                        "for 'Gt', 'Lt' operators, the value must be an integer").error())
        for i, v in enumerate(vals):
            if value_errs := validation.is_valid_label_value(v):
                problems.append(fields.invalid(f"values[{i}][{key}]", v,
                                               "; ".join(value_errs)).error())
        if problems:
            raise errors.BadRequest(_aggregate(problems))
        return cls(key, operator, vals)

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op is Operator.EXISTS:
            return self.key in labels
        if op is Operator.DOES_NOT_EXIST:
            return self.key not in labels
        # GREATER_THAN / LESS_THAN: both sides must be integers, else no match.
        if self.key not in labels or len(self.values) != 1:
            return False
        have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Operator.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.operator
        if op is Operator.EXISTS:
            return self.key
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (Operator.IN, Operator.NOT_IN):
            return f"{self.key} {op.value} ({values})"
        symbol = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{symbol}{values}"


# --- label selector syntax ---------------------------------------------------------------------


class _Tok(enum.Enum):
    ERROR = enum.auto()
    END = enum.auto()
    CLOSE_PAREN = enum.auto()
    COMMA = enum.auto()
    NOT = enum.auto()
    DOUBLE_EQUALS = enum.auto()
    EQUALS = enum.auto()
    GREATER = enum.auto()
    IDENT = enum.auto()
    IN = enum.auto()
    LESS = enum.auto()
    NOT_EQUALS = enum.auto()
    NOT_IN = enum.auto()
    OPEN_PAREN = enum.auto()


_LITERALS = {
    ")": _Tok.CLOSE_PAREN, ",": _Tok.COMMA, "!": _Tok.NOT, "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS, ">": _Tok.GREATER, "in": _Tok.IN, "<": _Tok.LESS, "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN, "(": _Tok.OPEN_PAREN,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_TOKEN_OPERATORS = {
    _Tok.IN: Operator.IN, _Tok.EQUALS: Operator.EQUALS, _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
    _Tok.GREATER: Operator.GREATER_THAN, _Tok.LESS: Operator.LESS_THAN,
    _Tok.NOT_IN: Operator.NOT_IN, _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
}


def _lex(text: str) -> list[tuple[_Tok, str]]:
    """Tokens up to and including END."""
    out: list[tuple[_Tok, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            out.append((_Tok.END, ""))
            return out
        if text[pos] in _SPECIAL:
            # Longest run of special characters that still spells a known token.
            best: tuple[_Tok, str] | None = None
            end = pos
            while end < n and text[end] in _SPECIAL:
                candidate = text[pos:end + 1]
                if candidate in _LITERALS:
                    best = (_LITERALS[candidate], candidate)
                elif best is not None:
                    break
                end += 1
            if best is None:  # unreachable with today's table; kept for parity
                out.append((_Tok.ERROR, f"error expected: keyword found '{text[pos:end]}'"))
                end = n
            else:
                end = pos + len(best[1])
                out.append(best)
            pos = end
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        out.append((_LITERALS.get(word, _Tok.IDENT), word))


class _SyntaxError(Exception):
    """A parse failure whose text is the message Kubernetes gives."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.position = 0

    def _peek(self, values: bool = True) -> tuple[_Tok, str]:
        tok, lit = self.items[self.position]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT  # 'in' and 'notin' are plain words where a value is expected
        return tok, lit

    def _next(self, values: bool = True) -> tuple[_Tok, str]:
        item = self._peek(values)
        self.position += 1
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok in (_Tok.IDENT, _Tok.NOT):
                try:
                    requirements.append(self._requirement())
                except (_SyntaxError, errors.BadRequest) as e:
                    raise _SyntaxError(f"unable to parse requirement: {_text(e)}") from e
                tok, lit = self._next()
                if tok is _Tok.END:
                    return requirements
                if tok is _Tok.COMMA:
                    tok2, lit2 = self._peek()
                    if tok2 not in (_Tok.IDENT, _Tok.NOT):
                        raise _SyntaxError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise _SyntaxError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok is _Tok.END:
                return requirements
            else:
                raise _SyntaxError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        operator: Operator | None = None
        tok, key = self._next()
        if tok is _Tok.NOT:
            operator = Operator.DOES_NOT_EXIST
            tok, key = self._next()
        if tok is not _Tok.IDENT:
            raise _SyntaxError(f"found '{key}', expected: identifier")
        if key_errs := validation.is_qualified_name(key):
            # Kubernetes validates the key here with a nil field path, printed as "<nil>".
            raise _SyntaxError(fields.invalid("<nil>", key, "; ".join(key_errs)).error())
        if operator is None and self._peek()[0] in (_Tok.END, _Tok.COMMA):
            operator = Operator.EXISTS
        if operator is not None:
            return Requirement.new(key, operator)
        tok, lit = self._next(values=False)
        if tok not in _TOKEN_OPERATORS:
            raise _SyntaxError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        operator = _TOKEN_OPERATORS[tok]
        values = self._set_values() if operator in (Operator.IN, Operator.NOT_IN) \
            else self._exact_value()
        return Requirement.new(key, operator, sorted(values))

    def _set_values(self) -> set[str]:
        tok, lit = self._next()
        if tok is not _Tok.OPEN_PAREN:
            raise _SyntaxError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok is _Tok.CLOSE_PAREN:
            self._next()
            return {""}
        if tok not in (_Tok.IDENT, _Tok.COMMA):
            raise _SyntaxError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            tok, lit = self._next()
            if tok is _Tok.IDENT:
                values.add(lit)
                tok2, lit2 = self._peek()
                if tok2 is _Tok.CLOSE_PAREN:
                    self._next()
                    return values
                if tok2 is not _Tok.COMMA:
                    raise _SyntaxError(f"found '{lit2}', expected: ',' or ')'")
            elif tok is _Tok.COMMA:
                # Empty entries (",a", "a,,b", "a,") stand for the empty value.
                if not values:
                    values.add("")
                tok2, _ = self._peek()
                if tok2 is _Tok.CLOSE_PAREN:
                    self._next()
                    values.add("")
                    return values
                if tok2 is _Tok.COMMA:
                    values.add("")
            else:
                raise _SyntaxError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> set[str]:
        if self._peek()[0] in (_Tok.END, _Tok.COMMA):
            return {""}
        tok, lit = self._next()
        if tok is _Tok.IDENT:
            return {lit}
        raise _SyntaxError(f"found '{lit}', expected: identifier")


def _text(e: Exception) -> str:
    return e.message if isinstance(e, errors.ApiError) else str(e)


_DICT_OPERATORS = {
    "In": Operator.IN, "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS, "DoesNotExist": Operator.DOES_NOT_EXIST,
}


@dataclass(slots=True)
class _KeyCondition:
    """What the requirements on one key ask of its value, folded together."""

    present: bool = False  # a positive term (=, in, exists, >, <): the key must be there
    allowed: frozenset[str] | None = None  # None: any value (the intersection of in/= sets)
    forbidden: set[str] = dataclasses.field(default_factory=set)  # the union of notin/!= sets
    absent: bool = False  # !key
    above: int | None = None  # the greatest ``>`` bound
    below: int | None = None  # the least ``<`` bound
    never: bool = False  # a comparison that cannot hold (its bound is not one integer)

    def add(self, r: Requirement) -> None:
        op = r.operator
        if op in (Operator.NOT_IN, Operator.NOT_EQUALS):
            self.forbidden.update(r.values)
            return
        if op is Operator.DOES_NOT_EXIST:
            self.absent = True
            return
        self.present = True
        if op in (Operator.IN, Operator.EQUALS, Operator.DOUBLE_EQUALS):
            values = frozenset(r.values)
            self.allowed = values if self.allowed is None else self.allowed & values
        elif op is not Operator.EXISTS:
            want = _parse_int64(r.values[0]) if len(r.values) == 1 else None
            if want is None:
                self.never = True
            elif op is Operator.GREATER_THAN:
                self.above = want if self.above is None else max(self.above, want)
            else:
                self.below = want if self.below is None else min(self.below, want)

    def holds(self, value: str) -> bool:
        """Whether a present label of this value meets every requirement on its key."""
        if self.absent or self.never or value in self.forbidden:
            return False
        if self.allowed is not None and value not in self.allowed:
            return False
        if self.above is not None or self.below is not None:
            have = _parse_int64(value)
            if have is None:
                return False
            if self.above is not None and not have > self.above:
                return False
            if self.below is not None and not have < self.below:
                return False
        return True


class _LabelMatcher:
    """A label selector folded into one condition per key: matching looks at each key the
    selector requires (no more of them than the object has labels, else it fails at once)
    and at whichever is smaller, the object's other labels or the keys the selector only
    forbids values of. Exactly ``all(r.matches(labels) for r in requirements)``."""

    __slots__ = ("required", "restricted")

    def __init__(self, requirements: Iterable[Requirement]) -> None:
        conditions: dict[str, _KeyCondition] = {}
        for r in requirements:
            conditions.setdefault(r.key, _KeyCondition()).add(r)
        self.required = {k: c for k, c in conditions.items() if c.present}
        self.restricted = {k: c for k, c in conditions.items() if not c.present}

    def matches(self, labels: Mapping[str, str]) -> bool:
        if len(self.required) > len(labels):
            return False
        for key, condition in self.required.items():
            if key not in labels or not condition.holds(labels[key]):
                return False
        restricted = self.restricted
        if len(restricted) <= len(labels):
            for key, condition in restricted.items():
                if key in labels and not condition.holds(labels[key]):
                    return False
        else:
            for key, value in labels.items():
                found = restricted.get(key)
                if found is not None and not found.holds(value):
                    return False
        return True


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """An AND of label requirements, sorted by key (stable for equal keys)."""

    requirements: tuple[Requirement, ...] = ()
    _matcher: _LabelMatcher = dataclasses.field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_matcher", _LabelMatcher(self.requirements))

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse the query syntax; the empty string (or only whitespace) selects everything."""
        try:
            requirements = _Parser(text).parse()
        except _SyntaxError as e:
            raise errors.BadRequest(str(e)) from e
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any]) -> LabelSelector:
        """A ``metav1.LabelSelector`` (``matchLabels`` and ``matchExpressions``).

        An empty selector selects everything, as ``LabelSelectorAsSelector`` does.
        """
        if not isinstance(sel, Mapping):
            raise errors.BadRequest("label selector must be an object")
        match_labels = sel.get("matchLabels") or {}
        expressions = sel.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping):
            raise errors.BadRequest("matchLabels must be an object")
        if not isinstance(expressions, list):
            raise errors.BadRequest("matchExpressions must be a list")
        requirements: list[Requirement] = []
        for key in sorted(match_labels):
            value = match_labels[key]
            if not isinstance(key, str) or not isinstance(value, str):
                raise errors.BadRequest("matchLabels must map strings to strings")
            requirements.append(Requirement.new(key, Operator.EQUALS, [value]))
        for expr in expressions:
            if not isinstance(expr, Mapping):
                raise errors.BadRequest("matchExpressions entries must be objects")
            raw_op = expr.get("operator")
            op = _DICT_OPERATORS.get(raw_op) if isinstance(raw_op, str) else None
            if op is None:
                shown = raw_op if isinstance(raw_op, str) else ("" if raw_op is None else raw_op)
                raise errors.BadRequest(
                    f"{_quote(str(shown))} is not a valid label selector operator")
            key = expr.get("key")
            values = expr.get("values") or []
            if not isinstance(key, str):
                raise errors.BadRequest("matchExpressions key must be a string")
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise errors.BadRequest("matchExpressions values must be a list of strings")
            requirements.append(Requirement.new(key, op, values))
        return cls(tuple(sorted(requirements, key=lambda r: r.key)))

    @classmethod
    def from_set(cls, labels: Mapping[str, str]) -> LabelSelector:
        """``k1=v1,k2=v2`` for an exact set of labels, without validation (SelectorFromSet)."""
        return cls(tuple(Requirement(k, Operator.EQUALS, (labels[k],)) for k in sorted(labels)))

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return self._matcher.matches(labels or {})

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# --- field selectors ---------------------------------------------------------------------------

_FIELD_OPERATORS = ("!=", "==", "=")  # tried in this order at each position


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped by a backslash."""
    if not text:
        return []
    terms: list[str] = []
    start, escaped = 0, False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _FIELD_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape(value: str) -> str:
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise errors.BadRequest(
                    f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            # Go prints the rune with %v, i.e. as its code point number.
            raise errors.BadRequest(
                f"invalid field selector: unescaped character in value: {ord(c)}")
        else:
            out.append(c)
    if escaped:
        raise errors.BadRequest("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """An AND of ``(field, op, value)`` terms; ``op`` is ``=`` or ``!=`` (``==`` reads as ``=``).

    A field missing from the object reads as the empty string, so ``f!=x`` matches it.
    """

    requirements: tuple[tuple[str, str, str], ...] = ()
    # per field: the values its ``=`` terms ask for (more than one: nothing matches) and the
    # values its ``!=`` terms refuse; matching costs one lookup per field, not per term
    _conditions: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = dataclasses.field(
        init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        equal: dict[str, set[str]] = {}
        unequal: dict[str, set[str]] = {}
        for name, op, value in self.requirements:
            equal.setdefault(name, set())
            unequal.setdefault(name, set())
            (equal if op == "=" else unequal)[name].add(value)
        object.__setattr__(self, "_conditions", tuple(
            (name, frozenset(equal[name]), frozenset(unequal[name])) for name in equal))

    @classmethod
    def parse(cls, text: str) -> FieldSelector:
        """Parse the query syntax; empty terms are skipped, so ``""`` selects everything."""
        requirements: list[tuple[str, str, str]] = []
        for term in sorted(_split_terms(text)):
            if not term:
                continue
            split = _split_term(term)
            if split is None:
                raise errors.BadRequest(
                    f"invalid selector: '{text}'; can't understand '{term}'")
            lhs, op, rhs = split
            requirements.append((lhs, "!=" if op == "!=" else "=", _unescape(rhs)))
        return cls(tuple(requirements))

    @property
    def fields(self) -> frozenset[str]:
        """The field names this selector reads."""
        return frozenset(f for f, _, _ in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        for name, equal, unequal in self._conditions:
            have = fields.get(name, "")
            if have in unequal or (equal and (len(equal) > 1 or have not in equal)):
                return False
        return True

    def exact_match(self, name: str) -> str | None:
        """The value an ``=`` term requires of ``name``, if any (for index lookups)."""
        for field, op, value in self.requirements:
            if field == name and op == "=":
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape(v)}" for f, op, v in self.requirements)


def check_supported(sel: FieldSelector, supported: Collection[str]) -> None:
    """Raise BadRequest for the first field (in term order) that is not in ``supported``."""
    for name, _, _ in sel.requirements:
        if name not in supported:
            raise errors.BadRequest(f"field label not supported: {name}")
