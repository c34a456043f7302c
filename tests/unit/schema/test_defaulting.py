"""Null dropping and defaulting (cases after apiextensions' ``defaulting/algorithm_test.go`` and
``prunenulls_test.go``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from setpoint.schema import CompiledSchema, defaulting
from setpoint.schema.structural import parse

ABC = {"properties": {"a": {"default": "A"}, "b": {"default": "B"}, "c": {"default": "C"}}}

CASES: list[tuple[str, Any, Any, Any]] = [
    ("empty", None, None, None),
    ("scalar", 4, {"default": "foo"}, 4),
    ("scalar array", [1, 2], {"items": {"default": "foo"}}, [1, 2]),
    ("object array", [{"a": 1}, {"b": 1}, {"c": 1}], {"items": ABC},
     [{"a": 1, "b": "B", "c": "C"}, {"a": "A", "b": 1, "c": "C"}, {"a": "A", "b": "B", "c": 1}]),
    ("object array object",
     {"array": [{"a": 1}, {"b": 2}], "object": {"a": 1},
      "additionalProperties": {"x": {"a": 1}, "y": {"b": 2}}},
     {"properties": {
         "array": {"items": {"properties": {"a": {"default": "A"}, "b": {"default": "B"}}}},
         "object": {"properties": {"a": {"default": "N"}, "b": {"default": "O"}}},
         "additionalProperties": {"additionalProperties": {"properties": {
             "a": {"default": "alpha"}, "b": {"default": "beta"}}}},
         "foo": {"default": "bar"}}},
     {"array": [{"a": 1, "b": "B"}, {"a": "A", "b": 2}], "object": {"a": 1, "b": "O"},
      "additionalProperties": {"x": {"a": 1, "b": "beta"}, "y": {"a": "alpha", "b": 2}},
      "foo": "bar"}),
    ("empty and null", [{}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": None}, {"a": []},
                        {"a": {}}],
     {"items": {"properties": {"a": {"default": "A"}}}},
     [{"a": "A"}, {"a": 1}, {"a": 0}, {"a": 0.0}, {"a": ""}, {"a": "A"}, {"a": []}, {"a": {}}]),
    ("null in nullable list", [None],
     {"nullable": True, "items": {"properties": {"a": {"default": "A"}}}}, [None]),
    ("null in non-nullable list", [None], {"items": {"default": "A"}}, ["A"]),
    ("null in nullable object", {"a": None},
     {"properties": {"a": {"nullable": True, "default": "A"}}}, {"a": None}),
    ("null in non-nullable object", {"a": None}, {"properties": {"a": {"default": "A"}}},
     {"a": "A"}),
    ("null in nullable additionalProperties", {"a": None},
     {"additionalProperties": {"nullable": True, "default": "A"}}, {"a": None}),
    ("null in non-nullable additionalProperties", {"a": None},
     {"additionalProperties": {"default": "A"}}, {"a": "A"}),
    ("null without default is dropped", {"a": None, "b": None, "c": None},
     {"properties": {"a": {"type": "string"}, "b": {"type": "string", "nullable": True}}},
     {"b": None, "c": None}),
    ("null map value without default is dropped", {"x": None, "y": 1},
     {"additionalProperties": {"type": "integer"}}, {"y": 1}),
    ("null list item without default stays", [None, 1], {"items": {"type": "integer"}}, [None, 1]),
    ("nested defaults apply inside defaults", {},
     {"properties": {"spec": {"type": "object", "default": {},
                              "properties": {"replicas": {"default": 1}}}}},
     {"spec": {"replicas": 1}}),
    ("defaults only where the parent exists", {},
     {"properties": {"spec": {"type": "object", "properties": {"replicas": {"default": 1}}}}}, {}),
    ("null parent without default is dropped, not defaulted", {"spec": None},
     {"properties": {"spec": {"type": "object", "properties": {"replicas": {"default": 1}}}}}, {}),
    ("object default is copied", {"a": {}},
     {"properties": {"a": {"type": "object", "properties": {"b": {"default": {"c": [1]}}}}}},
     {"a": {"b": {"c": [1]}}}),
    ("null default is no default", {"a": None}, {"properties": {"a": {"default": None}}}, {}),
]


@pytest.mark.parametrize(("value", "schema", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_default(value: Any, schema: Any, expected: Any) -> None:
    value = copy.deepcopy(value)
    node = parse(schema) if schema is not None else None
    defaulting.compile_defaulter(node)(value)
    assert value == expected


def test_defaults_are_deep_copies() -> None:
    compiled = CompiledSchema.from_openapi({"type": "object", "properties": {
        "spec": {"type": "object", "default": {"tags": ["a"]},
                 "properties": {"tags": {"type": "array", "items": {"type": "string"}}}}}})
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    compiled.default(first)
    compiled.default(second)
    first["spec"]["tags"].append("b")
    assert second == {"spec": {"tags": ["a"]}}


def test_defaults_are_pruned_at_compile_time() -> None:
    compiled = CompiledSchema.from_openapi({"type": "object", "properties": {
        "spec": {"type": "object", "default": {"known": 1, "unknown": 2},
                 "properties": {"known": {"type": "integer"}}}}})
    obj: dict[str, Any] = {}
    compiled.default(obj)
    assert obj == {"spec": {"known": 1}}


def test_pipeline_order() -> None:
    """prune, then default: a default never re-introduces what pruning removed."""
    compiled = CompiledSchema.from_openapi({"type": "object", "properties": {"spec": {
        "type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "weight": {"type": "integer", "default": 10}}}}}}}})
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
           "spec": {"mode": None, "items": [{"name": "a", "junk": 1}, {"weight": None}]}}
    assert compiled.prune(obj) == ["spec.items[0].junk"]
    compiled.default(obj)
    assert obj["spec"] == {"replicas": 1, "mode": "a",
                           "items": [{"name": "a", "weight": 10}, {"weight": 10}]}
    assert compiled.validate(obj) == []
