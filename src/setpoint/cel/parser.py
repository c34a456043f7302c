"""A recursive-descent parser for CEL, with cel-go's macros and optional syntax.

``parse(src)`` returns the root :class:`~setpoint.cel.ast.Node` or raises
:class:`~setpoint.cel.errors.CELCompileError` whose detail reads like cel-go's
(``ERROR: <input>:line:col: Syntax error: ...`` followed by the line and a caret).

Grammar: cel-spec's ``langdef`` (ternary, ``||``, ``&&``, relations including ``in``,
additive, multiplicative, unary ``!``/``-``, member selection, calls, indexing, list and map
literals, message construction) plus the optional syntax ``a.?b``, ``a[?i]``, ``[?x]`` and
``{?k: v}``. Macros expanded here: ``has``, ``all``, ``exists``, ``exists_one``/``existsOne``,
``map`` (2 and 3 arguments), ``filter``, the two-variable forms of ``all``/``exists``/
``existsOne``, ``transformList``, ``transformMap``, ``transformMapEntry``, ``optMap``,
``optFlatMap`` and ``sortBy``.

Limits (so that neither the parser nor the evaluator can exhaust Python's stack): an
expression may have at most :data:`MAX_SOURCE` code points and nest at most
:data:`MAX_DEPTH` levels; chains of ``&&``/``||`` are balanced, as cel-go balances them.
"""

from __future__ import annotations

from typing import Final

from setpoint.cel import ast
from setpoint.cel.errors import CELCompileError
from setpoint.cel.lexer import RESERVED, SyntaxErrorAt, T, Token, tokenize
from setpoint.cel.objects import INT64_MAX

MAX_SOURCE: Final = 100_000
MAX_DEPTH: Final = 96

_LITERAL_WORDS: Final = frozenset({"true", "false", "null", "in"})
_OPERATOR_NAMES: Final = {
    "||": "_||_", "&&": "_&&_", "<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_",
    "==": "_==_", "!=": "_!=_", "in": "@in", "+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_",
    "%": "_%_",
}
_PRECEDENCE: Final = {
    "||": 1, "&&": 2, "<": 3, "<=": 3, ">": 3, ">=": 3, "==": 3, "!=": 3, "in": 3,
    "+": 4, "-": 4, "*": 5, "/": 5, "%": 5,
}


def format_issue(src: str, pos: int, message: str) -> str:
    """One issue as cel-go prints it: location, message, the source line and a caret."""
    line_no = src.count("\n", 0, pos) + 1
    line_start = src.rfind("\n", 0, pos) + 1
    line_end = src.find("\n", pos)
    line = src[line_start:] if line_end < 0 else src[line_start:line_end]
    col = pos - line_start
    return f"ERROR: <input>:{line_no}:{col + 1}: {message}\n | {line}\n | {'.' * col}^"


def parse(src: str) -> ast.Node:
    if len(src) > MAX_SOURCE:
        raise CELCompileError(
            f"ERROR: <input>:-1:0: expression code point size exceeds limit: size: {len(src)},"
            f" limit {MAX_SOURCE}")
    try:
        tokens = tokenize(src)
        return _Parser(tokens).parse()
    except SyntaxErrorAt as e:
        prefix = "" if e.message.startswith(("argument", "invalid argument", "duplicate",
                                             "iteration", "expression recursion")) \
            else "Syntax error: "
        raise CELCompileError(format_issue(src, e.pos, prefix + e.message)) from None


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.toks = tokens
        self.i = 0
        self.depth = 0

    # -- tokens ----------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def at(self, text: str) -> bool:
        t = self.toks[self.i]
        return t.kind is T.OP and t.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str) -> Token:
        t = self.tok
        if t.kind is T.OP and t.text == text:
            self.i += 1
            return t
        raise SyntaxErrorAt(t.pos, f"mismatched input '{t.text}' expecting '{text}'")

    def unexpected(self) -> SyntaxErrorAt:
        t = self.tok
        if t.kind is T.EOF:
            return SyntaxErrorAt(t.pos, "mismatched input '<EOF>' expecting an expression")
        return SyntaxErrorAt(t.pos, f"extraneous input '{t.text}'")

    # -- grammar --------------------------------------------------------------------------

    def parse(self) -> ast.Node:
        node = self.expr()
        if self.tok.kind is not T.EOF:
            t = self.tok
            raise SyntaxErrorAt(t.pos, f"mismatched input '{t.text}' expecting <EOF>")
        _check_tree(node)
        return node

    def expr(self) -> ast.Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SyntaxErrorAt(self.tok.pos, "expression recursion limit exceeded")
        try:
            cond = self.binary(1)
            if self.at("?"):
                pos = self.tok.pos
                self.i += 1
                yes = self.binary(1)
                self.expect(":")
                no = self.expr()
                return ast.Call(pos, "_?_:_", (cond, yes, no))
            return cond
        finally:
            self.depth -= 1

    def binary_op(self) -> tuple[str, int] | None:
        t = self.tok
        if t.kind is T.OP and t.text in _PRECEDENCE:
            return t.text, _PRECEDENCE[t.text]
        if t.kind is T.IDENT and t.text == "in":
            return "in", _PRECEDENCE["in"]
        return None

    def binary(self, min_prec: int) -> ast.Node:
        """Binary operators by precedence climbing (one stack frame per precedence step, so
        nesting depth, not expression length, bounds recursion). ``&&``/``||`` chains are
        built balanced, as cel-go builds them."""
        left = self.unary()
        while True:
            found = self.binary_op()
            if found is None or found[1] < min_prec:
                return left
            op, prec = found
            if op in ("&&", "||"):
                terms, positions = [left], []
                while self.at(op):
                    positions.append(self.tok.pos)
                    self.i += 1
                    terms.append(self.binary(prec + 1))
                left = _balance(_OPERATOR_NAMES[op], terms, positions)
                continue
            pos = self.tok.pos
            self.i += 1
            right = self.binary(prec + 1)
            left = ast.Call(pos, _OPERATOR_NAMES[op], (left, right))

    def unary(self) -> ast.Node:
        if self.at("!"):
            bangs: list[int] = []
            while self.at("!"):
                bangs.append(self.tok.pos)
                self.i += 1
            node = self.member()
            for pos in reversed(bangs):
                node = ast.Call(pos, "!_", (node,))
            return node
        if self.at("-"):
            minuses: list[int] = []
            while self.at("-"):
                minuses.append(self.tok.pos)
                self.i += 1
            nxt = self.tok
            if nxt.kind in (T.INT, T.DOUBLE):
                # The last minus belongs to the literal (the grammar's signed literal).
                self.i += 1
                lit = ast.Literal(minuses.pop(), -nxt.value)
                node = self.member_suffix(lit)
            else:
                node = self.member()
            for pos in reversed(minuses):
                node = ast.Call(pos, "-_", (node,))
            return node
        return self.member()

    def member(self) -> ast.Node:
        return self.member_suffix(self.primary())

    def member_suffix(self, node: ast.Node) -> ast.Node:
        while True:
            t = self.tok
            if self.at(".") or self.at(".?"):
                optional = t.text == ".?"
                self.i += 1
                name_tok = self.tok
                if name_tok.kind is not T.IDENT or name_tok.text in _LITERAL_WORDS:
                    raise SyntaxErrorAt(name_tok.pos,
                                        f"mismatched input '{name_tok.text}' expecting IDENTIFIER")
                self.i += 1
                if not optional and self.at("("):
                    call_pos = self.tok.pos
                    self.i += 1
                    args = self.args(")")
                    node = self.receiver_call(call_pos, node, name_tok.text, args)
                else:
                    node = ast.Select(name_tok.pos - 1, node, name_tok.text, optional=optional)
            elif self.at("["):
                self.i += 1
                optional = self.accept("?")
                index = self.expr()
                self.expect("]")
                node = ast.Call(t.pos, "_[?_]" if optional else "_[_]", (node, index))
            else:
                return node

    def primary(self) -> ast.Node:
        t = self.tok
        if t.kind is T.OP:
            if t.text == "(":
                self.i += 1
                node = self.expr()
                self.expect(")")
                return node
            if t.text == "[":
                self.i += 1
                return self.list_literal(t.pos)
            if t.text == "{":
                self.i += 1
                return self.map_literal(t.pos)
            if t.text == ".":
                self.i += 1
                if self.tok.kind is not T.IDENT:
                    raise self.unexpected()
                return self.ident_or_call(self.tok, leading_dot=True)
            raise self.unexpected()
        if t.kind is T.IDENT:
            if t.text in ("true", "false"):
                self.i += 1
                return ast.Literal(t.pos, t.text == "true")
            if t.text == "null":
                self.i += 1
                return ast.Literal(t.pos, None)
            return self.ident_or_call(t, leading_dot=False)
        if t.kind in (T.INT, T.UINT, T.DOUBLE, T.STRING, T.BYTES):
            self.i += 1
            return ast.Literal(t.pos, t.value)
        raise self.unexpected()

    def ident_or_call(self, t: Token, *, leading_dot: bool) -> ast.Node:
        if t.text in RESERVED or t.text == "in":
            raise SyntaxErrorAt(t.pos, f"reserved identifier: {t.text}")
        self.i += 1
        if self.at("("):
            self.i += 1
            args = self.args(")")
            return self.global_call(t.pos, t.text, args)
        if self.at("{"):
            return self.struct_literal(t)
        if self.at(".") and not leading_dot:
            # A qualified message name such as ``a.b.Msg{...}``: look ahead for ``{``.
            j = self.i
            parts = [t.text]
            while (self.toks[j].kind is T.OP and self.toks[j].text == "."
                   and self.toks[j + 1].kind is T.IDENT):
                parts.append(self.toks[j + 1].text)
                j += 2
            if j > self.i and self.toks[j].kind is T.OP and self.toks[j].text == "{" \
                    and not (self.toks[j - 2].kind is T.OP and self.toks[j - 2].text == ".?"):
                self.i = j - 1
                name_tok = Token(T.IDENT, ".".join(parts), t.pos)
                self.i += 1
                return self.struct_literal(name_tok)
        return ast.Ident(t.pos, t.text)

    def args(self, close: str) -> tuple[ast.Node, ...]:
        out: list[ast.Node] = []
        if self.accept(close):
            return ()
        while True:
            out.append(self.expr())
            if self.accept(close):
                return tuple(out)
            self.expect(",")

    def list_literal(self, pos: int) -> ast.Node:
        elements: list[ast.Node] = []
        optional: set[int] = set()
        while not self.at("]"):
            if self.accept("?"):
                optional.add(len(elements))
            elements.append(self.expr())
            if not self.accept(","):
                break
        self.expect("]")
        return ast.CreateList(pos, tuple(elements), frozenset(optional))

    def map_literal(self, pos: int) -> ast.Node:
        entries: list[ast.MapEntry] = []
        while not self.at("}"):
            optional = self.accept("?")
            key = self.expr()
            self.expect(":")
            value = self.expr()
            entries.append(ast.MapEntry(key, value, optional))
            if not self.accept(","):
                break
        self.expect("}")
        return ast.CreateMap(pos, tuple(entries))

    def struct_literal(self, name: Token) -> ast.Node:
        self.expect("{")
        fields: list[tuple[str, ast.Node, bool]] = []
        while not self.at("}"):
            optional = self.accept("?")
            f = self.tok
            if f.kind is not T.IDENT:
                raise SyntaxErrorAt(f.pos, f"mismatched input '{f.text}' expecting IDENTIFIER")
            self.i += 1
            self.expect(":")
            fields.append((f.text, self.expr(), optional))
            if not self.accept(","):
                break
        self.expect("}")
        return ast.CreateStruct(name.pos, name.text, tuple(fields))

    # -- macros ---------------------------------------------------------------------------

    def global_call(self, pos: int, name: str, args: tuple[ast.Node, ...]) -> ast.Node:
        if name == "has" and len(args) == 1:
            arg = args[0]
            if isinstance(arg, ast.Select) and not arg.test_only and not arg.optional:
                return ast.Select(arg.pos, arg.operand, arg.field, test_only=True)
            raise SyntaxErrorAt(arg.pos, "invalid argument to has() macro")
        return ast.Call(pos, name, args)

    def receiver_call(self, pos: int, target: ast.Node, name: str,
                      args: tuple[ast.Node, ...]) -> ast.Node:
        kind = _MACROS.get((name, len(args)))
        if kind is None:
            return ast.Call(pos, name, args, target)
        two_vars = (name in ("all", "exists", "existsOne", "exists_one") and len(args) == 3) \
            or name.startswith("transform")
        var = _simple_name(args[0])
        if two_vars:
            var2 = _simple_name(args[1])
            if var == var2:
                raise SyntaxErrorAt(args[1].pos, f"duplicate variable name: {var}")
            rest = args[2:]
        else:
            var2 = None
            rest = args[1:]
        guard = rest[0] if len(rest) == 2 else None
        step = rest[-1]
        return ast.Comprehension(pos, kind, var, target, step, var2=var2, guard=guard)


_MACROS: Final = {
    ("all", 2): ast.Kind.ALL, ("all", 3): ast.Kind.ALL,
    ("exists", 2): ast.Kind.EXISTS, ("exists", 3): ast.Kind.EXISTS,
    ("exists_one", 2): ast.Kind.EXISTS_ONE, ("exists_one", 3): ast.Kind.EXISTS_ONE,
    ("existsOne", 2): ast.Kind.EXISTS_ONE, ("existsOne", 3): ast.Kind.EXISTS_ONE,
    ("map", 2): ast.Kind.MAP, ("map", 3): ast.Kind.MAP,
    ("filter", 2): ast.Kind.FILTER,
    ("transformList", 3): ast.Kind.TRANSFORM_LIST, ("transformList", 4): ast.Kind.TRANSFORM_LIST,
    ("transformMap", 3): ast.Kind.TRANSFORM_MAP, ("transformMap", 4): ast.Kind.TRANSFORM_MAP,
    ("transformMapEntry", 3): ast.Kind.TRANSFORM_MAP_ENTRY,
    ("transformMapEntry", 4): ast.Kind.TRANSFORM_MAP_ENTRY,
    ("optMap", 2): ast.Kind.OPT_MAP,
    ("optFlatMap", 2): ast.Kind.OPT_FLAT_MAP,
    ("sortBy", 2): ast.Kind.SORT_BY,
}


def _simple_name(node: ast.Node) -> str:
    if not isinstance(node, ast.Ident):
        raise SyntaxErrorAt(node.pos, "argument must be a simple name")
    if node.name == "__result__":
        raise SyntaxErrorAt(node.pos, "iteration variable overwrites accumulator variable")
    return node.name


def _balance(function: str, terms: list[ast.Node], positions: list[int]) -> ast.Node:
    if len(terms) == 1:
        return terms[0]
    mid = len(terms) // 2
    left = _balance(function, terms[:mid], positions[:mid - 1])
    right = _balance(function, terms[mid:], positions[mid:])
    return ast.Call(positions[mid - 1], function, (left, right))


def _check_tree(root: ast.Node) -> None:
    """Reject un-negated 2**63 (only ``-9223372036854775808`` is a literal) and trees deeper
    than :data:`MAX_DEPTH` (long left-leaning chains such as ``a + b + c + ...``)."""
    stack: list[tuple[ast.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > 2 * MAX_DEPTH:
            raise SyntaxErrorAt(node.pos, "expression recursion limit exceeded")
        if isinstance(node, ast.Literal) and type(node.value) is int and node.value > INT64_MAX:
            raise SyntaxErrorAt(node.pos, "invalid int literal")
        stack.extend((c, depth + 1) for c in ast.children(node))
