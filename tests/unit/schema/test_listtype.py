"""``x-kubernetes-list-type`` set/map uniqueness (cases after apiextensions'
``listtype/validation_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery.fields import ErrorType
from setpoint.schema import CompiledSchema

from ._util import errors_of, obj_schema, update_errors_of


def set_of(items: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "array", "x-kubernetes-list-type": "set", "items": items or {}}


def map_of(*keys: str, **props: Any) -> dict[str, Any]:
    return {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": list(keys),
            "items": {"type": "object",
                      "properties": props or {k: {"type": "string"} for k in keys}}}


CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    ("list without list-type", obj_schema(array={"type": "array"}), {"array": ["a", "b", "a"]}, []),
    ("atomic list", obj_schema(array={"type": "array", "x-kubernetes-list-type": "atomic"}),
     {"array": ["a", "a"]}, []),
    ("set with one item", obj_schema(array=set_of()), {"array": ["a"]}, []),
    ("set with two equal items", obj_schema(array=set_of()), {"array": ["a", "a"]},
     ['array[1]: Duplicate value: "a"']),
    ("set with two different items", obj_schema(array=set_of()), {"array": ["a", "b"]}, []),
    ("set with multiple duplicates", obj_schema(array=set_of()),
     {"array": ["a", "a", "b", "c", "d", "c"]},
     ['array[1]: Duplicate value: "a"', 'array[5]: Duplicate value: "c"']),
    ("set reports a value once", obj_schema(array=set_of()), {"array": ["a", "a", "a"]},
     ['array[1]: Duplicate value: "a"']),
    ("set tells 1 and 1.0 apart", obj_schema(array=set_of()), {"array": [1, 1.0]}, []),
    ("set of objects compares JSON", obj_schema(array=set_of({"type": "object",
                                                              "x-kubernetes-map-type": "atomic"})),
     {"array": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}, ['array[1]: Duplicate value: "object"']),
    ("set of objects: 1 and 1.0 encode alike", obj_schema(array=set_of()),
     {"array": [[1], [1.0]]}, ['array[1]: Duplicate value: "array"']),
    ("map with one key", obj_schema(array=map_of("k")),
     {"array": [{"k": "a", "v": 1}, {"k": "b"}, {"k": "a", "v": 2}]},
     ['array[2]: Duplicate value: "object"']),
    ("map with unspecified keys", obj_schema(array=map_of("k")),
     {"array": [{"v": 1}, {"v": 2}, None]},
     ['array[1]: Duplicate value: "object"',
      'array[2]: Invalid value: "null": array[2] in body must be of type object: "null"']),
    ("map with two keys", obj_schema(array=map_of("k1", "k2")),
     {"array": [{"k1": "a", "k2": "b"}, {"k1": "a", "k2": "c"}, {"k1": "a", "k2": "b"}]},
     ['array[2]: Duplicate value: "object"']),
    ("map with non-object item", obj_schema(array=map_of("k")), {"array": [{"k": "a"}, 5]},
     ["array[1]: Invalid value: 5: must be an object for an array of list-type map",
      'array[1]: Invalid value: "integer": array[1] in body must be of type object: "integer"']),
    ("nested in map values", obj_schema(m={"type": "object", "additionalProperties": set_of()}),
     {"m": {"x": [1, 1]}}, ["m[x][1]: Duplicate value: 1"]),
    ("nested in list items", obj_schema(l={"type": "array", "items": {
        "type": "object", "properties": {"s": set_of()}}}),
     {"l": [{"s": ["x"]}, {"s": ["y", "y"]}]}, ['l[1].s[1]: Duplicate value: "y"']),
    ("set of sets", obj_schema(l={"type": "array", "x-kubernetes-list-type": "set",
                                   "items": set_of()}),
     {"l": [[1, 1], [2]]}, ["l[0][1]: Duplicate value: 1"]),
]


@pytest.mark.parametrize(("schema", "obj", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_list_types(schema: dict[str, Any], obj: Any, expected: list[str]) -> None:
    assert sorted(errors_of(schema, obj)) == sorted(expected)


def test_set_with_nulls() -> None:
    errs = CompiledSchema.from_openapi(obj_schema(array=set_of())).validate({"array": [None, None]})
    assert [(e.type, e.field, e.value) for e in errs] == [(ErrorType.DUPLICATE, "array[1]", None)]


def test_duplicates_in_old_object_are_tolerated_on_update() -> None:
    schema = obj_schema(array=set_of())
    old = {"array": ["a", "a"]}
    assert update_errors_of(schema, {"array": ["a", "a", "b"]}, old) == []
    assert update_errors_of(schema, {"array": ["b", "b"]}, {"array": ["b"]}) == [
        'array[1]: Duplicate value: "b"']
