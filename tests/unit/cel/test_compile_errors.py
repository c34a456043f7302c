"""Compile-time errors: syntax (the parser) and types (the checker), worded as cel-go words them.

Expected texts are the issue lines Kubernetes shows for a CRD whose rule does not compile
(``ERROR: <input>:line:column: message``, then the source line and a caret).
"""

from __future__ import annotations

import pytest

from setpoint.cel import types as t
from setpoint.cel.parser import MAX_DEPTH, MAX_SOURCE

from ._util import compile_error

OBJ = t.object_type("object", {
    "name": t.STRING, "replicas": t.INT, "ratio": t.DOUBLE, "tags": t.list_of(t.STRING),
    "labels": t.map_of(t.STRING, t.STRING),
    "spec": t.object_type("object", {"size": t.INT}),
})

SYNTAX: list[tuple[str, str, str]] = [
    ("unterminated call", "self.foo(",
     "ERROR: <input>:1:10: Syntax error: mismatched input '<EOF>' expecting an expression"),
    ("dangling operator", "self.replicas +",
     "ERROR: <input>:1:16: Syntax error: mismatched input '<EOF>' expecting an expression"),
    ("unterminated string", "self.name == 'x",
     "ERROR: <input>:1:14: Syntax error: token recognition error at: ''x'"),
    ("reserved word", "if", "ERROR: <input>:1:1: Syntax error: reserved identifier: if"),
    ("int literal out of range", "9223372036854775808 > 0",
     "ERROR: <input>:1:1: Syntax error: invalid int literal"),
    ("bad escape", "'\\q' == ''", "ERROR: <input>:1:2: Syntax error: invalid escape sequence"),
    ("extra tokens", "1 2", "ERROR: <input>:1:3: Syntax error: mismatched input '2' expecting "
                            "<EOF>"),
    ("has needs a field selection", "has(self)",
     "ERROR: <input>:1:5: invalid argument to has() macro"),
    ("macro variable must be a name", "self.tags.all(1, true)",
     "ERROR: <input>:1:15: argument must be a simple name"),
    ("duplicate macro variables", "self.labels.all(k, k, true)",
     "ERROR: <input>:1:20: duplicate variable name: k"),
    ("second line positions", "true &&\n  self.foo(",
     "ERROR: <input>:2:12: Syntax error: mismatched input '<EOF>'"),
    ("nesting limit", "(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1),
     "expression recursion limit exceeded"),
    ("long chains", " + ".join(["1"] * (2 * MAX_DEPTH + 1)), "expression recursion limit exceeded"),
    ("source size limit", "'" + "a" * MAX_SOURCE + "'", "expression code point size exceeds limit"),
]

TYPES: list[tuple[str, str, str]] = [
    ("undeclared variable", "foo == 1",
     "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')"),
    ("undeclared function", "self.name.frob()",
     "ERROR: <input>:1:15: undeclared reference to 'frob' (in container '')"),
    ("undefined field", "self.nope > 1", "ERROR: <input>:1:5: undefined field 'nope'"),
    ("undefined nested field", "self.spec.nope > 1", "ERROR: <input>:1:10: undefined field 'nope'"),
    ("no field selection on int", "self.replicas.x == 1",
     "ERROR: <input>:1:14: type 'int' does not support field selection"),
    ("mixed comparison", "self.replicas == 'a'",
     "ERROR: <input>:1:15: found no matching overload for '_==_' applied to '(int, string)'"),
    ("int and double need a conversion", "self.replicas == self.ratio",
     "found no matching overload for '_==_' applied to '(int, double)'"),
    ("member call signature", "self.name.startsWith(1)",
     "found no matching overload for 'startsWith' applied to 'string.(int)'"),
    ("logical operands", "self.replicas && true",
     "found no matching overload for '_&&_' applied to '(int, bool)'"),
    ("macro predicate must be bool", "self.tags.all(x, x)",
     "found no matching overload for '_&&_' applied to '(bool, string)'"),
    ("not a comprehension range", "self.replicas.all(x, true)",
     "expression of type 'int' cannot be range of a comprehension (must be list, map, or "
     "dynamic)"),
    ("mixed list literal", "[1, 'a'].size() == 2", "ERROR: <input>:1:5: expected type 'int' but "
                                                   "found 'string'"),
    ("mixed map literal", "{'a': 1, 'b': true}.size() == 2",
     "expected type 'int' but found 'bool'"),
    ("format lists may mix", "'%s %d'.format(['a', 1]) == 'a 1'", ""),
    ("invalid duration literal", "duration('1d') > duration('1h')",
     "ERROR: <input>:1:10: invalid duration argument"),
    ("invalid timestamp literal", "timestamp('yesterday') < timestamp('2023-01-01T00:00:00Z')",
     "invalid timestamp argument"),
    ("invalid regex literal", "self.name.matches('[')", "invalid matches argument"),
    ("unknown message type", "Foo{a: 1} == null", "undeclared reference to 'Foo'"),
    ("struct fields are typed", "self.spec.size + 1 == 2", ""),
    ("map values are typed", "self.labels.app.startsWith('a')", ""),
    ("list elements are typed", "self.tags[0] + 1 == 2",
     "found no matching overload for '_+_' applied to '(string, int)'"),
    ("dyn escapes the checker", "dyn(self.replicas) == 'a'", ""),
    ("numeric comparisons cross types", "self.replicas < self.ratio", ""),
    ("index with uint", "self.tags[0u] == 'a'", ""),
    ("type names are values", "type(self.name) == string", ""),
    ("qualified functions", "optional.of(1).hasValue() && sets.contains([1], [1])", ""),
    ("optional fields are optional", "self.?spec.?size.orValue(1) > 0", ""),
    ("optional values need unwrapping", "self.?name == 'a'",
     "found no matching overload for '_==_' applied to '(optional_type(string), string)'"),
]


def _ids(cases: list[tuple[str, str, str]]) -> list[str]:
    return [c[0] for c in cases]


@pytest.mark.parametrize(("expr", "want"), [(e, w) for _, e, w in SYNTAX], ids=_ids(SYNTAX))
def test_syntax_errors(expr: str, want: str) -> None:
    got = compile_error(expr, self=OBJ)
    assert want in got, got


@pytest.mark.parametrize(("expr", "want"), [(e, w) for _, e, w in TYPES], ids=_ids(TYPES))
def test_type_errors(expr: str, want: str) -> None:
    got = compile_error(expr, self=OBJ)
    if want:
        assert want in got, got
    else:
        assert got == ""


def test_issue_shows_the_line_and_a_caret() -> None:
    got = compile_error("self.nope > 1", self=OBJ)
    assert got == ("compilation failed: ERROR: <input>:1:5: undefined field 'nope'\n"
                   " | self.nope > 1\n"
                   " | ....^")


def test_every_issue_is_reported() -> None:
    got = compile_error("self.a + self.b == 1", self=OBJ)
    assert got.count("undefined field") == 2
