"""Table tests for setpoint.apimachinery.typed: field sets, merge, compare and removal.

The expectations restate structured-merge-diff's behaviour (typed/merge.go, compare.go,
tofieldset.go, remove.go and their tests) on a small schema with every list kind.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import typed
from setpoint.apimachinery.fieldpath import Path, key, path, value
from setpoint.apimachinery.typed import MISSING, TypeSpec

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                     "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["port", "protocol"],
                      "items": {"type": "object", "properties": {
                          "port": {"type": "integer"}, "protocol": {"type": "string"},
                          "name": {"type": "string"}}}},
            "selector": {"type": "object", "additionalProperties": {"type": "string"}},
            "sealed": {"type": "object", "x-kubernetes-map-type": "atomic",
                       "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "port": {"x-kubernetes-int-or-string": True},
        }},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
SPEC = typed.from_openapi(SCHEMA)

P80 = key({"port": 80, "protocol": "TCP"})
P443 = key({"port": 443, "protocol": "TCP"})


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": fields}


FIELD_SETS: list[tuple[str, Any, set[Path]]] = [
    ("scalar-leaves", spec(size=1, port="http"),
     {path("spec", "size"), path("spec", "port")}),
    ("struct-fields-are-not-members", {"status": {"phase": "x"}}, {path("status", "phase")}),
    ("empty-struct-is-a-member", spec(), {path("spec")}),
    ("null-is-a-member", {"spec": None}, {path("spec")}),
    ("set-items", spec(tags=["a", "b"]),
     {path("spec", "tags", value("a")), path("spec", "tags", value("b"))}),
    ("atomic-list-is-a-leaf", spec(args=["a", "b"]), {path("spec", "args")}),
    ("map-list-items-and-their-fields",
     spec(ports=[{"port": 80, "protocol": "TCP", "name": "web"}]),
     {path("spec", "ports", P80), path("spec", "ports", P80, "port"),
      path("spec", "ports", P80, "protocol"), path("spec", "ports", P80, "name")}),
    ("map-keys-are-members", spec(selector={"app": "x"}), {path("spec", "selector", "app")}),
    ("atomic-map-is-a-leaf", spec(sealed={"a": "1"}), {path("spec", "sealed")}),
    ("unknown-fields-are-members-all-the-way-down", spec(free={"a": {"b": 1}}),
     {path("spec", "free", "a"), path("spec", "free", "a", "b")}),
    ("duplicate-set-items-counted-once-not-descended", spec(tags=["a", "a"]),
     {path("spec", "tags", value("a"))}),
    ("empty-associative-list-sets-nothing", spec(tags=[]), set()),
    ("metadata-is-object-meta",
     {"metadata": {"name": "a", "finalizers": ["f"], "labels": {"l": "1"},
                   "ownerReferences": [{"uid": "u1", "name": "o"}]}},
     {path("metadata", "name"), path("metadata", "finalizers", value("f")),
      path("metadata", "labels", "l"), path("metadata", "ownerReferences", key({"uid": "u1"})),
      path("metadata", "ownerReferences", key({"uid": "u1"}), "uid"),
      path("metadata", "ownerReferences", key({"uid": "u1"}), "name")}),
]


@pytest.mark.parametrize(("name", "obj", "expected"), FIELD_SETS,
                         ids=[c[0] for c in FIELD_SETS])
def test_to_field_set(name: str, obj: Any, expected: set[Path]) -> None:
    assert typed.to_field_set(SPEC, obj) == expected


MERGES: list[tuple[str, Any, Any, Any]] = [
    ("leaves-right-wins", spec(size=1, args=["a"]), spec(size=2), spec(size=2, args=["a"])),
    ("atomic-list-replaced", spec(args=["a", "b"]), spec(args=["c"]), spec(args=["c"])),
    ("set-union-keeps-left-order", spec(tags=["a", "b"]), spec(tags=["c", "a"]),
     spec(tags=["c", "a", "b"])),
    ("map-list-merged-by-key",
     spec(ports=[{"port": 80, "protocol": "TCP", "name": "web"},
                 {"port": 443, "protocol": "TCP"}]),
     spec(ports=[{"port": 443, "protocol": "TCP", "name": "tls"}]),
     spec(ports=[{"port": 80, "protocol": "TCP", "name": "web"},
                 {"port": 443, "protocol": "TCP", "name": "tls"}])),
    ("map-list-new-items-after-shared",
     spec(ports=[{"port": 80, "protocol": "TCP"}]),
     spec(ports=[{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]),
     spec(ports=[{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}])),
    ("atomic-map-replaced", spec(sealed={"a": "1", "b": "2"}), spec(sealed={"a": "3"}),
     spec(sealed={"a": "3"})),
    ("granular-map-merged", spec(selector={"a": "1"}), spec(selector={"b": "2"}),
     spec(selector={"a": "1", "b": "2"})),
    ("unknown-fields-merged", spec(free={"a": {"x": 1}}), spec(free={"a": {"y": 2}}),
     spec(free={"a": {"x": 1, "y": 2}})),
    ("type-change-right-wins", spec(port=80), spec(port="http"), spec(port="http")),
    ("missing-left", MISSING, spec(size=1), spec(size=1)),
    ("owner-references-by-uid",
     {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}},
     {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "kind": "K"}]}},
     {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"},
                                       {"uid": "1", "name": "a", "kind": "K"}]}}),
]


@pytest.mark.parametrize(("name", "lhs", "rhs", "expected"), MERGES, ids=[c[0] for c in MERGES])
def test_merge(name: str, lhs: Any, rhs: Any, expected: Any) -> None:
    assert typed.merge(SPEC, lhs, rhs) == expected


def test_merge_rejects_duplicate_keys_on_the_right() -> None:
    with pytest.raises(ValueError, match="duplicate entries"):
        typed.merge(SPEC, spec(tags=["b"]), spec(tags=["a", "a"]))


@pytest.mark.parametrize(("obj", "message"), [
    (spec(tags=["a", "a"]), r'\.spec\.tags: duplicate entries for key \[="a"\]'),
    (spec(ports=[{"port": 1, "protocol": "UDP"}, {"protocol": "UDP", "port": 1}]),
     "duplicate entries"),
    (spec(ports=[{"name": "x"}]), "omits all key fields"),
    (spec(ports=["x"]), "non-map elements"),
    (spec(tags=[{"a": 1}]), "map type"),
])
def test_validate_rejects_lists_that_cannot_merge(obj: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        typed.validate(SPEC, obj)


def test_validate_accepts_duplicates_in_atomic_lists() -> None:
    typed.validate(SPEC, spec(args=["a", "a"], free={"l": [1, 1]}))


COMPARES: list[tuple[str, Any, Any, set[Path], set[Path], set[Path]]] = [
    ("same", spec(size=1), spec(size=1), set(), set(), set()),
    ("modified-leaf", spec(size=1), spec(size=2), set(), {path("spec", "size")}, set()),
    ("added-subtree", {}, spec(size=1), set(), set(),
     {path("spec"), path("spec", "size")}),
    ("removed-subtree", spec(size=1), {}, {path("spec"), path("spec", "size")}, set(), set()),
    ("set-item-added", spec(tags=["a"]), spec(tags=["a", "b"]), set(), set(),
     {path("spec", "tags", value("b"))}),
    ("map-list-item-field", spec(ports=[{"port": 80, "protocol": "TCP", "name": "a"}]),
     spec(ports=[{"port": 80, "protocol": "TCP", "name": "b"}]), set(),
     {path("spec", "ports", P80, "name")}, set()),
    ("atomic-list-modified", spec(args=["a"]), spec(args=["b"]), set(),
     {path("spec", "args")}, set()),
    ("reordered-set-is-same", spec(tags=["a", "b"]), spec(tags=["b", "a"]), set(), set(), set()),
    ("int-and-bool-differ", spec(free={"x": 1}), spec(free={"x": True}), set(),
     {path("spec", "free", "x")}, set()),
]


@pytest.mark.parametrize(("name", "lhs", "rhs", "removed", "modified", "added"), COMPARES,
                         ids=[c[0] for c in COMPARES])
def test_compare(name: str, lhs: Any, rhs: Any, removed: set[Path], modified: set[Path],
                 added: set[Path]) -> None:
    result = typed.compare(SPEC, lhs, rhs)
    assert (result.removed, result.modified, result.added) == (removed, modified, added)


REMOVALS: list[tuple[str, Any, set[Path], Any]] = [
    ("leaf", spec(size=1, args=["a"]), {path("spec", "size")}, spec(args=["a"])),
    ("emptied-struct-dropped", {"spec": {"size": 1}, "status": {}},
     {path("spec", "size")}, {"status": {}}),
    ("whole-subtree", spec(size=1, selector={"a": "b"}), {path("spec", "selector")},
     spec(size=1)),
    ("set-item", spec(tags=["a", "b", "c"]), {path("spec", "tags", value("b"))},
     spec(tags=["a", "c"])),
    ("map-list-item", spec(ports=[{"port": 80, "protocol": "TCP"},
                                  {"port": 443, "protocol": "TCP"}]),
     {path("spec", "ports", P80)}, spec(ports=[{"port": 443, "protocol": "TCP"}])),
    ("field-of-map-list-item", spec(ports=[{"port": 443, "protocol": "TCP", "name": "x"}]),
     {path("spec", "ports", P443, "name")}, spec(ports=[{"port": 443, "protocol": "TCP"}])),
    ("absent-paths-are-ignored", spec(size=1), {path("spec", "nope"), path("x", "y")},
     spec(size=1)),
]


@pytest.mark.parametrize(("name", "obj", "paths", "expected"), REMOVALS,
                         ids=[c[0] for c in REMOVALS])
def test_remove_items(name: str, obj: Any, paths: set[Path], expected: Any) -> None:
    assert typed.remove_items(SPEC, obj, frozenset(paths)) == expected


def test_named_fields_become_members_but_map_keys_do_not() -> None:
    s = frozenset({path("spec", "selector", "app"), path("spec", "ports", P80, "name")})
    assert typed.ensure_named_fields_are_members(SPEC, s) == s | {
        path("spec"), path("spec", "selector"), path("spec", "ports")}


def test_operations_do_not_mutate_their_arguments() -> None:
    lhs = spec(tags=["a"], ports=[{"port": 80, "protocol": "TCP"}], selector={"a": "1"})
    rhs = spec(tags=["b"], ports=[{"port": 80, "protocol": "TCP", "name": "n"}])
    before = (repr(lhs), repr(rhs))
    typed.merge(SPEC, lhs, rhs)
    typed.compare(SPEC, lhs, rhs)
    typed.remove_items(SPEC, lhs, frozenset({path("spec", "tags", value("a"))}))
    assert (repr(lhs), repr(rhs)) == before


def test_lists_are_atomic_unless_the_schema_says_otherwise() -> None:
    plain = typed.from_openapi({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "l": {"type": "array", "items": {"type": "object"}}}}}})
    assert typed.to_field_set(plain, spec(l=[{"a": 1}])) == {path("spec", "l")}


def test_no_schema_means_everything_deduced() -> None:
    deduced: TypeSpec = typed.from_openapi(None)
    assert typed.to_field_set(deduced, {"spec": {"a": [1]}, "metadata": {"labels": {"x": "1"}}}
                              ) == {path("spec"), path("spec", "a"),
                                    path("metadata", "labels", "x")}


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3),
                     st.sampled_from([0.0, 1.0, -0.0, 2.5]), st.sampled_from(["", "a", "b"]))
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "port", "protocol", "name"]), inner,
                      max_size=3),
    max_leaves=8)
_objects = st.fixed_dictionaries({}, optional={
    "spec": st.fixed_dictionaries({}, optional={
        "size": _values, "tags": _values, "args": _values, "ports": _values,
        "selector": _values, "sealed": _values, "free": _values, "port": _values}),
    "status": _values, "metadata": _values, "extra": _values})


def _walked(lhs: Any, rhs: Any) -> tuple[set[Path], set[Path], set[Path]]:
    """What the field-by-field walk finds, without compare()'s quick ways."""
    out = typed.Comparison()
    typed._compare(SPEC, lhs, rhs, (), out)
    return (out.removed - {()}, out.modified - {()}, out.added - {()})


@settings(max_examples=400, deadline=None)
@given(_objects, _objects, st.booleans())
def test_compare_leaves_out_unchanged_fields_without_changing_its_answer(
        lhs: dict[str, Any], rhs: dict[str, Any], share: bool) -> None:
    if share:  # the usual update: most top-level fields the same, one changed
        rhs = {**lhs, **{k: v for k, v in rhs.items() if k == "status"}}
    try:
        expected = _walked(lhs, rhs)
    except ValueError:
        with pytest.raises(ValueError):  # noqa: PT011 - the walk's own error, either way
            typed.compare(SPEC, lhs, rhs)
        return
    got = typed.compare(SPEC, lhs, rhs)
    assert (got.removed, got.modified, got.added) == expected


def test_same_json_is_only_the_same_value() -> None:
    assert typed._same_json({"a": {"b": 1, "c": "x"}}, {"a": {"b": 1, "c": "x"}})
    assert not typed._same_json({"a": ["x"]}, {"a": ["x"]})  # a list: compared (it may fail)
    assert not typed._same_json({"a": 1}, {"a": True})
    assert not typed._same_json({"a": 1}, {"a": 1.0})
    assert not typed._same_json({"a": None}, {"a": float("nan")})  # both encode as null
    assert not typed._same_json({"a": None}, {"a": None})  # null: always compared
    assert not typed._same_json({"a": 2**70}, {"a": 2**70})  # beyond what orjson encodes
    assert not typed._same_json({"a": 1, "b": 2}, {"b": 2, "a": 1})  # another order: compared
