"""CRDValidationRatcheting (after apiextensions' ``validation/ratcheting_test.go``): unchanged,
correlatable parts that were already invalid do not fail an update."""

from __future__ import annotations

from typing import Any

import pytest

from ._util import errors_of, obj_schema, update_errors_of

SMALL = {"type": "number", "maximum": 50}
MEDIUM = {"type": "number", "minimum": 50, "maximum": 10000}
OBJECT = obj_schema(small=SMALL, medium=MEDIUM)
OBJECT_OBJECT = obj_schema(nested=OBJECT)
LIST_MAP = obj_schema(items={
    "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
    "items": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "size": SMALL}}})
ATOMIC_LIST = obj_schema(items={"type": "array", "items": SMALL})

CASES: list[tuple[str, dict[str, Any], Any, Any, list[str]]] = [
    ("scalar unchanged", obj_schema(v=MEDIUM), {"v": 1}, {"v": 1}, []),
    ("scalar changed", obj_schema(v=MEDIUM), {"v": 1}, {"v": 2},
     ["v: Invalid value: 1: v in body should be greater than or equal to 50"]),
    ("unchanged invalid field, other field changed", OBJECT,
     {"small": 501}, {"small": 501, "medium": 500}, []),
    ("changed to another invalid value", OBJECT, {"small": 500}, {"small": 501},
     ["small: Invalid value: 500: small in body should be less than or equal to 50"]),
    ("nested unchanged", OBJECT_OBJECT, {"nested": {"small": 501}},
     {"nested": {"small": 501, "medium": 500}}, []),
    ("nested changed", OBJECT_OBJECT, {"nested": {"small": 500}}, {"nested": {"small": 501}},
     ["nested.small: Invalid value: 500: nested.small in body should be less than or equal to 50"]),
    ("int and float are not equal", obj_schema(v=MEDIUM), {"v": 1}, {"v": 1.0},
     ["v: Invalid value: 1: v in body should be greater than or equal to 50"]),
    ("new field is validated", OBJECT, {"small": 100}, {},
     ["small: Invalid value: 100: small in body should be less than or equal to 50"]),
    ("required ratchets with its parent",
     obj_schema(o={"type": "object", "required": ["a"], "properties": {"b": {"type": "integer"}}}),
     {"o": {"b": 1}}, {"o": {"b": 1}}, []),
    ("an undeclared field makes the parent uncorrelatable",
     obj_schema(o={"type": "object", "required": ["a"]}), {"o": {"b": 1}}, {"o": {"b": 1}},
     ["o.a: Required value"]),
    ("required fails once the parent changes",
     obj_schema(o={"type": "object", "required": ["a"], "properties": {"b": {"type": "integer"}}}),
     {"o": {"b": 2}}, {"o": {"b": 1}}, ["o.a: Required value"]),
    ("list-map items correlate by key", LIST_MAP,
     {"items": [{"name": "new", "size": 1}, {"name": "a", "size": 100}]},
     {"items": [{"name": "a", "size": 100}]}, []),
    ("list-map item changed", LIST_MAP,
     {"items": [{"name": "a", "size": 101}]}, {"items": [{"name": "a", "size": 100}]},
     ["items[0].size: Invalid value: 101: items[0].size in body should be less than or equal to "
      "50"]),
    ("atomic list unchanged", ATOMIC_LIST, {"items": [100, 1]}, {"items": [100, 1]}, []),
    ("atomic list changed elsewhere", ATOMIC_LIST, {"items": [100, 2]}, {"items": [100, 1]},
     ["items[0]: Invalid value: 100: items[0] in body should be less than or equal to 50"]),
    ("unknown fields make a node uncorrelatable",
     obj_schema(spec={"type": "object", "maxProperties": 1,
                      "x-kubernetes-preserve-unknown-fields": True}),
     {"spec": {"a": 1, "b": 2}}, {"spec": {"a": 1, "b": 2}},
     ["spec: Too many: 2: must have at most 1 items"]),
    ("declared fields ratchet",
     obj_schema(spec={"type": "object", "maxProperties": 1,
                      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}),
     {"spec": {"a": 1, "b": 2}}, {"spec": {"a": 1, "b": 2}}, []),
    ("root kind is never ratcheted", obj_schema(kind={"type": "string", "enum": ["Good"]}),
     {"kind": "Bad", "spec": 1}, {"kind": "Bad", "spec": 2},
     ['kind: Unsupported value: "Bad": supported values: "Good"']),
    ("map values correlate by key",
     obj_schema(m={"type": "object", "additionalProperties": SMALL}),
     {"m": {"a": 100, "b": 1}}, {"m": {"a": 100}}, []),
    ("map value changed",
     obj_schema(m={"type": "object", "additionalProperties": SMALL}),
     {"m": {"a": 101}}, {"m": {"a": 100}},
     ["m.a: Invalid value: 101: m.a in body should be less than or equal to 50"]),
]


@pytest.mark.parametrize(("schema", "new", "old", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_ratcheting(schema: dict[str, Any], new: Any, old: Any, expected: list[str]) -> None:
    assert sorted(update_errors_of(schema, new, old)) == sorted(expected)


def test_whole_object_unchanged_reports_nothing() -> None:
    obj = {"small": 500, "medium": 1}
    assert errors_of(OBJECT, obj) != []
    assert update_errors_of(OBJECT, obj, dict(obj)) == []


def test_missing_old_object_validates_fully() -> None:
    assert update_errors_of(OBJECT, {"small": 500}, None) == errors_of(OBJECT, {"small": 500})
