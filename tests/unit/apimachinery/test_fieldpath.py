"""Table tests for setpoint.apimachinery.fieldpath: elements, set algebra and FieldsV1.

Expected encodings are the ones kube-apiserver writes into ``managedFields`` (members as
``{}``, ``"."`` for a member that has children, elements ordered fields < keys < values <
indices), and conflicts render paths as structured-merge-diff's ``Path.String`` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import fieldpath
from setpoint.apimachinery.fieldpath import Path, key, path, value

F = fieldpath.field

ENCODED: list[tuple[str, set[Path], dict[str, Any]]] = [
    ("empty", set(), {}),
    ("one-leaf", {path("spec", "size")}, {"f:spec": {"f:size": {}}}),
    ("member-with-children",
     {path("metadata", "labels"), path("metadata", "labels", "app")},
     {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
    ("fields-sorted-bytewise",
     {path("b"), path("B"), path("a")}, {"f:B": {}, "f:a": {}, "f:b": {}}),
    ("map-list-item",
     {path("spec", "ports", key({"protocol": "TCP", "port": 80})),
      path("spec", "ports", key({"protocol": "TCP", "port": 80}), "name")},
     {"f:spec": {"f:ports": {'k:{"port":80,"protocol":"TCP"}': {".": {}, "f:name": {}}}}}),
    ("set-items-numbers-before-strings",
     {path("s", value("b")), path("s", value(2)), path("s", value("a")), path("s", value(1))},
     {"f:s": {"v:1": {}, "v:2": {}, 'v:"a"': {}, 'v:"b"': {}}}),
    ("fields-before-keys-before-values",
     {path("x", value("v")), path("x", key({"k": "a"})), path("x", "f")},
     {"f:x": {"f:f": {}, 'k:{"k":"a"}': {}, 'v:"v"': {}}}),
    ("keys-ordered-by-value",
     {path("l", key({"name": "b"})), path("l", key({"name": "a"}))},
     {"f:l": {'k:{"name":"a"}': {}, 'k:{"name":"b"}': {}}}),
    ("html-escaped-like-go",
     {path("l", value("<a&b>"))}, {"f:l": {'v:"\\u003ca\\u0026b\\u003e"': {}}}),
]


@pytest.mark.parametrize(("name", "paths", "encoded"), ENCODED, ids=[c[0] for c in ENCODED])
def test_fields_v1_encoding(name: str, paths: set[Path], encoded: dict[str, Any]) -> None:
    assert fieldpath.to_fields_v1(paths) == encoded
    assert list(fieldpath.to_fields_v1(paths)) == list(encoded)
    assert fieldpath.from_fields_v1(encoded) == frozenset(paths)


def test_decoding_accepts_what_kubernetes_writes() -> None:
    raw = {"f:metadata": {"f:annotations": {".": {}, "f:a": {}}},
           "f:spec": {".": {}, 'k:{"name":"x"}': {".": {}, "f:image": {}}, "i:3": {}}}
    assert fieldpath.from_fields_v1(raw) == {
        path("metadata", "annotations"), path("metadata", "annotations", "a"),
        path("spec"), path("spec", key({"name": "x"})),
        path("spec", key({"name": "x"}), "image"), path("spec", fieldpath.index(3))}


def test_decoding_skips_unknown_element_types() -> None:
    assert fieldpath.from_fields_v1({"x:1": {}, "f:a": {}}) == {path("a")}


@pytest.mark.parametrize("bad", [
    [], {"f:a": 1}, {"k:notjson": {}}, {"k:[1]": {}}, {"i:x": {}}, {"f": {}}])
def test_malformed_fields_v1_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        fieldpath.from_fields_v1(bad)


RENDERED: list[tuple[Path, str]] = [
    (path("spec", "x"), ".spec.x"),
    (path("spec", "ports", key({"port": 80, "protocol": "TCP"}), "name"),
     '.spec.ports[port=80,protocol="TCP"].name'),
    (path("metadata", "finalizers", value("a/b")), '.metadata.finalizers[="a/b"]'),
    (path("l", fieldpath.index(2)), ".l[2]"),
    (path("flags", value(True)), ".flags[=true]"),
]


@pytest.mark.parametrize(("p", "text"), RENDERED, ids=[t for _, t in RENDERED])
def test_paths_render_like_structured_merge_diff(p: Path, text: str) -> None:
    assert fieldpath.render(p) == text


def test_elements_round_trip_through_their_serialized_form() -> None:
    for pe in (F("a.b"), key({"b": 1, "a": "x"}), value({"z": None}), fieldpath.index(0)):
        assert fieldpath.parse_element(fieldpath.serialize_element(pe)) == pe


def test_key_elements_do_not_depend_on_field_order() -> None:
    assert key({"a": 1, "b": 2}) == key({"b": 2, "a": 1})


def test_recursive_difference_removes_subtrees() -> None:
    s = {path("a"), path("a", "b"), path("a", "b", "c"), path("ab"), path("x", "a")}
    assert fieldpath.recursive_difference(s, {path("a", "b")}) == {
        path("a"), path("ab"), path("x", "a")}
    assert fieldpath.recursive_difference(s, {path("a")}) == {path("ab"), path("x", "a")}
    assert fieldpath.recursive_difference(s, set()) == frozenset(s)


def test_with_prefix_cuts_the_prefix() -> None:
    s = {path("a"), path("a", "b"), path("a", "c", "d"), path("b", "a")}
    assert fieldpath.with_prefix(s, path("a")) == {path("b"), path("c", "d")}
