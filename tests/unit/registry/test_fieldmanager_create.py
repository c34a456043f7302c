"""The create path of field management records what the general comparison records.

A create whose client sent no managedFields takes a short way (every field the object sets is
added, without a comparison, and the encoding of a shape is shared); these properties check it
against the general path on arbitrary objects over a schema with every list and map kind.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import typed
from setpoint.registry import fieldmanager as fm

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {
            "x": {"type": "string"},
            "nested": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                     "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer"}}}},
            "args": {"type": "array", "items": {"type": "string"}},
            "frozen": {"type": "object", "x-kubernetes-map-type": "atomic",
                       "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }},
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}
API = "example.com/v1"
NOW = "2026-01-02T03:04:05Z"

NAMES = st.sampled_from(["x", "a", "b", "name", "port", "tags", "ports", "nested", "free"])
SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b", ""])
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(NAMES, inner, max_size=3), max_leaves=12)
SPEC = st.fixed_dictionaries({}, optional={
    "x": JSON, "nested": JSON,
    "tags": st.lists(st.sampled_from(["a", "b", "c"]), max_size=4) | JSON,
    "ports": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["p", "q"])},
                                            optional={"port": st.integers(1, 3)}),
                      max_size=3) | JSON,
    "args": JSON, "frozen": JSON, "free": JSON})
OBJECTS = st.fixed_dictionaries(
    {"apiVersion": st.just(API), "kind": st.just("Thing"),
     "metadata": st.fixed_dictionaries({"name": st.just("t")}, optional={
         "labels": st.dictionaries(st.sampled_from(["a", "b"]), st.just("v"), max_size=2),
         "annotations": st.dictionaries(st.sampled_from(["n"]), st.just("v"), max_size=1),
         "finalizers": st.lists(st.sampled_from(["f1", "f2"]), max_size=2)})},
    optional={"spec": SPEC | JSON, "status": JSON, "extra": JSON})


def general_create(manager: fm.FieldManager, obj: dict[str, Any]) -> dict[str, Any]:
    """What :meth:`FieldManager.update` recorded for a create before its short way: the
    Updater's comparison of the object with nothing."""
    meta = obj["metadata"]
    me = fm._key("creator", fm.UPDATE, API, "")
    ignored = fm._ignored({}, obj, "", manager.status_subresource)
    try:
        out = manager.updater.update({}, obj, {}, me, API, NOW, ignored)
    except ValueError:
        meta.pop("managedFields", None)
        return obj
    fm._cap(out)
    fm._store(meta, out)
    return obj


@settings(max_examples=300, deadline=None)
@given(obj=OBJECTS, status_subresource=st.booleans())
def test_a_create_records_what_the_comparison_with_nothing_records(
        obj: dict[str, Any], status_subresource: bool) -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API,
                              status_subresource=status_subresource)
    expected = general_create(manager, copy.deepcopy(obj))
    for _ in range(2):  # the second time from the shared encoding of the shape
        created = copy.deepcopy(obj)
        manager.update(None, created, "creator", NOW)
        assert created == expected


@settings(max_examples=300, deadline=None)
@given(obj=OBJECTS)
def test_compare_from_nothing_adds_what_the_full_comparison_adds(obj: dict[str, Any]) -> None:
    spec = typed.from_openapi(SCHEMA)
    full = typed.Comparison()
    try:
        typed._compare(spec, {}, obj, (), full)
    except ValueError:
        return  # an untypable object: both raise (see the create test)
    full.added.discard(())
    short = typed.compare(spec, {}, obj)
    assert short.added == full.added
    assert not short.removed
    assert not short.modified


def test_the_shared_encoding_is_a_private_copy_for_each_create() -> None:
    manager = fm.FieldManager(typed.from_openapi(SCHEMA), API, status_subresource=True)
    first = {"apiVersion": API, "kind": "Thing", "metadata": {"name": "a"},
             "spec": {"x": "1"}}
    second = copy.deepcopy(first)
    manager.update(None, first, "creator", NOW)
    first["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:y"] = {}
    manager.update(None, second, "creator", NOW)
    assert second["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {".": {}, "f:x": {}}}


@given(old=OBJECTS, new=OBJECTS, subresource=st.sampled_from(["", "status"]),
       status_subresource=st.booleans())
@settings(max_examples=300)
def test_skipping_the_ignored_top_level_fields_changes_no_comparison(
        old: dict[str, Any], new: dict[str, Any], subresource: str,
        status_subresource: bool) -> None:
    """An update compares only what is not ignored; what it then excludes is the same."""
    spec = typed.from_openapi(SCHEMA)
    ignored = fm._ignored(old, new, subresource, status_subresource)
    try:
        full = typed.compare(spec, old, new).exclude(ignored)
    except ValueError:
        return  # an untypable object: the field manager drops managedFields either way
    skipped = typed.compare(spec, old, new, skip=ignored).exclude(ignored)
    assert (skipped.added, skipped.removed, skipped.modified) == (
        full.added, full.removed, full.modified)
