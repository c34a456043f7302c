"""Message construction (``Type{...}``) for the types a library declares."""

from __future__ import annotations

import pytest

from setpoint.cel import checker, interpreter, parser
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError
from setpoint.cel.functions import Library
from setpoint.cel.library import KUBERNETES
from setpoint.cel.objects import StructValue, type_of
from setpoint.cel.structs import StructType, to_json

_FIELDS = {"op": t.STRING, "path": t.STRING, "value": t.DYN}
PATCH = StructType(t.object_type("Patch", _FIELDS), _FIELDS)
OPEN = StructType(t.object_type("Open", {}))
LIB = KUBERNETES | Library({}, lambda name: {"Patch": PATCH, "Open": OPEN}.get(name))


def run(source: str, library: Library = LIB) -> object:
    tree = parser.parse(source)
    _ty, issues = checker.check(tree, library, {})
    assert not issues, issues
    return interpreter.plan(tree, library, []).evaluate(interpreter.Activation({}, 10_000))


def issues(source: str, library: Library = LIB) -> list[str]:
    return [i.message for i in checker.check(parser.parse(source), library, {})[1]]


def test_a_declared_struct_is_built_with_its_type_name() -> None:
    value = run('Patch{op: "add", path: "/a", value: {"b": [1, dyn(2u)]}}')
    assert isinstance(value, StructValue)
    assert type_of(value).name == "Patch"
    assert to_json(value) == {"op": "add", "path": "/a", "value": {"b": [1, 2]}}


def test_fields_are_type_checked_and_unknown_ones_refused() -> None:
    assert issues("Patch{op: 1}") == [
        "expected type of field 'op' is 'string' but provided type is 'int'"]
    assert issues("Patch{nope: 1}") == ["undefined field 'nope'"]
    assert issues('Patch{op: "a", op: "b"}') == ["field 'op' is set twice"]


def test_an_open_struct_takes_any_field_and_optional_fields_may_be_absent() -> None:
    assert to_json(run("Open{a: 1, ?b: optional.none(), ?c: optional.of(2)}")) == \
        {"a": 1, "c": 2}


def test_without_a_provider_construction_is_an_undeclared_reference() -> None:
    assert issues("Patch{}", KUBERNETES) == ["undeclared reference to 'Patch' (in container '')"]


def test_selecting_a_field_of_a_built_struct() -> None:
    assert run('Patch{op: "x"}.op') == "x"
    assert run('has(Patch{op: "x"}.path)') is False


def test_to_json_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(EvalError):
        to_json({1: "a"})
    with pytest.raises(EvalError):
        to_json(float("nan"))
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    with pytest.raises(EvalError):
        to_json(deep)
