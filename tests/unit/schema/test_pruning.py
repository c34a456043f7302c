"""Pruning: apiextensions' ``pruning.PruneWithOptions`` cases (``pruning/algorithm_test.go``),
plus the embedded-metadata coercion Kubernetes' decoder applies right after."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from setpoint.schema import CompiledSchema, pruning
from setpoint.schema.structural import parse

T_OBJ = {"type": "object"}

NESTED_PRESERVE_SCHEMA = {
    "type": "object", "x-kubernetes-preserve-unknown-fields": True,
    "properties": {
        "alpha": {"type": "string"},
        "beta": {"type": "number"},
        "pruning": {"type": "object", "properties": {
            "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "pruning": T_OBJ}},
        "preserving": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                       "properties": {
                           "preserving": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True},
                           "preservingUnknownType": {"x-kubernetes-preserve-unknown-fields": True},
                           "pruning": T_OBJ}},
        "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "additionalProperties": {"type": "object",
                                     "properties": {"specified": T_OBJ}}},
        "preservingAdditionalPropertiesKeyPruneValues": {
            "type": "object",
            "additionalProperties": {"type": "object",
                                     "properties": {"specified": T_OBJ}}},
    },
}
NESTED_PRESERVE_IN = {
    "unspecified": "bar", "alpha": "abc", "beta": 42.0,
    "unspecifiedObject": {"unspecified": "bar"},
    "pruning": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                "pruning": {"unspecified": "bar"}, "apiVersion": "unknown",
                "preserving": {"unspecified": "bar"}},
    "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                   "pruning": {"unspecified": "bar"}, "preserving": {"unspecified": "bar"},
                   "preservingUnknownType": [{"foo": True}, {"bar": True}]},
    "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
        "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
    "preservingAdditionalPropertiesKeyPruneValues": {
        "foo": {"specified": {"unspecified": "bar"}, "unspecified": "bar"}},
}
NESTED_PRESERVE_OUT = {
    "unspecified": "bar", "alpha": "abc", "beta": 42.0,
    "unspecifiedObject": {"unspecified": "bar"},
    "pruning": {"pruning": {}, "preserving": {"unspecified": "bar"}},
    "preserving": {"unspecified": "bar", "unspecifiedObject": {"unspecified": "bar"},
                   "pruning": {}, "preserving": {"unspecified": "bar"},
                   "preservingUnknownType": [{"foo": True}, {"bar": True}]},
    "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields": {
        "foo": {"specified": {}}},
    "preservingAdditionalPropertiesKeyPruneValues": {"foo": {"specified": {}}},
}
NESTED_PRESERVE_PRUNED = [
    "preserving.pruning.unspecified",
    "preservingAdditionalPropertiesKeyPruneValues.foo.specified.unspecified",
    "preservingAdditionalPropertiesKeyPruneValues.foo.unspecified",
    "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.specified.unspecified",
    "preservingAdditionalPropertiesNotInheritingXPreserveUnknownFields.foo.unspecified",
    "pruning.apiVersion", "pruning.pruning.unspecified", "pruning.unspecified",
    "pruning.unspecifiedObject",
]


def _embedded(name: str) -> dict[str, Any]:
    return {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
            "metadata": {"name": name, "unspecified": "bar"}, "spec": {"unspecified": "bar"}}


EMBEDDED_SCHEMA = {
    "type": "object",
    "properties": {
        "pruned": {"type": "object", "x-kubernetes-embedded-resource": True,
                   "properties": {"spec": T_OBJ}},
        "preserving": {"type": "object", "x-kubernetes-embedded-resource": True,
                       "x-kubernetes-preserve-unknown-fields": True},
        "nested": {"type": "object", "x-kubernetes-embedded-resource": True, "properties": {
            "spec": {"type": "object", "properties": {
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": T_OBJ}}}}}},
    },
}
EMBEDDED_IN = {
    "apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance", "unspecified": "bar"},
    "unspecified": "bar",
    "pruned": _embedded("instance"),
    "preserving": _embedded("instance"),
    "nested": {**_embedded("instance"),
               "spec": {"unspecified": "bar", "embedded": _embedded("instance")}},
}
# Kubernetes' decoder coerces embedded ObjectMeta after pruning: unknown metadata fields go.
EMBEDDED_OUT = {
    "pruned": {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
               "spec": {}},
    "preserving": {"apiVersion": "foo/v1", "kind": "Foo", "unspecified": "bar",
                   "metadata": {"name": "instance"}, "spec": {"unspecified": "bar"}},
    "nested": {"apiVersion": "foo/v1", "kind": "Foo", "metadata": {"name": "instance"},
               "spec": {"embedded": {"apiVersion": "foo/v1", "kind": "Foo",
                                     "metadata": {"name": "instance"}, "spec": {}}}},
}
EMBEDDED_PRUNED = [
    "nested.metadata.unspecified", "nested.spec.embedded.metadata.unspecified",
    "nested.spec.embedded.spec.unspecified", "nested.spec.embedded.unspecified",
    "nested.spec.unspecified", "nested.unspecified", "preserving.metadata.unspecified",
    "pruned.metadata.unspecified", "pruned.spec.unspecified", "pruned.unspecified", "unspecified",
]

# (name, value, schema (None = no schema), resource root, expected value, expected paths)
CASES: list[tuple[str, Any, Any, bool, Any, list[str]]] = [
    ("empty", None, None, False, None, []),
    ("scalar", 4, {}, False, 4, []),
    ("scalar array", [1, 2], {"items": {}}, False, [1, 2], []),
    ("object array", [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}],
     {"items": {"properties": {"a": {}, "c": {}}}}, False,
     [{"a": 1}, {}, {"a": 1, "c": 3}], ["[1].b", "[2].b"]),
    ("object array with nil schema", [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], None, False,
     [{}, {}, {}], ["[0].a", "[1].b", "[2].a", "[2].b", "[2].c"]),
    ("object array object",
     {"array": [{"a": 1}, {"b": 1}, {"a": 1, "b": 2, "c": 3}], "unspecified": {"a": 1},
      "specified": {"a": 1, "b": 2, "c": 3}},
     {"properties": {"array": {"items": {"properties": {"a": {}, "c": {}}}},
                     "specified": {"properties": {"a": {}, "c": {}}}}}, False,
     {"array": [{"a": 1}, {}, {"a": 1, "c": 3}], "specified": {"a": 1, "c": 3}},
     ["array[1].b", "array[2].b", "specified.b", "unspecified"]),
    ("nested x-kubernetes-preserve-unknown-fields", NESTED_PRESERVE_IN, NESTED_PRESERVE_SCHEMA,
     False, NESTED_PRESERVE_OUT, NESTED_PRESERVE_PRUNED),
    ("additionalProperties with schema", {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1}}},
     {"properties": {"a": {}, "c": {"additionalProperties": {"type": "integer"}}}}, False,
     {"a": 1, "c": {"a": 1, "b": 2, "c": {}}}, ["b", "c.c.a"]),
    ("additionalProperties with bool",
     {"a": 1, "b": 1, "c": {"a": 1, "b": 2, "c": {"a": 1, "apiVersion": "unknown"}}},
     {"properties": {"a": {}, "c": {"additionalProperties": False}}}, False,
     {"a": 1, "c": {"a": 1, "b": 2, "c": {}}}, ["b", "c.c.a", "c.c.apiVersion"]),
    ("meta fields at a non-resource root go silently",
     {"apiVersion": "v1", "kind": "K", "metadata": {}, "x": 1}, {"type": "object"}, False,
     {}, ["x"]),
    ("x-kubernetes-embedded-resource", EMBEDDED_IN, EMBEDDED_SCHEMA, False,
     EMBEDDED_OUT, EMBEDDED_PRUNED),
    ("resource root keeps meta", {"apiVersion": "v1", "kind": "K",
                                  "metadata": {"name": "n", "unknown": 1}, "x": 1},
     {"type": "object"}, True,
     {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "unknown": 1}}, ["x"]),
    ("preserving list items are kept but their properties pruned",
     {"l": [{"keep": 1, "p": {"drop": 1}}]},
     {"properties": {"l": {"x-kubernetes-preserve-unknown-fields": True, "items": {
         "properties": {"p": {"type": "object"}}}}}}, False,
     {"l": [{"keep": 1, "p": {}}]}, ["l[0].p.drop"]),
    ("junctors are not used for pruning",
     {"a": {"x": 1}}, {"properties": {"a": {"type": "object",
                                            "allOf": [{"properties": {"x": {}}}]}}}, False,
     {"a": {}}, ["a.x"]),
    ("map keys are joined with dots", {"m": {"k.1": {"x": 1}}},
     {"properties": {"m": {"additionalProperties": {"type": "object"}}}}, False,
     {"m": {"k.1": {}}}, ["m.k.1.x"]),
]


@pytest.mark.parametrize(("value", "schema", "root", "expected", "paths"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_prune(value: Any, schema: Any, root: bool, expected: Any, paths: list[str]) -> None:
    value = copy.deepcopy(value)
    node = parse(schema) if schema is not None else None
    assert pruning.prune(value, node, resource_root=root) == paths
    assert value == expected


API_CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = [
    ("status pruned when undeclared",
     {"type": "object", "properties": {"spec": {"type": "object"}}},
     {"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {"a": 1},
      "status": {"kopf": {"progress": {}}}},
     {"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "x"}, "spec": {}},
     ["spec.a", "status"]),
    ("root preserve keeps everything unknown",
     {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
      "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}},
     {"apiVersion": "a/v1", "kind": "K", "spec": {"a": "x", "b": 1}, "other": {"x": 1}},
     {"apiVersion": "a/v1", "kind": "K", "spec": {"a": "x"}, "other": {"x": 1}},
     ["spec.b"]),
    ("list items", {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "items": {"type": "array", "items": {"type": "object",
                                             "properties": {"name": {"type": "string"}}}}}}}},
     {"spec": {"items": [{"name": "a", "bar": 1}, "scalar", {"bar": 2}]}},
     {"spec": {"items": [{"name": "a"}, "scalar", {}]}},
     ["spec.items[0].bar", "spec.items[2].bar"]),
    ("root metadata untouched", {"type": "object"},
     {"metadata": {"name": "a", "whatever": {"x": 1}}},
     {"metadata": {"name": "a", "whatever": {"x": 1}}}, []),
]


@pytest.mark.parametrize(("schema", "obj", "expected", "paths"), [c[1:] for c in API_CASES],
                         ids=[c[0] for c in API_CASES])
def test_compiled_prune(schema: dict[str, Any], obj: dict[str, Any], expected: dict[str, Any],
                        paths: list[str]) -> None:
    compiled = CompiledSchema.from_openapi(schema)
    obj = copy.deepcopy(obj)
    assert compiled.prune(obj) == paths
    assert obj == expected
    assert compiled.prune(obj) == []  # pruning is idempotent


def test_no_schema_keeps_everything() -> None:
    compiled = CompiledSchema.from_openapi(None)
    obj = {"spec": {"anything": [1, {"x": 2}]}}
    assert compiled.prune(obj) == []
    assert obj == {"spec": {"anything": [1, {"x": 2}]}}
    assert compiled.preserves_unknown_fields
    assert compiled.validate(obj) == []
