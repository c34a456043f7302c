"""Schema rewriting: v2 -> v3 references, ToStructuralOpenAPIV2, Unfold, default pruning."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.server.openapi import schemas

META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

V3_CASES: list[tuple[str, Any, Any]] = [
    ("bare reference stays bare",
     {"$ref": f"#/definitions/{META}"},
     {"$ref": f"#/components/schemas/{META}"}),
    ("reference with a description is wrapped in allOf",
     {"$ref": f"#/definitions/{META}", "description": "meta"},
     {"allOf": [{"$ref": f"#/components/schemas/{META}"}], "description": "meta"}),
    ("nested in properties, items and additionalProperties",
     {"type": "object", "properties": {
         "a": {"type": "array", "items": {"$ref": "#/definitions/X", "description": "x"}},
         "m": {"type": "object", "additionalProperties": {"$ref": "#/definitions/Y"}}}},
     {"type": "object", "properties": {
         "a": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/X"}],
                                          "description": "x"}},
         "m": {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Y"}}}}),
    ("a property named $ref is a name, not a reference",
     {"properties": {"$ref": {"type": "string"}}},
     {"properties": {"$ref": {"type": "string"}}}),
    ("data is not rewritten",
     {"type": "string", "enum": [{"$ref": "#/definitions/X"}], "default": {"$ref": "x"}},
     {"type": "string", "enum": [{"$ref": "#/definitions/X"}], "default": {"$ref": "x"}}),
]


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in V3_CASES],
                         ids=[c[0] for c in V3_CASES])
def test_to_v3(schema: Any, expected: Any) -> None:
    assert schemas.to_v3(schema) == expected


def test_references_follow_schemas_only() -> None:
    schema = {"properties": {"$ref": {"type": "string"},
                             "a": {"$ref": "#/definitions/A"},
                             "b": {"items": {"allOf": [{"$ref": "#/definitions/B"}]}}},
              "enum": [{"$ref": "#/definitions/NotThis"}]}
    assert sorted(schemas.references(schema)) == ["A", "B"]


V2_CASES: list[tuple[str, Any, Any]] = [
    ("junctors are dropped",
     {"type": "object", "anyOf": [{"required": ["a"]}], "allOf": [{}], "oneOf": [{}],
      "not": {}, "properties": {"a": {"type": "string"}}},
     {"type": "object", "properties": {"a": {"type": "string"}}}),
    ("nullable loses type, items and properties; it is not required",
     {"type": "object", "required": ["n", "s"], "properties": {
         "n": {"type": "object", "nullable": True, "properties": {"x": {"type": "string"}}},
         "s": {"type": "string"}}},
     {"type": "object", "required": ["s"], "properties": {"n": {}, "s": {"type": "string"}}}),
    ("preserving unknown fields drops properties and the object type",
     {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
      "properties": {"a": {"type": "string"}}},
     {"x-kubernetes-preserve-unknown-fields": True}),
    ("an array without items loses its type",
     {"type": "array", "x-kubernetes-preserve-unknown-fields": True,
      "items": {"type": "string"}},
     {"x-kubernetes-preserve-unknown-fields": True}),
    ("a nullable map value empties required",
     {"type": "object", "required": ["a"],
      "additionalProperties": {"type": "string", "nullable": True}},
     {"type": "object", "additionalProperties": {}}),
    ("int-or-string, validations, list types and formats are kept",
     {"x-kubernetes-int-or-string": True, "pattern": "^a", "maxLength": 3,
      "x-kubernetes-validations": [{"rule": "self.size() > 0"}], "nullable": False},
     {"x-kubernetes-int-or-string": True, "pattern": "^a", "maxLength": 3,
      "x-kubernetes-validations": [{"rule": "self.size() > 0"}]}),
]


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in V2_CASES],
                         ids=[c[0] for c in V2_CASES])
def test_structural_v2(schema: Any, expected: Any) -> None:
    assert schemas.structural_v2(schema) == expected


def test_structural_v2_does_not_touch_its_input() -> None:
    schema = {"type": "object", "nullable": True, "properties": {"a": {"type": "string"}}}
    snapshot = repr(schema)
    schemas.structural_v2(schema)
    assert repr(schema) == snapshot


UNFOLD_CASES: list[tuple[str, Any, Any]] = [
    ("int-or-string gains anyOf",
     {"x-kubernetes-int-or-string": True},
     {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ("an existing anyOf pattern is kept",
     {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
     {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ("another anyOf moves the pattern into allOf",
     {"x-kubernetes-int-or-string": True, "anyOf": [{"pattern": "a"}]},
     {"x-kubernetes-int-or-string": True, "anyOf": [{"pattern": "a"}],
      "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]}),
    ("nested",
     {"type": "object", "properties": {"q": {"x-kubernetes-int-or-string": True}}},
     {"type": "object", "properties": {"q": {
         "x-kubernetes-int-or-string": True,
         "anyOf": [{"type": "integer"}, {"type": "string"}]}}}),
]


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in UNFOLD_CASES],
                         ids=[c[0] for c in UNFOLD_CASES])
def test_unfold(schema: Any, expected: Any) -> None:
    assert schemas.unfold(schema) == expected


def test_without_defaults() -> None:
    schema = {"type": "object", "default": {}, "properties": {
        "a": {"type": "string", "default": "x"}, "default": {"type": "integer"}}}
    assert schemas.without_defaults(schema) == {
        "type": "object", "properties": {"a": {"type": "string"},
                                         "default": {"type": "integer"}}}
