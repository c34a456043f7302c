"""CRD-time schema checks (after apiextensions' ``pkg/apis/apiextensions/validation`` and
``pkg/apiserver/schema/validation_test.go``)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery.fields import FieldPath
from setpoint.schema import check_structural

P = "spec.validation.openAPIV3Schema"
STR = {"type": "string"}
OBJ = {"type": "object"}
INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]


def root(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


CASES: list[tuple[str, Any, list[str]]] = [
    ("valid", root(spec={"type": "object", "properties": {"a": STR}}), []),
    ("missing type of a field", root(spec={"properties": {"a": STR}}),
     [f"{P}.properties[spec].type: Required value: must not be empty for specified object fields"]),
    ("missing type of items",
     root(l={"type": "array", "items": {"properties": {"a": STR}}}),
     [f"{P}.properties[l].items.type: Required value: must not be empty for specified array "
      "items"]),
    ("missing type at the root", {"properties": {"a": STR}},
     [f"{P}.type: Required value: must not be empty at the root"]),
    ("root must be an object", {"type": "string"},
     [f'{P}.type: Invalid value: "string": must be object at the root']),
    ("array without items", root(l={"type": "array"}),
     [f"{P}.properties[l].items: Required value: must be specified"]),
    ("typeless allowed with preserve-unknown-fields",
     root(x={"x-kubernetes-preserve-unknown-fields": True}), []),
    ("typeless allowed with int-or-string", root(x={"x-kubernetes-int-or-string": True}), []),
    ("int-or-string anyOf pattern", root(x={"x-kubernetes-int-or-string": True,
                                            "anyOf": INT_OR_STRING_ANY_OF}), []),
    ("int-or-string allOf pattern", root(x={"x-kubernetes-int-or-string": True, "allOf": [
        {"anyOf": INT_OR_STRING_ANY_OF}, {"maxLength": 3}]}), []),
    ("type in other junctors", root(x={"type": "string", "anyOf": [{"type": "string"}]}),
     [f"{P}.properties[x].anyOf[0].type: Forbidden: must be empty to be structural"]),
    ("int-or-string misuse",
     root(x={"x-kubernetes-int-or-string": True, "x-kubernetes-preserve-unknown-fields": True}),
     [f"{P}.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be "
      "false if x-kubernetes-int-or-string is true"]),
    ("junctor generics and extensions", root(x={"type": "object", "properties": {"a": STR},
                                                "allOf": [{"description": "d", "nullable": True,
                                                           "default": {}, "title": "t",
                                                           "x-kubernetes-list-type": "set",
                                                           "additionalProperties": True}]}),
     [f"{P}.properties[x].allOf[0].additionalProperties: Forbidden: must be undefined to be "
      "structural",
      f"{P}.properties[x].allOf[0].default: Forbidden: must be undefined to be structural",
      f"{P}.properties[x].allOf[0].description: Forbidden: must be empty to be structural",
      f"{P}.properties[x].allOf[0].nullable: Forbidden: must be false to be structural",
      f"{P}.properties[x].allOf[0].title: Forbidden: must be empty to be structural",
      f"{P}.properties[x].allOf[0].type: Required value: must be array if x-kubernetes-list-type "
      "is specified",
      f"{P}.properties[x].allOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be "
      "structural"]),
    ("additionalProperties false inside a junctor is fine",
     root(x={"type": "object", "not": {"additionalProperties": False}}), []),
    ("junctor may not mention metadata", {"type": "object", "properties": {"metadata": OBJ},
                                          "anyOf": [{"properties": {"metadata": {}}}]},
     [f"{P}.anyOf[0].properties[metadata]: Forbidden: must not be specified in a nested context"]),
    ("junctor fields must be declared (root level)",
     {"type": "object", "properties": {"foo": STR},
      "allOf": [{"properties": {"foo": {"minLength": 1}, "notfoo": {"minLength": 1}}}]},
     [f"{P}.properties[notfoo]: Required value: because it is defined in "
      f"{P}.allOf[0].properties[notfoo]"]),
    ("junctor items must be declared",
     {"type": "object", "allOf": [{"items": {"minLength": 1}}]},
     [f"{P}.items: Required value: because it is defined in {P}.allOf[0].items"]),
    ("metadata restricted to name and generateName",
     root(metadata={"type": "object", "properties": {"labels": OBJ}}),
     [f"{P}.properties[metadata]: Forbidden: must not specify anything other than name and "
      "generateName, but metadata is implicitly specified"]),
    ("metadata name may be restricted",
     root(metadata={"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                                     "generateName": STR}}), []),
    ("metadata must be an object", root(metadata={"type": "string"}),
     [f'{P}.properties[metadata].type: Invalid value: "string": must be object']),
    ("kind must be a string", root(kind={"type": "integer"}),
     [f'{P}.properties[kind].type: Invalid value: "integer": must be string']),
    ("additionalProperties at the root", {"type": "object", "additionalProperties": STR},
     [f"{P}.additionalProperties: Forbidden: must not be used at the root"]),
    ("properties with additionalProperties",
     root(foo={"type": "object", "properties": {"bar": OBJ}, "additionalProperties": False}),
     [f"{P}.properties[foo].additionalProperties: Forbidden: additionalProperties and properties "
      "are mutual exclusive"]),
    ("additionalProperties without properties", root(m={"type": "object",
                                                        "additionalProperties": STR}), []),
    ("embedded resource additionalProperties",
     root(embedded1={"type": "object", "x-kubernetes-embedded-resource": True,
                     "additionalProperties": STR}),
     [f"{P}.properties[embedded1].additionalProperties: Forbidden: must not be used if "
      "x-kubernetes-embedded-resource is set",
      f"{P}.properties[embedded1].properties: Required value: must not be empty if "
      "x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"]),
    ("embedded resource must be an object",
     root(e={"type": "array", "items": OBJ, "x-kubernetes-embedded-resource": True,
             "x-kubernetes-preserve-unknown-fields": True}),
     [f'{P}.properties[e].type: Invalid value: "array": must be object if '
      "x-kubernetes-embedded-resource is true"]),
    ("embedded resource inside resource meta",
     root(metadata={"type": "object", "properties": {"name": {
         "type": "object", "x-kubernetes-embedded-resource": True,
         "x-kubernetes-preserve-unknown-fields": True}}}),
     [f"{P}.properties[metadata].properties[name].x-kubernetes-embedded-resource: Forbidden: must "
      "not be used inside of resource meta"]),
    ("uniqueItems", root(l={"type": "array", "items": STR, "uniqueItems": True}),
     [f"{P}.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the "
      "runtime complexity becomes quadratic"]),
    ("preserve-unknown-fields false", root(x={"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": False}),
     [f"{P}.properties[x].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be "
      "true or undefined"]),
    ("null type", root(x={"type": "null"}),
     [f"{P}.properties[x].type: Forbidden: type cannot be set to null, use nullable as an "
      "alternative",
      f'{P}.properties[x].type: Unsupported value: "null": supported values: "array", "boolean", '
      '"integer", "number", "object", "string"']),
    ("nullable at the root", {"type": "object", "nullable": True},
     [f"{P}.nullable: Forbidden: nullable cannot be true at the root"]),
    ("pattern must be RE2", root(s={"type": "string", "pattern": "^(?=a)"}),
     [f'{P}.properties[s].pattern: Invalid value: "^(?=a)": must be a valid regular expression, '
      "but isn't: error parsing regexp: invalid or unsupported Perl syntax: `(?=`"]),
    ("backreference", root(s={"type": "string", "pattern": "(a)\\1"}),
     [f'{P}.properties[s].pattern: Invalid value: "(a)\\\\1": must be a valid regular expression, '
      "but isn't: error parsing regexp: invalid escape sequence: `\\1`"]),
    # --- forbidden keywords --------------------------------------------------------------------
    ("$ref", root(x={"type": "object", "$ref": "#/definitions/x"}),
     [f"{P}.properties[x].$ref: Forbidden: $ref is not supported"]),
    ("definitions", {"type": "object", "definitions": {"x": OBJ}},
     [f"{P}.definitions: Forbidden: definitions is not supported"]),
    ("patternProperties", root(x={"type": "object", "patternProperties": {"^a": STR}}),
     [f"{P}.properties[x].patternProperties: Forbidden: patternProperties is not supported"]),
    ("dependencies", root(x={"type": "object", "dependencies": {"a": ["b"]}}),
     [f"{P}.properties[x].dependencies: Forbidden: dependencies is not supported"]),
    ("id", root(x={"type": "object", "id": "x"}),
     [f"{P}.properties[x].id: Forbidden: id is not supported"]),
    ("items array", root(x={"type": "array", "items": [STR]}),
     [f"{P}.properties[x].items: Forbidden: items must be a schema object and not an array"]),
    ("additionalItems", root(x={"type": "array", "items": STR, "additionalItems": False}),
     [f"{P}.properties[x].additionalItems: Forbidden: additionalItems is not supported"]),
    ("$schema alone fails NewStructural", {"type": "object", "$schema": "x"},
     [f"{P}: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"]),
    ("keywords Kubernetes does not know",
     root(x={"type": "string", "xml": {}, "readOnly": True, "writeOnly": True,
             "deprecated": True, "discriminator": "k"}),
     [f"{P}.properties[x].deprecated: Forbidden: deprecated is not supported",
      f"{P}.properties[x].discriminator: Forbidden: discriminator is not supported",
      f"{P}.properties[x].readOnly: Forbidden: readOnly is not supported",
      f"{P}.properties[x].writeOnly: Forbidden: writeOnly is not supported",
      f"{P}.properties[x].xml: Forbidden: xml is not supported"]),
    ("malformed keyword", root(x={"type": "string", "maxLength": "10"}),
     [f'{P}.properties[x].maxLength: Invalid value: "10": must be an integer']),
    # --- list and map types --------------------------------------------------------------------
    ("list-type on a non-array", root(x={"type": "object", "x-kubernetes-list-type": "set"}),
     [f'{P}.properties[x].type: Invalid value: "object": must be array if '
      "x-kubernetes-list-type is specified"]),
    ("unknown list-type", root(x={"type": "array", "items": STR, "x-kubernetes-list-type": "bag"}),
     [f'{P}.properties[x].x-kubernetes-list-type: Unsupported value: "bag": supported values: '
      '"atomic", "set", "map"']),
    ("map keys without map list", root(x={"type": "array", "items": OBJ,
                                          "x-kubernetes-list-map-keys": ["a"]}),
     [f"{P}.properties[x].x-kubernetes-list-type: Required value: must be map if "
      "x-kubernetes-list-map-keys is non-empty"]),
    ("map list without keys", root(x={"type": "array", "x-kubernetes-list-type": "map",
                                      "items": {"type": "object", "properties": {"a": STR}}}),
     [f"{P}.properties[x].x-kubernetes-list-map-keys: Required value: must not be empty if "
      "x-kubernetes-list-type is map"]),
    ("map list key not a property",
     root(x={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["b"],
             "items": {"type": "object", "properties": {"a": STR}}}),
     [f'{P}.properties[x].x-kubernetes-list-map-keys: Invalid value: "array": entries must all be '
      "names of item properties"]),
    ("map list key must be required or defaulted",
     root(x={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
             "items": {"type": "object", "properties": {"a": STR}}}),
     [f"{P}.properties[x].items.properties[a].default: Required value: this property is in "
      "x-kubernetes-list-map-keys, so it must have a default or be a required property"]),
    ("valid map list",
     root(x={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
             "items": {"type": "object", "required": ["a"], "properties": {"a": STR}}}), []),
    ("map list items must be objects",
     root(x={"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["a"],
             "items": STR}),
     [f'{P}.properties[x].items.type: Invalid value: "string": must be object if parent array\'s '
      "x-kubernetes-list-type is map"]),
    ("set items may not be nullable",
     root(x={"type": "array", "x-kubernetes-list-type": "set",
             "items": {"type": "string", "nullable": True}}),
     [f"{P}.properties[x].items.nullable: Forbidden: cannot be nullable when "
      "x-kubernetes-list-type is set"]),
    ("map-type on a non-object", root(x={"type": "string", "x-kubernetes-map-type": "atomic"}),
     [f'{P}.properties[x].type: Invalid value: "string": must be object if '
      "x-kubernetes-map-type is specified"]),
    ("unknown map-type", root(x={"type": "object", "x-kubernetes-map-type": "sparse"}),
     [f'{P}.properties[x].x-kubernetes-map-type: Unsupported value: "sparse": supported values: '
      '"atomic", "granular"']),
    # --- x-kubernetes-validations shape ---------------------------------------------------------
    ("validation rule without rule", root(x={"type": "string", "x-kubernetes-validations": [
        {"rule": " "}]}),
     [f"{P}.properties[x].x-kubernetes-validations[0].rule: Required value: rule is not "
      "specified"]),
    ("multi-line rule needs a message", root(x={"type": "string", "x-kubernetes-validations": [
        {"rule": "self.a\n== 1"}]}),
     [f"{P}.properties[x].x-kubernetes-validations[0].message: Required value: message must be "
      "specified if rule contains line breaks"]),
    ("unknown rule reason", root(x={"type": "string", "x-kubernetes-validations": [
        {"rule": "true", "reason": "Nope"}]}),
     [f'{P}.properties[x].x-kubernetes-validations[0].reason: Unsupported value: "Nope": '
      'supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
      '"FieldValueRequired"']),
    ("validations forbidden in junctors", root(x={"type": "string", "allOf": [
        {"x-kubernetes-validations": [{"rule": "true"}]}]}),
     [f"{P}.properties[x].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be "
      "structural"]),
    # --- defaults ------------------------------------------------------------------------------
    ("valid defaults", root(spec={"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1, "minimum": 0},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"}}}), []),
    ("default that does not validate",
     root(spec={"type": "object", "properties": {"replicas": {"type": "integer", "default": "x"}}}),
     [f'{P}.properties[spec].properties[replicas].default: Invalid value: "string":  in body must '
      'be of type integer: "string"']),
    ("defaults in top-level metadata", root(metadata={"type": "object", "default": {}}),
     [f"{P}.properties[metadata].default: Forbidden: must not be set in top-level metadata"]),
    ("defaults skipped when not structural",
     root(spec={"properties": {"a": {"type": "string", "default": 5}}}),
     [f"{P}.properties[spec].type: Required value: must not be empty for specified object fields"]),
    ("default inside additionalProperties under embedded metadata",
     root(e={"type": "object", "x-kubernetes-embedded-resource": True,
             "x-kubernetes-preserve-unknown-fields": True,
             "properties": {"metadata": {"type": "object", "properties": {"labels": {
                 "type": "object", "additionalProperties": {"type": "string",
                                                            "default": "x"}}}}}}),
     [f"{P}.properties[e].properties[metadata].properties[labels].additionalProperties.default: "
      "Forbidden: must not be set inside additionalProperties applying to object metadata"]),
]


@pytest.mark.parametrize(("schema", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check_structural(schema: Any, expected: list[str]) -> None:
    assert sorted(e.error() for e in check_structural(schema)) == sorted(expected)


def test_set_of_granular_maps() -> None:
    [err] = check_structural(root(x={"type": "array", "x-kubernetes-list-type": "set",
                                     "items": OBJ}))
    assert (err.field, err.value, err.detail) == (
        f"{P}.properties[x].items.x-kubernetes-map-type", None,
        "must be atomic as item of a list with x-kubernetes-list-type=set")


def test_upstream_invalid_defaults_case() -> None:
    """apiextensions' "invalid defaults with enabled feature gate, structural schema"."""
    foo = {"foo": STR}
    schema = root(
        a={"type": "object", "properties": foo, "default": {"foo": "abc", "bar": 42}},
        b={"type": "object", "properties": foo, "default": {"foo": "abc"}},
        c={"type": "object", "properties": foo, "default": {"foo": 42}},
        d={"type": "object", "properties": {"good": {"type": "string", "pattern": "a"},
                                             "bad": {"type": "string", "pattern": "b"}},
           "default": {"good": "a", "bad": "a"}},
        e={"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
            "preserveUnknownFields": {"type": "object", "default": {"foo": "abc", "bar": 42}},
            "nestedProperties": {"type": "object", "properties": foo,
                                 "default": {"foo": "abc", "bar": 42}}}},
        **{"embedded-fine": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": foo,
                             "default": {"foo": "abc", "apiVersion": "foo/v1", "kind": "v1",
                                         "metadata": {"name": "foo"}}},
           "embedded-preserve-unpruned-objectmeta": {
               "type": "object", "x-kubernetes-embedded-resource": True,
               "x-kubernetes-preserve-unknown-fields": True, "properties": foo,
               "default": {"foo": "abc", "apiVersion": "foo/v1", "kind": "v1",
                           "metadata": {"name": "foo", "unspecified": "bar"}, "bar": 42}}},
    )
    assert [e.error() for e in check_structural(schema)] == [
        f'{P}.properties[a].default: Invalid value: "object": must not have unknown fields',
        f'{P}.properties[c].default.foo: Invalid value: "integer": foo in body must be of type '
        'string: "integer"',
        f"{P}.properties[d].default.bad: Invalid value: \"a\": bad in body should match 'b'",
        f'{P}.properties[e].properties[nestedProperties].default: Invalid value: "object": must '
        "not have unknown fields",
        f'{P}.properties[e].properties[preserveUnknownFields].default: Invalid value: "object": '
        "must not have unknown fields",
    ]


def test_embedded_metadata_default_must_be_valid_metadata() -> None:
    schema = root(e={"type": "object", "x-kubernetes-embedded-resource": True,
                     "x-kubernetes-preserve-unknown-fields": True,
                     "properties": {"metadata": {"type": "object", "properties": {
                         "name": {"type": "string", "default": "a/b"}}}}})
    assert [e.error() for e in check_structural(schema)] == [
        f'{P}.properties[e].properties[metadata].properties[name].default: Invalid value: "a/b": '
        "must result in valid metadata: metadata.name: Invalid value: \"a/b\": may not contain "
        "'/'",
    ]


def test_status_subresource_restricts_the_root() -> None:
    ok = {"type": "object", "properties": {"status": OBJ}, "required": ["status"]}
    assert check_structural(ok, status_subresource=True) == []
    bad = {"type": "object", "properties": {"status": OBJ}, "enum": [{}]}
    [err] = check_structural(bad, status_subresource=True)
    assert err.field == P
    assert err.detail.startswith("only [Description Type Format Title Maximum")


def test_custom_path_and_non_dict_input() -> None:
    path = FieldPath.root("spec", "versions").index(0).child("schema").child("openAPIV3Schema")
    [err] = check_structural({"type": "string"}, path)
    assert err.field == "spec.versions[0].schema.openAPIV3Schema.type"
    assert [e.error() for e in check_structural("nope")] == [
        f'{P}: Invalid value: "nope": must be an object']


def test_check_does_not_mutate() -> None:
    schema = root(a={"type": "object", "properties": {"b": STR}, "default": {"b": "x", "c": 1}})
    before = repr(schema)
    check_structural(schema)
    assert repr(schema) == before
