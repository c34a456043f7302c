"""Runtime cost: cel-go's units as Kubernetes measures them, and the guards that bound one call.

The expected costs are those of apiextensions-apiserver's ``celcoststability_test.go`` for the
same schemas, objects and rules.
"""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.cel import types as t
from setpoint.cel.errors import CostLimitExceeded
from setpoint.cel.interpreter import Activation
from setpoint.cel.values import decl_type, to_cel
from setpoint.schema.structural import parse

from ._util import compile_expr, cost_of, evaluate

_STRING = {"type": "string"}


def _props(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


STABILITY: list[tuple[dict[str, Any], Any, dict[str, int]]] = [
    # map access
    (
        _props(val={"type": "object", "additionalProperties": {"type": "integer"}}),
        {"val": {"b": 1, "d": 2}},
        {
            "!('a' in self.val)": 4,
            "'b' in self.val": 3,
            "!has(self.val.a)": 3,
            "has(self.val.b)": 2,
            "self.val.all(k, self.val[k] > 0)": 17,
            "!self.val.exists(k, self.val[k] == 3)": 20,
            "self.val.exists_one(k, self.val[k] == 2)": 14,
            "!self.val.exists_one(k, self.val[k] > 0)": 17,
            "size(self.val) == 2": 4,
            "size(self.val.filter(k, self.val[k] > 1)) == 1": 26,
            "self.val.all(k, v, v > 0)": 13,
            "!self.val.exists(k, v, v == 3)": 16,
            "self.val.existsOne(k, v, v == 2)": 10,
            "self.val.transformMap(k, v, v > 1, v + 1).size() == 1": 14,
            "self.val.transformMap(k, v, v + 1).size() == 2": 15,
            "self.val.transformMapEntry(k, v, v > 1, {k + '2': v + 1}).size() == 1": 45,
            "self.val.transformMapEntry(k, v, {k + '2': v + 1}).size() == 2": 77,
        },
    ),
    # listMap access
    (
        _props(listMap={"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["k"],
                        "items": _props(k=_STRING, v=_STRING, v2=_STRING)}),
        {"listMap": [{"k": "a1", "v": "b1"}, {"k": "a2", "v": "b2"},
                     {"k": "a3", "v": "b3", "v2": "z"}]},
        {
            "has(self.listMap[0].v)": 3,
            "self.listMap.all(m, m.k.startsWith('a'))": 21,
            "self.listMap.all(m, !has(m.v2) || m.v2 == 'z')": 21,
            "self.listMap.exists(m, m.k.endsWith('1'))": 13,
            "self.listMap.exists_one(m, m.k == 'a3')": 15,
            "!self.listMap.all(m, m.k.endsWith('1'))": 18,
            "!self.listMap.exists(m, m.v == 'x')": 25,
            "!self.listMap.exists_one(m, m.k.startsWith('a'))": 20,
            "size(self.listMap.filter(m, m.k == 'a1')) == 1": 27,
            "self.listMap.exists(m, m.k == 'a1' && m.v == 'b1')": 16,
            "self.listMap.map(m, m.v).exists(v, v == 'b1')": 55,
            "self.listMap.exists(m, has(m.v2) && m.v2 == 'z')": 21,
            "!self.listMap.all(m, has(m.v2) && m.v2 != 'z')": 10,
            "self.listMap.exists_one(m, has(m.v2) && m.v2 == 'z')": 12,
            "self.listMap.filter(m, has(m.v2) && m.v2 == 'z').size() == 1": 24,
            "self.listMap.map(m, has(m.v2) && m.v2 == 'z', m.v2).size() == 1": 25,
            "self.listMap.filter(m, has(m.v2) && m.v2 == 'z').map(m, m.v2).size() == 1": 39,
            "self.listMap.exists(m, m.v2 == 'z')": 24,
            "!self.listMap.all(m, m.v2 != 'z')": 22,
            "self.listMap.transformList(i, m, m.v).size() == 3": 47,
        },
    ),
    # list access
    (
        _props(array={"type": "array", "items": {"type": "integer"}}),
        {"array": [1, 1, 2, 2, 3, 3, 4, 5]},
        {
            "2 in self.array": 10,
            "self.array.all(e, e > 0)": 43,
            "self.array.exists(e, e > 2)": 36,
            "self.array.exists_one(e, e > 4)": 22,
            "!self.array.all(e, e < 2)": 21,
            "!self.array.exists(e, e < 0)": 52,
            "!self.array.exists_one(e, e == 2)": 25,
            "self.array.all(e, e < 100)": 43,
            "size(self.array.filter(e, e%2 == 0)) == 3": 68,
            "self.array.map(e, e * 20).filter(e, e > 50).exists(e, e == 60)": 194,
            "size(self.array) == 8": 4,
        },
    ),
    # unicode strings
    (
        _props(val1=_STRING, val2=_STRING),
        {"val1": "Rook takes 👑", "val2": "Rook takes 👑"},
        {
            "self.val1.startsWith('Rook')": 3,
            "!self.val1.startsWith('knight')": 4,
            "self.val1.matches('^[^0-9]*$')": 8,
            "type(self.val1) == string": 4,
            "size(self.val1) == 12": 4,
            "self.val1.charAt(3) == 'k'": 4,
            "self.val1.replace(' ', 'x') == 'Rookxtakesx👑'": 7,
            "self.val1.split(' ') == ['Rook', 'takes', '👑']": 6,
            "self.val1.substring(5) == 'takes 👑'": 5,
            "self.val1.substring(4, 10).trim() == 'takes'": 6,
            "self.val1.upperAscii() == 'ROOK TAKES 👑'": 6,
            "self.val1.lowerAscii() == self.val1.lowerAscii()": 10,
            "'%o %o %o'.format([7, 8, 9]) == '7 10 11'": 2,
        },
    ),
]

def _stability_cases() -> list[tuple[str, dict[str, Any], Any, str, int]]:
    return [(expr, schema, obj, expr, cost) for schema, obj, table in STABILITY
            for expr, cost in table.items()]


@pytest.mark.parametrize(("schema", "obj", "expr", "want"),
                         [c[1:] for c in _stability_cases()],
                         ids=[c[0] for c in _stability_cases()])
def test_cost_matches_kubernetes(schema: dict[str, Any], obj: Any, expr: str, want: int) -> None:
    node = parse(schema)
    program = compile_expr(expr, self=decl_type(node) or t.DYN)
    activation = Activation({"self": to_cel(obj, node)}, 10**6)
    assert program.evaluate(activation) is True
    assert activation.cost == want


@pytest.mark.parametrize(("expr", "want"), [
    ("1 < 2", 1),
    ("x", 1),
    ("[1, 2, 3]", 0),
    ("[x, 2]", 11),
    ("{'a': x}", 31),
    ("'abc' + 'def'", 1),
    ("'' == ''", 0),
], ids=["comparison", "variable", "constant list", "list literal", "map literal",
        "short concat", "empty strings compare for free"])
def test_unit_costs(expr: str, want: int) -> None:
    assert cost_of(expr, x=1) == want


def test_long_strings_cost_by_length() -> None:
    assert cost_of("x + x", x="a" * 1000) == 2 + 200


def test_list_concatenation_costs_by_result_size() -> None:
    assert cost_of("x + x", x=list(range(1000))) == 2 + 200


@pytest.mark.parametrize("expr", [
    "lists.range(2000000).size() > 0",
    "x.replace('a', x) != ''",
    "lists.range(100).map(i, x).join('') != ''",
    "lists.range(1000).map(i, lists.range(1000)).flatten().size() > 0",
    "lists.range(2000).all(i, lists.range(2000).all(j, i + j >= 0))",
], ids=["huge range", "quadratic replace", "join of copies", "flatten of copies",
        "nested loops"])
def test_one_call_cannot_run_away(expr: str) -> None:
    # the estimate refuses it before it runs, or the running cost stops it part way
    with pytest.raises(CostLimitExceeded):
        evaluate(expr, x="a" * 200_000)


def test_regexes_run_in_linear_time() -> None:
    # exponential for a backtracking matcher: 2^5000 ways to split the a's; RE2 reads it once
    assert evaluate("x.matches('^(a+)+$')", x="a" * 5000 + "b") is False
    assert evaluate("x.find('(a+)+b')", x="a" * 5000 + "b") == "a" * 5000 + "b"
    assert evaluate("x.findAll('(a|aa)+c')", x="a" * 5000) == []
