"""The gnostic protobuf form, read back with a plain wire-format reader.

Field numbers are those of gnostic's ``openapiv2/OpenAPIv2.proto``; kubectl's own decoding of
what the server sends is tested in tests/compat/kubectl/test_openapi.py.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from setpoint.server.openapi import gnostic


def fields(buf: bytes) -> list[tuple[int, Any]]:
    """(number, value) of each field; LEN values are bytes, FIXED64 values are floats."""
    out: list[tuple[int, Any]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = buf[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while pos < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, varint()))
        elif wire == 1:
            out.append((number, struct.unpack("<d", buf[pos:pos + 8])[0]))
            pos += 8
        elif wire == 2:
            size = varint()
            out.append((number, buf[pos:pos + size]))
            pos += size
        else:
            raise AssertionError(f"unexpected wire type {wire}")
    assert pos == len(buf)
    return out


def one(buf: bytes, number: int) -> Any:
    found = [v for n, v in fields(buf) if n == number]
    assert len(found) == 1, (number, found)
    return found[0]


def every(buf: bytes, number: int) -> list[Any]:
    return [v for n, v in fields(buf) if n == number]


SCHEMA = {
    "description": "A thing.", "type": "object", "required": ["spec"],
    "properties": {
        "spec": {"$ref": "#/definitions/Spec", "description": "ignored next to a ref"},
        "count": {"type": "integer", "format": "int32", "minimum": -3, "maximum": 2.5,
                  "maxLength": 7},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "closed": {"type": "object", "additionalProperties": False},
        "tags": {"type": "array", "items": {"type": "string"},
                 "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
        "color": {"type": "string", "enum": ["red", "blue"], "nullable": True},
    },
    "x-kubernetes-group-version-kind": [{"group": "example.com", "kind": "Thing",
                                         "version": "v1"}],
}


def test_a_document_has_swagger_info_paths_definitions_and_parameters() -> None:
    doc = {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.32.0"},
           "paths": {"/apis/example.com/v1/things": {"get": {
               "operationId": "listThing", "x-kubernetes-action": "list",
               "parameters": [{"$ref": "#/parameters/limit-1"}],
               "responses": {"200": {"description": "OK",
                                     "schema": {"$ref": "#/definitions/Thing"}}}}}},
           "definitions": {"Thing": SCHEMA, "Spec": {"type": "object"}},
           "parameters": {"limit-1": {"in": "query", "name": "limit", "type": "integer",
                                      "uniqueItems": True}}}
    encoded = gnostic.encode(doc)
    assert one(encoded, 1) == b"2.0"
    info = one(encoded, 2)
    assert one(info, 1) == b"Kubernetes"
    assert one(info, 2) == b"v1.32.0"

    (path_entry,) = every(one(encoded, 8), 2)
    assert one(path_entry, 1) == b"/apis/example.com/v1/things"
    get = one(one(path_entry, 2), 2)
    assert one(get, 5) == b"listThing"
    (param_item,) = every(get, 8)
    assert one(one(param_item, 2), 1) == b"#/parameters/limit-1"  # a JsonReference
    (response,) = every(one(get, 9), 1)
    assert one(response, 1) == b"200"
    ok = one(one(response, 2), 1)
    assert one(ok, 1) == b"OK"
    assert one(one(one(ok, 2), 1), 1) == b"#/definitions/Thing"
    (extension,) = every(get, 13)
    assert one(extension, 1) == b"x-kubernetes-action"
    assert one(one(extension, 2), 2) == b'"list"\n'

    names = [one(entry, 1) for entry in every(one(encoded, 9), 1)]
    assert names == [b"Spec", b"Thing"]  # in key order

    (parameter,) = every(one(encoded, 10), 1)
    assert one(parameter, 1) == b"limit-1"
    query = one(one(one(parameter, 2), 2), 3)  # Parameter.non_body -> query sub-schema
    assert one(query, 2) == b"query"
    assert one(query, 4) == b"limit"
    assert one(query, 6) == b"integer"
    assert one(query, 20) == 1


def schema_of(name: str, schema: dict[str, Any]) -> bytes:
    entry = gnostic.named_schema(name, schema)
    assert one(entry, 1) == name.encode()
    return one(entry, 2)  # type: ignore[no-any-return]


def property_of(encoded: bytes, name: str) -> bytes:
    for entry in every(one(encoded, 25), 1):
        if one(entry, 1) == name.encode():
            return one(entry, 2)  # type: ignore[no-any-return]
    raise AssertionError(f"no property {name}")


def test_schema_members() -> None:
    encoded = schema_of("Thing", SCHEMA)
    assert one(encoded, 4) == b"A thing."
    assert one(one(encoded, 22), 1) == b"object"  # TypeItem
    assert every(encoded, 19) == [b"spec"]
    (gvk,) = every(encoded, 31)
    assert one(gvk, 1) == b"x-kubernetes-group-version-kind"
    assert orjson.loads(one(one(gvk, 2), 2)) == SCHEMA["x-kubernetes-group-version-kind"]

    spec = property_of(encoded, "spec")
    assert one(spec, 1) == b"#/definitions/Spec"

    count = property_of(encoded, "count")
    assert one(count, 2) == b"int32"
    assert one(count, 7) == 2.5  # maximum: a double
    assert one(count, 9) == -3.0  # minimum
    assert one(count, 11) == 7  # maxLength: a varint

    labels = property_of(encoded, "labels")
    assert one(one(one(labels, 21), 1), 22) == one(property_of(encoded, "color"), 22)
    closed = one(property_of(encoded, "closed"), 21)
    assert fields(closed) == [(2, 0)]  # the boolean branch, false, is still written

    tags = property_of(encoded, "tags")
    (item,) = every(one(tags, 23), 1)  # ItemsItem holds a list of schemas
    assert one(one(item, 22), 1) == b"string"
    assert sorted(one(e, 1) for e in every(tags, 31)) == [
        b"x-kubernetes-list-type", b"x-kubernetes-patch-strategy"]

    color = property_of(encoded, "color")
    assert [orjson.loads(one(v, 2)) for v in every(color, 20)] == ["red", "blue"]
    assert not every(color, 31)  # nullable is not a v2 member and has no field


def test_zero_values_and_wrong_types_are_left_out() -> None:
    encoded = schema_of("S", {"minimum": 0, "maxLength": "7", "uniqueItems": False,
                              "required": "not-a-list", "description": "",
                              "maxItems": 2 ** 70, "items": "nope"})
    assert fields(encoded) == []


def test_negative_integers_take_ten_bytes() -> None:
    encoded = schema_of("S", {"minLength": -1})
    (value,) = every(encoded, 12)
    assert value == (1 << 64) - 1


def test_body_and_path_parameters() -> None:
    item = {"parameters": [{"in": "path", "name": "name", "required": True, "type": "string"}],
            "patch": {"parameters": [{"in": "body", "name": "body", "required": True,
                                      "schema": {"$ref": "#/definitions/Patch"}}],
                      "consumes": ["application/merge-patch+json"]}}
    entry = gnostic.named_path_item("/x/{name}", item)
    path_item = one(entry, 2)
    (param,) = every(path_item, 9)
    path_param = one(one(one(param, 1), 2), 4)  # ParametersItem -> Parameter -> non-body -> path
    assert one(path_param, 1) == 1
    assert one(path_param, 4) == b"name"
    patch = one(path_item, 8)
    assert every(patch, 7) == [b"application/merge-patch+json"]
    body = one(one(one(patch, 8), 1), 1)  # ParametersItem -> Parameter -> BodyParameter
    assert one(body, 2) == b"body"
    assert one(body, 4) == 1
    assert one(one(body, 5), 1) == b"#/definitions/Patch"
