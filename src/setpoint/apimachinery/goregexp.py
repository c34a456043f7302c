"""OpenAPI ``pattern`` and CEL regular expressions: checked as Go checks them, run on RE2.

Kubernetes compiles ``pattern`` and CEL's ``matches``/``find`` with Go's ``regexp``: RE2
syntax, leftmost-first matching, unanchored search. This module

* checks a pattern with Go's parser rules (:func:`error`), so a pattern Kubernetes refuses is
  refused with Go's message (``error parsing regexp: …``): lookaround, backreferences,
  possessive quantifiers, ``\\C``, bad escapes, unbalanced brackets, repeat counts over
  1000, and so on;
* compiles it with RE2 (:func:`compile_pattern`), which runs in time linear in the text. A
  pattern Go's rules accept but RE2 cannot compile (a program over RE2's memory budget, an
  unknown Unicode class) is refused too, with RE2's reason in Go's form. The compiled pattern
  is metered (:mod:`setpoint.apimachinery.regexp`): a match the work budget cannot pay for
  raises :class:`~setpoint.apimachinery.regexp.BudgetExceeded`.

Nothing is translated for Python's ``re``: RE2's syntax and Go's are one, so the pattern as
written is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from setpoint.apimachinery import regexp

__all__ = ["PatternError", "compile_pattern", "error"]

_PREFIX = "error parsing regexp: "
_MAX_REPEAT = 1000

_PERL_CLASSES = frozenset("dDwWsS")
_POSIX = frozenset({
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
})
_SIMPLE_ESCAPES = frozenset("afnrtv")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class PatternError(ValueError):
    """A pattern Kubernetes (or RE2) refuses; the message reads as Go's."""


class _GoError(Exception):
    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"{_PREFIX}{code}: `{expr}`")


def error(pattern: str) -> str | None:
    """Why ``pattern`` cannot be used (Go's words), or ``None`` when it can."""
    try:
        compile_pattern(pattern)
    except PatternError as e:
        return str(e)
    return None


def compile_pattern(pattern: str) -> regexp.Regexp:
    """``pattern`` compiled for RE2; :class:`PatternError` when Go or RE2 refuses it."""
    try:
        _Parser(pattern).parse()
    except _GoError as e:
        raise PatternError(str(e)) from None
    try:
        return regexp.Regexp(pattern, metered=True)
    except regexp.RegexpError as e:
        code, _, expr = str(e).partition(": ")
        raise PatternError(f"{_PREFIX}{code}: `{expr}`" if expr else f"{_PREFIX}{code}") \
            from None


@dataclass(slots=True)
class _Frame:
    start: int  # position of the "(" (for error messages)


class _Parser:
    """Go's ``regexp/syntax`` parse rules, for their errors only (RE2 builds the program)."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.frames: list[_Frame] = [_Frame(0)]
        self.last_repeatable = False  # can a repetition operator follow what came last?
        self.last_was_repeat = False
        self.last_repeat_start = 0

    # --- driver -------------------------------------------------------------------------------

    def parse(self) -> None:
        p = self.p
        n = len(p)
        while self.i < n:
            c = p[self.i]
            if c == "(":
                self._group()
            elif c == ")":
                self._close()
            elif c == "|":
                self.i += 1
                self._mark(False)
            elif c in "*+?":
                self._repeat_op(c, self.i, self.i + 1)
            elif c == "{":
                groups = _repeat_at(p, self.i)
                if groups is None:
                    self.i += 1
                    self._mark(True)
                else:
                    self._brace_repeat(groups)
            elif c == "[":
                self._class()
            elif c == "\\":
                self._escape()
            else:  # a literal, ".", "^" or "$" (Go lets an empty-width assertion repeat)
                self.i += 1
                self._mark(True)
        if len(self.frames) > 1:
            raise _GoError("missing closing )", p)

    def _mark(self, repeatable: bool, was_repeat: bool = False) -> None:
        self.last_repeatable = repeatable
        self.last_was_repeat = was_repeat

    # --- repetition ---------------------------------------------------------------------------

    def _repeat_op(self, op: str, start: int, end: int) -> None:
        p = self.p
        if end < len(p) and p[end] == "?":
            end += 1
        if self.last_was_repeat:
            raise _GoError("invalid nested repetition operator", p[self.last_repeat_start:end])
        if not self.last_repeatable:
            raise _GoError("missing argument to repetition operator", p[start:end])
        self.i = end
        self._mark(True, was_repeat=True)
        self.last_repeat_start = start

    def _brace_repeat(self, groups: tuple[str, str | None]) -> None:
        low_text, high_text = groups
        text = "{" + low_text + ("," + high_text if high_text is not None else "") + "}"
        low = int(low_text) if len(low_text) <= 8 else _MAX_REPEAT + 1
        high: int | None = low
        if high_text is not None:
            high = (int(high_text) if len(high_text) <= 8 else _MAX_REPEAT + 1) \
                if high_text else None
        if low > _MAX_REPEAT or (high is not None and (high > _MAX_REPEAT or high < low)):
            raise _GoError("invalid repeat count", text)
        start = self.i
        end = start + len(text)
        self.i = end
        lazy = end < len(self.p) and self.p[end] == "?"
        if self.last_was_repeat:
            raise _GoError("invalid nested repetition operator", self.p[self.last_repeat_start:end])
        if not self.last_repeatable:
            raise _GoError("missing argument to repetition operator", text)
        if lazy:
            self.i += 1
        self._mark(True, was_repeat=True)
        self.last_repeat_start = start

    # --- groups -------------------------------------------------------------------------------

    def _group(self) -> None:
        p = self.p
        start = self.i
        if not p.startswith("(?", start):
            self.i += 1
            self.frames.append(_Frame(start))
            self._mark(False)
            return
        rest = p[start:]
        begin = 0
        if rest.startswith("(?P<"):
            begin = 4
        elif rest.startswith("(?<"):
            begin = 3
        if begin:
            end = rest.find(">")
            if end < 0:
                raise _GoError("invalid named capture", rest)
            name = rest[begin:end]
            if not name or not all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name):
                raise _GoError("invalid named capture", rest[: end + 1])
            self.i = start + end + 1
            self.frames.append(_Frame(start))
            self._mark(False)
            return
        # Flags: (?flags) or (?flags:re)
        j = start + 2
        negated = False
        saw_flag = False
        while j < len(p):
            c = p[j]
            j += 1
            if c in "imsU":
                saw_flag = True
            elif c == "-":
                if negated:
                    raise _GoError("invalid or unsupported Perl syntax", p[start:j])
                negated = True
                saw_flag = False
            elif c in ":)":
                if negated and not saw_flag:
                    raise _GoError("invalid or unsupported Perl syntax", p[start:j])
                self.i = j
                if c == ":":
                    self.frames.append(_Frame(start))
                self._mark(False)
                return
            else:
                raise _GoError("invalid or unsupported Perl syntax", p[start:j])
        raise _GoError("missing closing )", p)

    def _close(self) -> None:
        if len(self.frames) == 1:
            raise _GoError("unexpected )", self.p)
        self.frames.pop()
        self.i += 1
        self._mark(True)

    # --- escapes ------------------------------------------------------------------------------

    def _escape_common(self) -> int | None:
        """Check an escape at ``self.i`` and move past it: its code point, or ``None`` for a
        class (``\\pL``)."""
        p = self.p
        start = self.i
        if start + 1 >= len(p):
            raise _GoError("trailing backslash at end of expression", "")
        c = p[start + 1]
        self.i = start + 2
        if c in "1234567":
            if self.i < len(p) and p[self.i] in "01234567":
                return self._octal(start + 1)
            raise _GoError("invalid escape sequence", p[start:self.i])
        if c == "0":
            return self._octal(start + 1)
        if c == "x":
            if self.i < len(p) and p[self.i] == "{":
                end = p.find("}", self.i)
                digits = p[self.i + 1: end] if end >= 0 else ""
                if end < 0 or not digits or not all(ch in _HEX_DIGITS for ch in digits):
                    stop = (end + 1) if end >= 0 else len(p)
                    raise _GoError("invalid escape sequence", p[start:stop])
                self.i = end + 1
                if len(digits) > 8 or int(digits, 16) > 0x10FFFF:
                    raise _GoError("invalid escape sequence", p[start:self.i])
                return int(digits, 16)
            digits = p[self.i: self.i + 2]
            if len(digits) < 2 or not all(ch in _HEX_DIGITS for ch in digits):
                raise _GoError("invalid escape sequence", p[start: self.i + len(digits)])
            self.i += 2
            return int(digits, 16)
        if c in _SIMPLE_ESCAPES:
            return ord({"a": "\a", "f": "\f", "t": "\t", "n": "\n", "r": "\r",
                        "v": "\v"}[c])
        if c in "pP":
            # a Unicode class: \pL or \p{Greek}; RE2 checks the name
            if self.i < len(p) and p[self.i] == "{":
                end = p.find("}", self.i)
                if end < 0:
                    raise _GoError("invalid character class range", p[start:])
                self.i = end + 1
            elif self.i < len(p):
                self.i += 1
            else:
                raise _GoError("invalid character class range", p[start:])
            return None
        if c.isascii() and not c.isalnum():
            return ord(c)
        raise _GoError("invalid escape sequence", p[start:self.i])

    def _octal(self, at: int) -> int:
        p = self.p
        end = at
        while end < len(p) and end < at + 3 and p[end] in "01234567":
            end += 1
        self.i = end
        return int(p[at:end], 8)

    def _escape(self) -> None:
        p = self.p
        start = self.i
        if start + 1 < len(p):
            c = p[start + 1]
            if c in _PERL_CLASSES or c in "AzbB":
                self.i = start + 2
                self._mark(True)
                return
            if c == "Q":
                end = p.find("\\E", start + 2)
                literal = p[start + 2:] if end < 0 else p[start + 2: end]
                self.i = len(p) if end < 0 else end + 2
                if literal:
                    self._mark(True)
                return
        self._escape_common()
        self._mark(True)

    # --- character classes --------------------------------------------------------------------

    def _class(self) -> None:
        p = self.p
        start = self.i
        j = start + 1
        if j < len(p) and p[j] == "^":
            j += 1
        first = True
        while True:
            if j >= len(p):
                raise _GoError("missing closing ]", p[start:])
            c = p[j]
            if c == "]" and not first:
                j += 1
                break
            first = False
            if c == "[" and p.startswith("[:", j):
                end = p.find(":]", j + 2)
                if end >= 0:
                    name = p[j + 2: end].removeprefix("^")
                    if name not in _POSIX:
                        raise _GoError("invalid character class range", p[j: end + 2])
                    j = end + 2
                    continue
            range_start = j
            lo, j = self._class_char(j)
            if lo is None:
                continue
            if j + 1 < len(p) and p[j] == "-" and p[j + 1] != "]":
                hi, j2 = self._class_char(j + 1)
                if hi is None or hi < lo:
                    raise _GoError("invalid character class range", p[range_start:j2])
                j = j2
        self.i = j
        self._mark(True)

    def _class_char(self, j: int) -> tuple[int | None, int]:
        """One class element at ``j``: (code point, or None for a class escape; next index)."""
        p = self.p
        c = p[j]
        if c == "\\":
            if j + 1 < len(p) and p[j + 1] in _PERL_CLASSES:
                return None, j + 2
            saved = self.i
            self.i = j
            cp = self._escape_common()
            nxt = self.i
            self.i = saved
            return cp, nxt
        return ord(c), j + 1


def _repeat_at(p: str, i: int) -> tuple[str, str | None] | None:
    """``{n}``, ``{n,}`` or ``{n,m}`` at ``i``: (n, None | "" | m); ``None`` for a literal
    brace (Go reads ``{,2}`` and ``{x}`` as text)."""
    j = i + 1
    while j < len(p) and "0" <= p[j] <= "9":
        j += 1
    if j == i + 1 or j >= len(p):
        return None
    low = p[i + 1:j]
    if p[j] == "}":
        return low, None
    if p[j] != ",":
        return None
    k = j + 1
    while k < len(p) and "0" <= p[k] <= "9":
        k += 1
    if k >= len(p) or p[k] != "}":
        return None
    return low, p[j + 1:k]
