"""Tokens of the CEL grammar (cel-spec ``langdef``): literals, identifiers, operators.

:func:`tokenize` returns the whole token list or raises :class:`SyntaxErrorAt` with the offset
of the offending character. Literal values are decoded here (escapes, ``u`` suffixes, hex,
raw and triple-quoted strings, bytes), so the parser never looks at characters.

Not guaranteed: the exact wording of ANTLR's messages; ours name the same position.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

from setpoint.cel.objects import INT64_MAX, UINT64_MAX, UInt


class T(enum.Enum):
    INT = "int literal"
    UINT = "uint literal"
    DOUBLE = "double literal"
    STRING = "string literal"
    BYTES = "bytes literal"
    IDENT = "identifier"
    OP = "operator"
    EOF = "<EOF>"


@dataclass(frozen=True, slots=True)
class Token:
    kind: T
    text: str
    pos: int
    value: Any = None


class SyntaxErrorAt(Exception):
    def __init__(self, pos: int, message: str) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message


RESERVED: Final = frozenset({
    "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
    "loop", "package", "namespace", "return", "var", "void", "while",
})

_OPERATORS: Final = (
    "&&", "||", "==", "!=", "<=", ">=", ".?",
    "<", ">", "+", "-", "*", "/", "%", "!", "?", ":", ".", ",", "(", ")", "[", "]", "{", "}",
)
_SIMPLE_ESCAPES: Final = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}
_DIGITS: Final = frozenset("0123456789")
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_IDENT_START: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_IDENT_CHARS: Final = _IDENT_START | _DIGITS


def tokenize(src: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in " \t\n\r\f":
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c in _DIGITS or (c == "." and i + 1 < n and src[i + 1] in _DIGITS):
            tok, i = _number(src, i)
            out.append(tok)
            continue
        if c in _IDENT_START:
            j = i + 1
            while j < n and src[j] in _IDENT_CHARS:
                j += 1
            word = src[i:j]
            # String and bytes prefixes: r, R, b, B and their pairs.
            if j < n and src[j] in "'\"" and word.lower() in ("r", "b", "rb", "br"):
                tok, i = _string(src, j, raw="r" in word.lower(), as_bytes="b" in word.lower(),
                                 start=i)
                out.append(tok)
                continue
            out.append(Token(T.IDENT, word, i))
            i = j
            continue
        if c in "'\"":
            tok, i = _string(src, i, raw=False, as_bytes=False, start=i)
            out.append(tok)
            continue
        for op in _OPERATORS:
            if src.startswith(op, i):
                out.append(Token(T.OP, op, i))
                i += len(op)
                break
        else:
            raise SyntaxErrorAt(i, f"token recognition error at: '{c}'")
    out.append(Token(T.EOF, "<EOF>", n))
    return out


def _number(src: str, i: int) -> tuple[Token, int]:
    n = len(src)
    start = i
    if src.startswith(("0x", "0X"), i):
        j = i + 2
        while j < n and src[j] in _HEX:
            j += 1
        if j == i + 2:
            raise SyntaxErrorAt(i, f"token recognition error at: '{src[i:j]}'")
        value = int(src[i + 2:j], 16)
        if j < n and src[j] in "uU":
            if value > UINT64_MAX:
                raise SyntaxErrorAt(start, "invalid uint literal")
            return Token(T.UINT, src[start:j + 1], start, UInt(value)), j + 1
        return Token(T.INT, src[start:j], start, value), j
    j = i
    while j < n and src[j] in _DIGITS:
        j += 1
    is_double = False
    if j < n and src[j] == "." and j + 1 < n and src[j + 1] in _DIGITS:
        is_double = True
        j += 1
        while j < n and src[j] in _DIGITS:
            j += 1
    if j < n and src[j] in "eE":
        k = j + 1
        if k < n and src[k] in "+-":
            k += 1
        if k < n and src[k] in _DIGITS:
            is_double = True
            j = k
            while j < n and src[j] in _DIGITS:
                j += 1
    text = src[start:j]
    if is_double:
        return Token(T.DOUBLE, text, start, float(text)), j
    value = int(text)
    if j < n and src[j] in "uU":
        if value > UINT64_MAX:
            raise SyntaxErrorAt(start, "invalid uint literal")
        return Token(T.UINT, src[start:j + 1], start, UInt(value)), j + 1
    # The range is checked by the parser, which knows whether a minus sign precedes it.
    if value > INT64_MAX + 1:
        raise SyntaxErrorAt(start, "invalid int literal")
    return Token(T.INT, text, start, value), j


def _string(src: str, i: int, *, raw: bool, as_bytes: bool, start: int) -> tuple[Token, int]:
    n = len(src)
    quote = src[i]
    triple = src.startswith(quote * 3, i)
    delim = quote * 3 if triple else quote
    j = i + len(delim)
    chunks: list[str] = []
    raw_bytes: list[int] = []  # for bytes literals, escapes produce octets

    def emit(text: str) -> None:
        if as_bytes:
            raw_bytes.extend(text.encode())
        else:
            chunks.append(text)

    while True:
        if j >= n:
            raise SyntaxErrorAt(start, f"token recognition error at: '{src[start:]}'")
        if src.startswith(delim, j):
            j += len(delim)
            break
        c = src[j]
        if not triple and c in "\r\n":
            raise SyntaxErrorAt(start, f"token recognition error at: '{src[start:j]}'")
        if c == "\\" and not raw:
            if j + 1 >= n:
                raise SyntaxErrorAt(j, "invalid escape sequence")
            e = src[j + 1]
            if e in _SIMPLE_ESCAPES:
                emit(_SIMPLE_ESCAPES[e])
                j += 2
            elif e in "xX":
                digits = src[j + 2:j + 4]
                if len(digits) != 2 or not set(digits) <= _HEX:
                    raise SyntaxErrorAt(j, "invalid escape sequence")
                code = int(digits, 16)
                if as_bytes:
                    raw_bytes.append(code)
                else:
                    chunks.append(chr(code))
                j += 4
            elif e in "uU":
                width = 4 if e == "u" else 8
                digits = src[j + 2:j + 2 + width]
                if as_bytes or len(digits) != width or not set(digits) <= _HEX:
                    raise SyntaxErrorAt(j, "invalid escape sequence")
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise SyntaxErrorAt(j, "invalid unicode code point")
                chunks.append(chr(code))
                j += 2 + width
            elif e in "0123":
                digits = src[j + 1:j + 4]
                if len(digits) != 3 or not set(digits) <= set("01234567"):
                    raise SyntaxErrorAt(j, "invalid escape sequence")
                code = int(digits, 8)
                if as_bytes:
                    raw_bytes.append(code)
                else:
                    chunks.append(chr(code))
                j += 4
            else:
                raise SyntaxErrorAt(j, "invalid escape sequence")
            continue
        emit(c)
        j += 1
    text = src[start:j]
    if as_bytes:
        return Token(T.BYTES, text, start, bytes(raw_bytes)), j
    return Token(T.STRING, text, start, "".join(chunks)), j
