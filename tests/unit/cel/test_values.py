"""JSON values and schema types as CEL sees them (Kubernetes' ``UnstructuredToVal``,
``SchemaDeclType`` and property-name escaping)."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.cel import types as t
from setpoint.cel.errors import EvalError
from setpoint.cel.interpreter import Activation
from setpoint.cel.objects import CelList, Duration, Timestamp
from setpoint.cel.values import decl_type, escape, to_cel, unescape
from setpoint.schema.structural import parse

from ._util import Err, compile_expr, same

ESCAPES = [
    ("a.a", "a__dot__a"), ("a-a", "a__dash__a"), ("a__a", "a__underscores__a"),
    ("a.-/__a", "a__dot____dash____slash____underscores__a"), ("a._a", "a__dot___a"),
    ("a__.__a", "a__underscores____dot____underscores__a"), ("a___a", "a__underscores___a"),
    ("a____a", "a__underscores____underscores__a"),
    ("a__dot__a", "a__underscores__dot__underscores__a"),
    ("true", "__true__"), ("namespace", "__namespace__"), ("import", "__import__"),
    ("has", "has"), ("exists_one", "exists_one"), ("x-kubernetes", "x__dash__kubernetes"),
    ("_a", "_a"), ("a1", "a1"),
]


@pytest.mark.parametrize(("name", "escaped"), ESCAPES, ids=[n for n, _ in ESCAPES])
def test_escape_round_trips(name: str, escaped: str) -> None:
    assert escape(name) == escaped
    assert unescape(escaped) == name


@pytest.mark.parametrize("name", ["@", "1up", "👑", "", "a b"])
def test_unescapable_names(name: str) -> None:
    assert escape(name) is None


@pytest.mark.parametrize(("escaped", "want"), [
    ("__true__x", None), ("a__foo__b", None), ("plain", "plain"),
], ids=["keyword inside a name", "unknown escape", "nothing to unescape"])
def test_unescape_rejects_what_escape_never_produces(escaped: str, want: str | None) -> None:
    assert unescape(escaped) == want


def _props(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


DECL_TYPES: list[tuple[str, dict[str, Any], str | None]] = [
    ("string", {"type": "string"}, "string"),
    ("integer", {"type": "integer"}, "int"),
    ("number", {"type": "number"}, "double"),
    ("boolean", {"type": "boolean"}, "bool"),
    ("date-time", {"type": "string", "format": "date-time"}, "google.protobuf.Timestamp"),
    ("date", {"type": "string", "format": "date"}, "google.protobuf.Timestamp"),
    ("duration", {"type": "string", "format": "duration"}, "google.protobuf.Duration"),
    ("byte", {"type": "string", "format": "byte"}, "bytes"),
    ("other formats are strings", {"type": "string", "format": "email"}, "string"),
    ("int-or-string", {"x-kubernetes-int-or-string": True}, "dyn"),
    ("array", {"type": "array", "items": {"type": "integer"}}, "list(int)"),
    ("array of untyped", {"type": "array", "items": {}}, None),
    ("map", {"type": "object", "additionalProperties": {"type": "string"}},
     "map(string, string)"),
    ("no type", {}, None),
    ("preserve-unknown-fields without type", {"x-kubernetes-preserve-unknown-fields": True},
     None),
]


@pytest.mark.parametrize(("schema", "want"), [(s, w) for _, s, w in DECL_TYPES],
                         ids=[c[0] for c in DECL_TYPES])
def test_decl_type(schema: dict[str, Any], want: str | None) -> None:
    got = decl_type(parse(schema))
    assert (str(got) if got is not None else None) == want


def test_object_fields_are_escaped_and_untyped_ones_dropped() -> None:
    got = decl_type(parse(_props(**{"foo-bar": {"type": "string"}, "namespace": {"type": "string"},
                                    "1st": {"type": "string"}, "free": {}})))
    assert got is not None
    assert got.fields is not None
    assert set(got.fields) == {"foo__dash__bar", "__namespace__"}


def test_resource_root_shows_type_meta_and_name_only() -> None:
    got = decl_type(parse(_props(spec=_props())), resource_root=True)
    assert got is not None
    assert got.fields is not None
    assert set(got.fields) == {"spec", "apiVersion", "kind", "metadata"}
    metadata = got.fields["metadata"]
    assert metadata.fields is not None
    assert set(metadata.fields) == {"name", "generateName"}


def test_embedded_resources_are_objects_with_type_meta() -> None:
    got = decl_type(parse({"type": "object", "x-kubernetes-embedded-resource": True,
                           "x-kubernetes-preserve-unknown-fields": True}))
    assert got is not None
    assert got.fields is not None
    assert set(got.fields) == {"apiVersion", "kind", "metadata"}


def test_object_types_are_distinct() -> None:
    a = decl_type(parse(_props(x={"type": "string"})))
    b = decl_type(parse(_props(x={"type": "string"})))
    assert a is not None
    assert b is not None
    assert a != b
    assert a == a
    assert not t.assignable(t.map_of(t.STRING, t.DYN), a, {})


VALUES: list[tuple[str, dict[str, Any], Any, str, Any]] = [
    ("number from an integer literal", {"type": "number"}, 1, "self", 1.0),
    ("integer", {"type": "integer"}, 5, "self", 5),
    ("integer written as a whole double", {"type": "integer"}, 5.0, "self", 5),
    ("date-time", {"type": "string", "format": "date-time"}, "1970-01-01T00:00:01.5Z", "self",
     Timestamp(1_500_000_000)),
    ("date is midnight UTC", {"type": "string", "format": "date"}, "1970-01-02", "self",
     Timestamp(86_400 * 10**9)),
    ("duration", {"type": "string", "format": "duration"}, "1m30s", "self",
     Duration(90 * 10**9)),
    ("OpenAPI duration units", {"type": "string", "format": "duration"}, "1 week 2d", "self",
     Duration(9 * 86_400 * 10**9)),
    ("date-time without seconds or zone", {"type": "string", "format": "date-time"},
     "1970-01-01t00:01", "self", Timestamp(60 * 10**9)),
    ("date-time offset without colon", {"type": "string", "format": "date-time"},
     "1970-01-01T01:00:00+0100", "self", Timestamp(0)),
    ("byte is decoded", {"type": "string", "format": "byte"}, "aGk=", "self", b"hi"),
    ("bad date-time", {"type": "string", "format": "date-time"}, "yesterday", "self",
     Err("Invalid date-time formatted string yesterday")),
    ("int-or-string int", {"x-kubernetes-int-or-string": True}, 3, "self", 3),
    ("int-or-string string", {"x-kubernetes-int-or-string": True}, "3%", "self", "3%"),
    ("numbers in lists", {"type": "array", "items": {"type": "number"}}, [1, 2.5], "self",
     [1.0, 2.5]),
    ("escaped field", _props(**{"foo-bar": {"type": "integer"}}), {"foo-bar": 1},
     "self.foo__dash__bar", 1),
    ("keyword field", _props(namespace={"type": "string"}), {"namespace": "ns"},
     "self.__namespace__", "ns"),
    ("null field is absent", _props(a={"type": "string", "nullable": True}), {"a": None},
     "has(self.a)", False),
    ("undeclared keys are invisible", _props(a={"type": "string"}), {"a": "x", "b": "y"},
     "dyn(self).b", Err("no such key: b")),
    ("map values", {"type": "object", "additionalProperties": {"type": "number"}},
     {"k": 1}, "self.k", 1.0),
    ("map keys are iterated", {"type": "object", "additionalProperties": {"type": "string"}},
     {"b": "x", "a": "y"}, "self.map(k, k)", ["b", "a"]),
    ("object keys iterate escaped", _props(**{"a-b": {"type": "string"}}), {"a-b": "x"},
     "dyn(self).all(k, k == 'a__dash__b')", True),
    ("set lists compare as sets",
     {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
     ["a", "b"], "self == ['b', 'a']", True),
    ("atomic lists compare in order", {"type": "array", "items": {"type": "string"}},
     ["a", "b"], "self == ['b', 'a']", False),
    ("set concatenation is a union",
     {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
     ["a", "b"], "self + ['b', 'c'] == ['a', 'b', 'c']", True),
    ("map lists compare by key",
     {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
      "items": _props(k={"type": "string"}, v={"type": "string"})},
     [{"k": "a", "v": "1"}, {"k": "b", "v": "2"}],
     "self == dyn([{'k': 'b', 'v': '2'}, {'k': 'a', 'v': '1'}])", True),
    ("map list concatenation merges by key",
     {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
      "items": _props(k={"type": "string"}, v={"type": "string"})},
     [{"k": "a", "v": "1"}], "(self + dyn([{'k': 'a', 'v': '2'}])).map(e, e.v) == ['2']",
     True),
    ("list index out of bounds", {"type": "array", "items": {"type": "number"}}, [1],
     "self[3]", Err("index out of bounds: 3")),
    ("wrong JSON type", _props(n={"type": "integer"}), {"n": "x"}, "self.n",
     Err("invalid data, expected int, got str")),
]


@pytest.mark.parametrize(("schema", "value", "expr", "want"),
                         [(s, v, e, w) for _, s, v, e, w in VALUES],
                         ids=[c[0] for c in VALUES])
def test_values(schema: dict[str, Any], value: Any, expr: str, want: Any) -> None:
    node = parse(schema)
    program = compile_expr(expr, self=decl_type(node) or t.DYN)
    try:
        got: Any = program.evaluate(Activation({"self": to_cel(value, node)}, 10**6))
    except EvalError as e:
        got = Err(str(e))
    if isinstance(got, CelList):
        got = list(got)
    assert same(got, want), f"{expr}: got {got!r}, want {want!r}"


def test_resource_root_metadata_shows_only_name_and_generate_name() -> None:
    node = parse(_props(spec=_props()))
    obj = {"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}}
    root = to_cel(obj, node, resource_root=True)
    found, metadata = root.find("metadata")
    assert found
    assert metadata.find("name") == (True, "n")
    assert metadata.find("labels") == (False, None)


def test_views_do_not_copy_the_object() -> None:
    node = parse({"type": "array", "items": {"type": "string"}})
    value = ["a", "b"]
    assert to_cel(value, node) is value
