"""Go (RE2) regular expressions, checked and translated for Python's ``re``.

Kubernetes compiles ``pattern`` with Go's ``regexp``: RE2 syntax, leftmost-first matching,
unanchored ``MatchString``. :func:`translate` parses a pattern with RE2's rules and returns:

* ``error``: the text Go's ``regexp.Compile`` would fail with (``error parsing regexp: …``), for
  patterns Kubernetes rejects — lookaround, backreferences, possessive quantifiers, bad escapes,
  unbalanced brackets, repeat counts over 1000, and so on;
* ``python``: an equivalent pattern for ``re.search``, or ``None`` when the pattern is valid RE2
  but uses something Python's ``re`` cannot express (``\\p{…}`` classes, ``\\C``, the ``U``
  flag, negated POSIX classes). Callers skip such a pattern rather than guess.

Translation keeps Go's meaning where Python differs: ``$`` without ``(?m)`` is end of text
(``\\Z``), ``\\z`` is ``\\Z``, ``\\d \\w \\s \\b`` are ASCII-only, ``{,n}`` is literal text, and a
flag group in the middle of a pattern scopes to the rest of its group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = "error parsing regexp: "
_MAX_REPEAT = 1000

_WORD = "0-9A-Za-z_"
_SPACE = "\\t\\n\\f\\r "
_PERL_CLASSES = {
    "d": ("0-9", False), "D": ("0-9", True),
    "w": (_WORD, False), "W": (_WORD, True),
    "s": (_SPACE, False), "S": (_SPACE, True),
}
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z", "word": _WORD, "xdigit": "0-9A-Fa-f",
}
_WORD_BOUNDARY = f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))"
_NOT_WORD_BOUNDARY = f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))"
_SIMPLE_ESCAPES = {"a": "\\a", "f": "\\f", "t": "\\t", "n": "\\n", "r": "\\r", "v": "\\v"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_REPEAT_RE = re.compile(r"\{(\d+)(,(\d*))?\}")


class _Untranslatable(Exception):
    """Valid RE2 that Python's ``re`` cannot express."""


class _GoError(Exception):
    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"{_PREFIX}{code}: `{expr}`")


@dataclass(frozen=True, slots=True)
class Translation:
    """The outcome of :func:`translate`: at most one of ``python`` and ``error`` is set."""

    python: str | None
    error: str | None

    @property
    def valid(self) -> bool:
        return self.error is None


def translate(pattern: str) -> Translation:
    """Check ``pattern`` as Go would and translate it for ``re``; see the module docstring."""
    try:
        python = _Parser(pattern).parse()
    except _GoError as e:
        return Translation(None, str(e))
    except _Untranslatable:
        return Translation(None, None)
    try:
        re.compile(python)
    except (re.error, OverflowError, RecursionError):
        return Translation(None, None)
    return Translation(python, None)


def compile_pattern(pattern: str) -> re.Pattern[str] | None:
    """A compiled equivalent of ``pattern`` for ``search``; ``None`` if invalid/untranslatable."""
    t = translate(pattern)
    return re.compile(t.python) if t.python is not None else None


@dataclass(slots=True)
class _Frame:
    multiline: bool
    opened: list[str]  # scoped flag groups opened by mid-group "(?flags)", reopened after "|"
    start: int  # position of the "(" (for error messages)
    atoms: int  # atoms emitted since the frame start or the last "|"


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.out: list[str] = []
        self.frames: list[_Frame] = [_Frame(False, [], 0, 0)]
        self.last_repeatable = False  # can a repetition operator follow what was emitted last?
        self.last_was_repeat = False
        self.last_repeat_start = 0

    # --- driver -------------------------------------------------------------------------------

    def parse(self) -> str:
        p = self.p
        n = len(p)
        while self.i < n:
            c = p[self.i]
            if c == "(":
                self._group()
            elif c == ")":
                self._close()
            elif c == "|":
                frame = self.frames[-1]
                self.out.append(")" * len(frame.opened))
                self.out.append("|")
                for flags in frame.opened:
                    self.out.append(f"(?{flags}:")
                frame.atoms = 0
                self.i += 1
                self._mark(False)
            elif c in "*+?":
                self._repeat_op(c, self.i, self.i + 1)
            elif c == "{":
                m = _REPEAT_RE.match(p, self.i)
                if m is None:
                    self._atom("\\{")
                    self.i += 1
                else:
                    self._brace_repeat(m)
            elif c == "[":
                self._class()
            elif c == "\\":
                self._escape()
            elif c == "^":
                self._emit_assertion("^")
                self.i += 1
            elif c == "$":
                self._emit_assertion("$" if self.frames[-1].multiline else "\\Z")
                self.i += 1
            elif c == ".":
                self._atom(".")
                self.i += 1
            else:
                self._atom(re.escape(c))
                self.i += 1
        if len(self.frames) > 1:
            raise _GoError("missing closing )", p)
        self.out.append(")" * len(self.frames[0].opened))
        return "".join(self.out)

    def _mark(self, repeatable: bool, was_repeat: bool = False) -> None:
        self.last_repeatable = repeatable
        self.last_was_repeat = was_repeat

    def _atom(self, text: str) -> None:
        self.out.append(text)
        self.frames[-1].atoms += 1
        self._mark(True)

    def _emit_assertion(self, text: str) -> None:
        # RE2 allows repeating an empty-width assertion; Python does not, so wrap it.
        self.out.append("(?:" + text + ")")
        self.frames[-1].atoms += 1
        self._mark(True)

    # --- repetition ---------------------------------------------------------------------------

    def _repeat_op(self, op: str, start: int, end: int) -> None:
        p = self.p
        if end < len(p) and p[end] == "?":
            end += 1
        text = p[start:end]
        if self.last_was_repeat:
            raise _GoError("invalid nested repetition operator", p[self.last_repeat_start:end])
        if not self.last_repeatable:
            raise _GoError("missing argument to repetition operator", text)
        self.out.append(op + ("?" if text.endswith("?") and len(text) > len(op) else ""))
        self.i = end
        self._mark(True, was_repeat=True)
        self.last_repeat_start = start

    def _brace_repeat(self, m: re.Match[str]) -> None:
        lo = int(m.group(1))
        hi: int | None = lo
        if m.group(2) is not None:
            hi = int(m.group(3)) if m.group(3) else None
        text = m.group(0)
        if lo > _MAX_REPEAT or (hi is not None and (hi > _MAX_REPEAT or hi < lo)):
            raise _GoError("invalid repeat count", text)
        start = self.i
        end = m.end()
        self.i = end
        lazy = end < len(self.p) and self.p[end] == "?"
        if self.last_was_repeat:
            raise _GoError("invalid nested repetition operator", self.p[self.last_repeat_start:end])
        if not self.last_repeatable:
            raise _GoError("missing argument to repetition operator", text)
        if lazy:
            self.i += 1
        self.out.append(text + ("?" if lazy else ""))
        self._mark(True, was_repeat=True)
        self.last_repeat_start = start

    # --- groups -------------------------------------------------------------------------------

    def _group(self) -> None:
        p = self.p
        start = self.i
        frame = self.frames[-1]
        if not p.startswith("(?", start):
            self.out.append("(")
            self.i += 1
            self.frames.append(_Frame(frame.multiline, [], start, 0))
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
            if not name[0].isalpha() and name[0] != "_":
                raise _Untranslatable()
            self.out.append(f"(?P<{name}>")
            self.i = start + end + 1
            self.frames.append(_Frame(frame.multiline, [], start, 0))
            self._mark(False)
            return
        # Flags: (?flags) or (?flags:re)
        j = start + 2
        on = ""
        off = ""
        negated = False
        saw_flag = False
        while j < len(p):
            c = p[j]
            j += 1
            if c in "imsU":
                if c == "U":
                    raise _Untranslatable()
                if negated:
                    off += c
                else:
                    on += c
                saw_flag = True
            elif c == "-":
                if negated:
                    raise _GoError("invalid or unsupported Perl syntax", p[start:j])
                negated = True
                saw_flag = False
            elif c in ":)":
                if negated and not saw_flag:
                    raise _GoError("invalid or unsupported Perl syntax", p[start:j])
                multiline = frame.multiline
                if "m" in on:
                    multiline = True
                if "m" in off:
                    multiline = False
                flags = on + ("-" + off if off else "")
                if c == ":":
                    self.out.append(f"(?{flags}:" if flags else "(?:")
                    self.i = j
                    self.frames.append(_Frame(multiline, [], start, 0))
                    self._mark(False)
                else:
                    self.i = j
                    if flags:
                        self.out.append(f"(?{flags}:")
                        frame.opened.append(flags)
                    frame.multiline = multiline
                    self._mark(False)
                return
            else:
                raise _GoError("invalid or unsupported Perl syntax", p[start:j])
        raise _GoError("missing closing )", p)

    def _close(self) -> None:
        if len(self.frames) == 1:
            raise _GoError("unexpected )", self.p)
        frame = self.frames.pop()
        self.out.append(")" * len(frame.opened))
        self.out.append(")")
        self.frames[-1].atoms += 1
        self.i += 1
        self._mark(True)

    # --- escapes ------------------------------------------------------------------------------

    def _escape_common(self, in_class: bool) -> tuple[str, int | None]:
        """Parse an escape at ``self.i``; return (python text, code point or None for a class)."""
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
                cp = int(digits, 16)
                self.i = end + 1
                if cp > 0x10FFFF:
                    raise _GoError("invalid escape sequence", p[start:self.i])
                return _literal(cp, in_class), cp
            digits = p[self.i: self.i + 2]
            if len(digits) < 2 or not all(ch in _HEX_DIGITS for ch in digits):
                raise _GoError("invalid escape sequence", p[start: self.i + len(digits)])
            self.i += 2
            cp = int(digits, 16)
            return _literal(cp, in_class), cp
        if c in _SIMPLE_ESCAPES:
            cp = ord({"a": "\a", "f": "\f", "t": "\t", "n": "\n", "r": "\r", "v": "\v"}[c])
            return _SIMPLE_ESCAPES[c], cp
        if c in "pPC":
            raise _Untranslatable()
        if c.isascii() and not c.isalnum():
            return re.escape(c), ord(c)
        raise _GoError("invalid escape sequence", p[start:self.i])

    def _octal(self, at: int) -> tuple[str, int]:
        p = self.p
        end = at
        while end < len(p) and end < at + 3 and p[end] in "01234567":
            end += 1
        cp = int(p[at:end], 8)
        self.i = end
        return _literal(cp, False), cp

    def _escape(self) -> None:
        p = self.p
        start = self.i
        if start + 1 < len(p):
            c = p[start + 1]
            if c in _PERL_CLASSES:
                chars, negated = _PERL_CLASSES[c]
                self.i = start + 2
                self._atom(("[^" if negated else "[") + chars + "]")
                return
            if c in "AzbB":
                self.i = start + 2
                text = {"A": "\\A", "z": "\\Z", "b": _WORD_BOUNDARY, "B": _NOT_WORD_BOUNDARY}[c]
                self._emit_assertion(text)
                return
            if c == "Q":
                end = p.find("\\E", start + 2)
                literal = p[start + 2:] if end < 0 else p[start + 2: end]
                self.i = len(p) if end < 0 else end + 2
                for ch in literal:
                    self._atom(re.escape(ch))
                if not literal:
                    self._mark(self.last_repeatable)
                return
        text, _ = self._escape_common(in_class=False)
        saved = self.i
        self.i = start
        self._atom(text)
        self.i = saved

    # --- character classes --------------------------------------------------------------------

    def _class(self) -> None:
        p = self.p
        start = self.i
        j = start + 1
        negated = False
        if j < len(p) and p[j] == "^":
            negated = True
            j += 1
        items: list[str] = []
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
                    name = p[j + 2: end]
                    neg = name.startswith("^")
                    if neg:
                        name = name[1:]
                    if name not in _POSIX:
                        raise _GoError("invalid character class range", p[j: end + 2])
                    if neg:
                        raise _Untranslatable()
                    items.append(_POSIX[name])
                    j = end + 2
                    continue
            range_start = j
            lo, lo_text, j = self._class_char(j)
            if lo is None:
                items.append(lo_text)
                continue
            if j + 1 < len(p) and p[j] == "-" and p[j + 1] != "]":
                hi, hi_text, j2 = self._class_char(j + 1)
                if hi is None or hi < lo:
                    raise _GoError("invalid character class range", p[range_start:j2])
                items.append(lo_text + "-" + hi_text)
                j = j2
            else:
                items.append(lo_text)
        self.i = j
        body = "".join(items)
        self._atom(("[^" if negated else "[") + body + "]")

    def _class_char(self, j: int) -> tuple[int | None, str, int]:
        """One class element at ``j``: (code point or None for a class escape, text, next index)."""
        p = self.p
        c = p[j]
        if c == "\\":
            if j + 1 < len(p) and p[j + 1] in _PERL_CLASSES:
                chars, negated = _PERL_CLASSES[p[j + 1]]
                if negated:
                    raise _Untranslatable()
                return None, chars, j + 2
            saved = self.i
            self.i = j
            _text, cp = self._escape_common(in_class=True)
            nxt = self.i
            self.i = saved
            assert cp is not None
            return cp, _literal(cp, True), nxt
        return ord(c), _literal(ord(c), True), j + 1


def _literal(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if ch.isascii() and (ch.isalnum() or ch == "_"):
        return ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"
