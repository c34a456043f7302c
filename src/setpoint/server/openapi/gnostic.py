"""Swagger 2.0 documents as gnostic's ``openapi.v2.Document`` protobuf, the form kubectl reads.

client-go asks for ``/openapi/v2`` with ``Accept: application/com.github.proto-openapi.spec.v2
@v1.0+protobuf`` and unmarshals the body as that message (whatever the content type says), so
this is what ``kubectl apply`` (strategic-merge patch metadata, client-side validation of a
``kind: List``) and ``kubectl explain --output=plaintext-openapiv2`` see. The encoding follows
gnostic's JSON-to-message mapping (``openapiv2/OpenAPIv2.proto``):

* maps become repeated ``Named*`` entries, in key order (the JSON documents are key-sorted);
* ``type`` becomes a ``TypeItem`` list, ``items`` an ``ItemsItem`` list, ``additionalProperties``
  a schema-or-boolean ``oneof``; ``in: body`` parameters are ``BodyParameter``s, others the
  ``NonBodyParameter`` variant for their location;
* ``default``, ``example``, ``enum`` values and every ``x-`` extension become ``Any`` messages
  whose ``yaml`` field holds the value (written as JSON, which YAML readers accept);
* proto3 scalars equal to their zero value are not written (as Go's encoder does; ``minimum:
  0`` is therefore not distinguishable from an absent minimum, for Kubernetes too).

Invariants: encoding is total over JSON values: a member of the wrong JSON type (which no
validated schema has) is left out, never an exception. Members this mapping does not know are
left out, as gnostic's parser would refuse them. Non-guarantees: ``xml``, security and
response-header objects are not encoded (nothing the server publishes has them).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

__all__ = ["CONTENT_TYPE", "document", "encode", "named_parameter", "named_path_item",
           "named_schema"]

#: the content type Kubernetes answers with (for either spelling of the Accept header)
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
ACCEPTED = ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf", CONTENT_TYPE)

_VARINT, _FIXED64, _BYTES = 0, 1, 2

Encoder = Callable[[Any], bytes]


_SMALL = [bytes([i]) for i in range(0x80)]


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL[value]
    value &= (1 << 64) - 1  # negative int64 values take ten bytes, two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_KEYS = {(n, w): _varint(n << 3 | w) for n in range(1, 32) for w in (_VARINT, _FIXED64, _BYTES)}


def _key(number: int, wire: int) -> bytes:
    return _KEYS[number, wire]


def _len(number: int, payload: bytes) -> bytes:
    return b"".join((_KEYS[number, _BYTES], _varint(len(payload)), payload))


def _string(number: int, value: Any) -> bytes:
    if not isinstance(value, str) or not value:
        return b""
    return _len(number, value.encode("utf-8"))


def _strings(number: int, value: Any, *, single: bool = False) -> bytes:
    """A list of strings (``single``: a lone string is a list of one, as ``type`` allows)."""
    if single and isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return b""
    return b"".join(_len(number, v.encode("utf-8")) for v in value if isinstance(v, str))


def _bool(number: int, value: Any) -> bytes:
    return _key(number, _VARINT) + b"\x01" if value is True else b""


def _int64(number: int, value: Any) -> bytes:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value == 0:
        return b""
    if not -(1 << 63) <= value < 1 << 63:
        return b""
    return _key(number, _VARINT) + _varint(value)


def _double(number: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float) or value == 0:
        return b""
    try:
        return _key(number, _FIXED64) + struct.pack("<d", float(value))
    except OverflowError:
        return b""


def _any(value: Any) -> bytes:
    """An ``Any`` message with the value as its ``yaml`` text."""
    try:
        text = orjson.dumps(value)
    except TypeError:
        return b""
    return _len(2, text + b"\n")


def _any_field(number: int, value: Any) -> bytes:
    return _len(number, _any(value))


def _extensions(number: int, obj: Mapping[str, Any]) -> bytes:
    return b"".join(_len(number, _string(1, k) + _len(2, _any(v)))
                    for k, v in sorted(obj.items()) if k.startswith("x-"))


def _message(number: int, value: Any, encode: Encoder) -> bytes:
    if not isinstance(value, dict):
        return b""
    return _len(number, encode(value))


def _named(number: int, value: Any, encode: Encoder) -> bytes:
    """A map as repeated ``Named*`` entries ``{1 name, 2 value}``, by key."""
    if not isinstance(value, dict):
        return b""
    return b"".join(_len(number, _string(1, k) + _message(2, v, encode))
                    for k, v in sorted(value.items()))


# --- schemas ---------------------------------------------------------------------------------


def _additional(value: Any) -> bytes:
    if isinstance(value, bool):  # a oneof member: written even when false
        return _len(21, _KEYS[2, _VARINT] + (b"\x01" if value else b"\x00"))
    return _len(21, _len(1, _schema(value))) if isinstance(value, dict) else b""


def _items(value: Any) -> bytes:
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return b""
    return _len(23, b"".join(_message(1, i, _schema) for i in value))


def _enum(number: int) -> Encoder:
    def encode(value: Any) -> bytes:
        return b"".join(_any_field(number, v) for v in value) if isinstance(value, list) else b""
    return encode


def _types(value: Any) -> bytes:
    return (_len(22, _strings(1, value, single=True)) if isinstance(value, str | list)
            else b"")


def _schema_field(number: int, write: Callable[[int, Any], bytes]) -> Encoder:
    return lambda value: write(number, value)


# JSON member -> (field number, encoder of the value), in field-number order
_SCHEMA: dict[str, tuple[int, Encoder]] = {
    "$ref": (1, _schema_field(1, _string)), "format": (2, _schema_field(2, _string)),
    "title": (3, _schema_field(3, _string)), "description": (4, _schema_field(4, _string)),
    "default": (5, _schema_field(5, _any_field)),
    "multipleOf": (6, _schema_field(6, _double)), "maximum": (7, _schema_field(7, _double)),
    "exclusiveMaximum": (8, _schema_field(8, _bool)),
    "minimum": (9, _schema_field(9, _double)),
    "exclusiveMinimum": (10, _schema_field(10, _bool)),
    "maxLength": (11, _schema_field(11, _int64)), "minLength": (12, _schema_field(12, _int64)),
    "pattern": (13, _schema_field(13, _string)), "maxItems": (14, _schema_field(14, _int64)),
    "minItems": (15, _schema_field(15, _int64)), "uniqueItems": (16, _schema_field(16, _bool)),
    "maxProperties": (17, _schema_field(17, _int64)),
    "minProperties": (18, _schema_field(18, _int64)),
    "required": (19, _schema_field(19, _strings)), "enum": (20, _enum(20)),
    "additionalProperties": (21, _additional), "type": (22, _types), "items": (23, _items),
    "allOf": (24, lambda v: _repeated(24, v, _schema)),
    "properties": (25, lambda v: _message(25, v, lambda p: _named(1, p, _schema))),
    "discriminator": (26, _schema_field(26, _string)),
    "readOnly": (27, _schema_field(27, _bool)),
    "externalDocs": (29, lambda v: _message(29, v, _external_docs)),
    "example": (30, _schema_field(30, _any_field)),
}


def _schema(s: Mapping[str, Any]) -> bytes:
    parts: list[tuple[int, bytes]] = []
    extensions = False
    for key, value in s.items():
        field = _SCHEMA.get(key)
        if field is not None:
            parts.append((field[0], field[1](value)))
        elif key.startswith("x-"):
            extensions = True
    parts.sort(key=lambda p: p[0])
    encoded = b"".join(p[1] for p in parts)
    return encoded + _extensions(31, s) if extensions else encoded


def _external_docs(d: Mapping[str, Any]) -> bytes:
    return _string(1, d.get("description")) + _string(2, d.get("url")) + _extensions(3, d)


def named_schema(name: str, schema: Mapping[str, Any]) -> bytes:
    """One ``NamedSchema`` (a definitions entry), to be joined by :func:`document`."""
    return _string(1, name) + _len(2, _schema(schema))


# --- paths -----------------------------------------------------------------------------------

# the numbers of the fields shared by the non-body parameter messages, per location:
# (required, in, description, name, type, format, default, uniqueItems, enum, extensions)
_LOCATIONS = {
    "query": (3, (1, 2, 3, 4, 6, 7, 10, 20, 21, 23)),
    "path": (4, (1, 2, 3, 4, 5, 6, 9, 19, 20, 22)),
    "header": (1, (1, 2, 3, 4, 5, 6, 9, 19, 20, 22)),
    "formData": (2, (1, 2, 3, 4, 6, 7, 10, 20, 21, 23)),
}


def _parameter(p: Mapping[str, Any]) -> bytes:
    where = p.get("in")
    if where == "body":
        body = (_string(1, p.get("description")) + _string(2, p.get("name")) + _string(3, where)
                + _bool(4, p.get("required")) + _message(5, p.get("schema"), _schema)
                + _extensions(6, p))
        return _len(1, body)
    if where not in _LOCATIONS:
        return b""
    variant, (req, in_, desc, name, typ, fmt, default, unique, enum, ext) = _LOCATIONS[where]
    sub = [_bool(req, p.get("required")), _string(in_, where), _string(desc, p.get("description")),
           _string(name, p.get("name")), _string(typ, p.get("type")), _string(fmt, p.get("format"))]
    if "default" in p:
        sub.append(_any_field(default, p["default"]))
    sub.append(_bool(unique, p.get("uniqueItems")))
    if isinstance(p.get("enum"), list):
        sub.extend(_any_field(enum, v) for v in p["enum"])
    sub.append(_extensions(ext, p))
    return _len(2, _len(variant, b"".join(sub)))


def _parameters_item(p: Mapping[str, Any]) -> bytes:
    if "$ref" in p:
        return _len(2, _string(1, p.get("$ref")) + _string(2, p.get("description")))
    return _len(1, _parameter(p))


def _response(r: Mapping[str, Any]) -> bytes:
    schema = r.get("schema")
    return (_string(1, r.get("description"))
            + (_len(2, _len(1, _schema(schema))) if isinstance(schema, dict) else b"")
            + _extensions(5, r))


def _responses(rs: Mapping[str, Any]) -> bytes:
    return b"".join(_len(1, _string(1, code) + _len(2, _message(1, r, _response)))
                    for code, r in sorted(rs.items()) if not code.startswith("x-")) \
        + _extensions(2, rs)


def _repeated(number: int, value: Any, encode: Encoder) -> bytes:
    if not isinstance(value, list):
        return b""
    return b"".join(_message(number, v, encode) for v in value)


def _operation(o: Mapping[str, Any]) -> bytes:
    return b"".join((
        _strings(1, o.get("tags")), _string(2, o.get("summary")),
        _string(3, o.get("description")), _message(4, o.get("externalDocs"), _external_docs),
        _string(5, o.get("operationId")), _strings(6, o.get("produces")),
        _strings(7, o.get("consumes")), _repeated(8, o.get("parameters"), _parameters_item),
        _message(9, o.get("responses"), _responses), _strings(10, o.get("schemes")),
        _bool(11, o.get("deprecated")), _extensions(13, o),
    ))


_METHODS = (("get", 2), ("put", 3), ("post", 4), ("delete", 5), ("options", 6), ("head", 7),
            ("patch", 8))


def _path_item(item: Mapping[str, Any]) -> bytes:
    parts = [_string(1, item.get("$ref"))]
    parts += [_message(number, item.get(method), _operation) for method, number in _METHODS]
    parts += [_repeated(9, item.get("parameters"), _parameters_item), _extensions(10, item)]
    return b"".join(parts)


def named_path_item(path: str, item: Mapping[str, Any]) -> bytes:
    """One ``NamedPathItem`` (a paths entry), to be joined by :func:`document`."""
    return _string(1, path) + _len(2, _path_item(item))


# --- the document ----------------------------------------------------------------------------


def _info(i: Mapping[str, Any]) -> bytes:
    return (_string(1, i.get("title")) + _string(2, i.get("version"))
            + _string(3, i.get("description")) + _extensions(7, i))


def named_parameter(key: str, param: Mapping[str, Any]) -> bytes:
    """One ``NamedParameter`` (a shared-parameters entry), to be joined by :func:`document`."""
    return _string(1, key) + _len(2, _parameter(param))


def document(info: Mapping[str, Any], path_items: Iterable[bytes],
             definitions: Iterable[bytes], parameters: Iterable[bytes] = ()) -> bytes:
    """A ``Document`` of Swagger 2.0 from encoded entries (:func:`named_path_item`,
    :func:`named_schema`, :func:`named_parameter`), in the order given."""
    paths = b"".join(_len(2, entry) for entry in path_items)
    defs = b"".join(_len(1, entry) for entry in definitions)
    params = b"".join(_len(1, entry) for entry in parameters)
    return (_string(1, "2.0") + _len(2, _info(info)) + _len(8, paths) + _len(9, defs)
            + (_len(10, params) if params else b""))


def encode(doc: Mapping[str, Any]) -> bytes:
    """The whole of a Swagger 2.0 JSON document (``swagger``, ``info``, ``paths``,
    ``definitions``), for when nothing is cached."""
    return document(
        doc.get("info") or {},
        (named_path_item(p, i) for p, i in sorted((doc.get("paths") or {}).items())),
        (named_schema(n, s) for n, s in sorted((doc.get("definitions") or {}).items())),
        (named_parameter(k, p) for k, p in sorted((doc.get("parameters") or {}).items())))
