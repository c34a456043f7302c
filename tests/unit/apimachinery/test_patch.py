"""Table tests for setpoint.apimachinery.patch.

Merge patch cases are RFC 7386 appendix A; JSON patch cases are RFC 6902 appendix A plus what
kopf and kubectl send; strategic merge patch cases restate expectations of apimachinery's
strategicpatch tests (Kubernetes 1.32) against its test schema, then ObjectMeta cases.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import patch
from setpoint.apimachinery.patch import PatchError, PatchTestFailed

# --- merge patch -------------------------------------------------------------------------------

MERGE: list[tuple[str, Any, Any, Any]] = [
    ("replace-member", {"a": "b"}, {"a": "c"}, {"a": "c"}),
    ("add-member", {"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ("delete-member", {"a": "b"}, {"a": None}, {}),
    ("delete-one-of-two", {"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ("array-to-string", {"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ("string-to-array", {"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ("nested", {"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ("arrays-replace", {"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ("array-document", ["a", "b"], ["c", "d"], ["c", "d"]),
    ("object-to-array", {"a": "b"}, ["c"], ["c"]),
    ("null-patch", {"a": "foo"}, None, None),
    ("string-patch", {"a": "foo"}, "bar", "bar"),
    ("null-in-target-kept", {"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ("array-target-becomes-object", [1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ("nulls-dropped-from-new-subtree", {}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ("scalar-target-becomes-object", {"a": 1}, {"a": {"b": None, "c": 2}}, {"a": {"c": 2}}),
    ("kopf-annotation", {"metadata": {"name": "x", "annotations": {"a": "1"}}},
     {"metadata": {"annotations": {"kopf.zalando.org/last-handled-configuration": "{}\n"}}},
     {"metadata": {"name": "x", "annotations": {
         "a": "1", "kopf.zalando.org/last-handled-configuration": "{}\n"}}}),
    ("kubectl-scale", {"spec": {"replicas": 1, "x": True}}, {"spec": {"replicas": 3}},
     {"spec": {"replicas": 3, "x": True}}),
    ("empty-patch", {"a": 1}, {}, {"a": 1}),
]


@pytest.mark.parametrize(("target", "body", "want"), [c[1:] for c in MERGE],
                         ids=[c[0] for c in MERGE])
def test_merge_patch(target: Any, body: Any, want: Any) -> None:
    target_before, body_before = copy.deepcopy(target), copy.deepcopy(body)
    got = patch.merge_patch(target, body)
    assert got == want
    assert target == target_before
    assert body == body_before


def test_merge_patch_shares_nothing() -> None:
    target = {"keep": {"deep": [1]}, "change": {"x": 1}}
    body = {"change": {"y": [2]}, "new": {"z": {}}}
    got = patch.merge_patch(target, body)
    got["keep"]["deep"].append(9)
    got["change"]["y"].append(9)
    got["new"]["z"]["w"] = 1
    assert target == {"keep": {"deep": [1]}, "change": {"x": 1}}
    assert body == {"change": {"y": [2]}, "new": {"z": {}}}


def _rfc7386(target: Any, body: Any) -> Any:
    """RFC 7386's MergePatch pseudocode, word for word (copying whatever it keeps)."""
    if not isinstance(body, dict):
        return copy.deepcopy(body)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in body.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = _rfc7386(result.get(name), value)
    return result


_KEYS = st.sampled_from(["a", "b", "c", "metadata", "status"])
_SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "x", "y"])
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_KEYS, inner, max_size=4), max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(target=_JSON, body=_JSON)
def test_merge_patch_is_rfc7386_and_shares_nothing(target: Any, body: Any) -> None:
    target_before, body_before = copy.deepcopy(target), copy.deepcopy(body)
    got = patch.merge_patch(target, body)
    assert got == _rfc7386(target, body)
    assert target == target_before
    assert body == body_before
    originals = {id(c) for c in (*_containers(target), *_containers(body))}
    assert not any(id(c) in originals for c in _containers(got))


def _containers(value: Any) -> list[Any]:
    found: list[Any] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict | list):
            found.append(node)
            stack.extend(node.values() if isinstance(node, dict) else node)
    return found


def test_a_deep_merge_patch_copies_the_target_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # a patch as deep as the object once had every level below it copied again: the depth
    # times the containers below (seconds of the event loop for a large object)
    copied: list[int] = []
    real = patch.deep_copy

    def counting(value: Any) -> Any:
        copied.append(len(_containers(value)))
        return real(value)

    monkeypatch.setattr(patch, "deep_copy", counting)
    target: Any = {"blob": [{} for _ in range(1000)]}
    body: Any = {"x": 1}
    for _ in range(50):
        target, body = {"a": target}, {"a": body}
    got = patch.merge_patch(target, body)
    assert sum(copied) <= len(_containers(target)) + len(_containers(body))
    for _ in range(50):
        got = got["a"]
    assert got == {"blob": [{} for _ in range(1000)], "x": 1}


# --- JSON patch --------------------------------------------------------------------------------

JSON_OK: list[tuple[str, Any, list[Any], Any]] = [
    ("add-member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ("add-array-element", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1",
                                                     "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ("remove-member", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}],
     {"foo": "bar"}),
    ("remove-array-element", {"foo": ["bar", "qux", "baz"]},
     [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ("replace", {"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz",
                                                 "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ("move-member", {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ("move-array-element", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ("test-success", {"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"},
      {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ("add-nested", {"foo": "bar"}, [{"op": "add", "path": "/child",
                                     "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ("unknown-members-ignored", {"foo": "bar"},
     [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ("escape-order", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
     {"/": 9, "~1": 10}),
    ("escape-slash", {"a/b": 1}, [{"op": "replace", "path": "/a~1b", "value": 2}], {"a/b": 2}),
    ("append-array-value", {"foo": ["bar"]}, [{"op": "add", "path": "/foo/-",
                                               "value": ["abc", "def"]}],
     {"foo": ["bar", ["abc", "def"]]}),
    ("add-at-end-index", {"a": [1]}, [{"op": "add", "path": "/a/1", "value": 2}], {"a": [1, 2]}),
    ("add-replaces-member", {"a": 1}, [{"op": "add", "path": "/a", "value": 2}], {"a": 2}),
    ("copy", {"a": {"b": [1]}}, [{"op": "copy", "from": "/a", "path": "/c"}],
     {"a": {"b": [1]}, "c": {"b": [1]}}),
    ("move-to-same-place", {"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1}),
    ("replace-root", {"a": 1}, [{"op": "replace", "path": "", "value": [1]}], [1]),
    ("add-root", {"a": 1}, [{"op": "add", "path": "", "value": {"b": 2}}], {"b": 2}),
    ("empty-key", {"": {"x": 1}}, [{"op": "replace", "path": "/", "value": 0}], {"": 0}),
    ("go-number-equality", {"n": 1}, [{"op": "test", "path": "/n", "value": 1.0}], {"n": 1}),
    ("deep-equality", {"o": {"a": [1, {"b": None}]}},
     [{"op": "test", "path": "/o", "value": {"a": [1.0, {"b": None}]}}],
     {"o": {"a": [1, {"b": None}]}}),
    ("test-missing-against-null", {"a": {}}, [{"op": "test", "path": "/a/b", "value": None}],
     {"a": {}}),
    ("kopf-add-finalizer", {"metadata": {"resourceVersion": "7"}},
     [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
      {"op": "add", "path": "/metadata/finalizers",
       "value": ["kopf.zalando.org/KopfFinalizerMarker"]}],
     {"metadata": {"resourceVersion": "7",
                   "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"]}}),
    ("kopf-remove-finalizers", {"metadata": {"finalizers": ["a"], "name": "x"}},
     [{"op": "remove", "path": "/metadata/finalizers"}], {"metadata": {"name": "x"}}),
    ("append-finalizer", {"metadata": {"finalizers": ["a"]}},
     [{"op": "add", "path": "/metadata/finalizers/-", "value": "b"}],
     {"metadata": {"finalizers": ["a", "b"]}}),
    ("ops-see-earlier-ops", {}, [{"op": "add", "path": "/a", "value": {}},
                                 {"op": "add", "path": "/a/b", "value": 1},
                                 {"op": "copy", "from": "/a/b", "path": "/c"}],
     {"a": {"b": 1}, "c": 1}),
    ("no-operations", {"a": 1}, [], {"a": 1}),
]


@pytest.mark.parametrize(("doc", "ops", "want"), [c[1:] for c in JSON_OK],
                         ids=[c[0] for c in JSON_OK])
def test_json_patch(doc: Any, ops: list[Any], want: Any) -> None:
    doc_before, ops_before = copy.deepcopy(doc), copy.deepcopy(ops)
    assert patch.json_patch(doc, ops) == want
    assert doc == doc_before
    assert ops == ops_before


JSON_BAD: list[tuple[str, Any, Any, type[PatchError], str]] = [
    ("test-failure", {"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}],
     PatchTestFailed, 'testing value /baz failed: expected "bar", found "qux"'),
    ("test-string-vs-number", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01",
                                                    "value": "10"}],
     PatchTestFailed, "testing value /~01 failed"),
    ("test-bool-vs-number", {"a": 1}, [{"op": "test", "path": "/a", "value": True}],
     PatchTestFailed, "testing value /a failed"),
    ("test-missing", {"a": 1}, [{"op": "test", "path": "/b", "value": 1}],
     PatchTestFailed, 'testing value /b failed: the path "/b" is missing'),
    ("test-stale-resource-version", {"metadata": {"resourceVersion": "8"}},
     [{"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
      {"op": "add", "path": "/metadata/finalizers", "value": ["x"]}],
     PatchTestFailed, "testing value /metadata/resourceVersion failed"),
    ("add-to-missing-parent", {"foo": "bar"}, [{"op": "add", "path": "/baz/bat",
                                                "value": "qux"}],
     PatchError, 'add operation does not apply: doc is missing path: "/baz/bat"'),
    ("remove-missing", {"a": 1}, [{"op": "remove", "path": "/b"}],
     PatchError, 'remove operation does not apply: doc is missing path: "/b"'),
    ("replace-missing", {"a": 1}, [{"op": "replace", "path": "/b", "value": 1}],
     PatchError, 'replace operation does not apply: doc is missing path: "/b"'),
    ("remove-root", {"a": 1}, [{"op": "remove", "path": ""}], PatchError, "whole document"),
    ("index-out-of-bounds", {"a": [1]}, [{"op": "add", "path": "/a/2", "value": 1}],
     PatchError, "index 2 is out of bounds for an array of length 1"),
    ("remove-out-of-bounds", {"a": [1]}, [{"op": "remove", "path": "/a/1"}],
     PatchError, "index 1 is out of bounds"),
    ("remove-dash", {"a": [1]}, [{"op": "remove", "path": "/a/-"}],
     PatchError, '"-" is not a valid array index'),
    ("negative-index", {"a": [1]}, [{"op": "replace", "path": "/a/-1", "value": 1}],
     PatchError, '"-1" is not a valid array index'),
    ("leading-zero", {"a": [1, 2]}, [{"op": "replace", "path": "/a/01", "value": 1}],
     PatchError, '"01" is not a valid array index'),
    ("non-numeric-index", {"a": [1]}, [{"op": "add", "path": "/a/x", "value": 1}],
     PatchError, '"x" is not a valid array index'),
    ("through-scalar", {"a": 1}, [{"op": "add", "path": "/a/b/c", "value": 1}],
     PatchError, '"/a" is a number, not an object or array'),
    ("parent-is-scalar", {"a": "s"}, [{"op": "add", "path": "/a/b", "value": 1}],
     PatchError, 'the parent of "/a/b" is a string'),
    ("bad-pointer", {}, [{"op": "add", "path": "a", "value": 1}],
     PatchError, 'path "a" is not a JSON pointer'),
    ("bad-escape", {}, [{"op": "add", "path": "/a~2", "value": 1}],
     PatchError, "invalid escape"),
    ("non-string-path", {}, [{"op": "add", "path": 1, "value": 1}],
     PatchError, "path must be a string"),
    ("unknown-op", {}, [{"op": "merge", "path": "/a"}], PatchError,
     'operation 0: unknown op "merge"; expected one of add, remove, replace, move, copy, test'),
    ("missing-op", {}, [{"path": "/a"}], PatchError, "unknown op null"),
    ("missing-path", {}, [{"op": "remove"}], PatchError, 'operation 0 (remove): missing "path"'),
    ("missing-value", {}, [{"op": "add", "path": "/a"}], PatchError, 'missing "value"'),
    ("missing-from", {}, [{"op": "copy", "path": "/a"}], PatchError, 'missing "from"'),
    ("move-into-child", {"a": {"b": {}}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}],
     PatchError, "cannot be moved into its own child"),
    ("move-missing", {}, [{"op": "move", "from": "/x", "path": "/y"}],
     PatchError, 'move operation does not apply: doc is missing path: "/x"'),
    ("operation-not-object", {}, ["add"], PatchError, "operation 0: must be an object"),
    ("body-is-object", {}, {"op": "add", "path": "/a", "value": 1}, PatchError,
     "a JSON patch must be a list of operations, got object"),
    ("body-is-null", {}, None, PatchError, "got null"),
    ("second-op-fails", {"a": 1}, [{"op": "remove", "path": "/a"},
                                   {"op": "remove", "path": "/a"}],
     PatchError, "remove operation does not apply"),
]


@pytest.mark.parametrize(("doc", "ops", "error", "message"), [c[1:] for c in JSON_BAD],
                         ids=[c[0] for c in JSON_BAD])
def test_json_patch_rejects(doc: Any, ops: Any, error: type[PatchError], message: str) -> None:
    doc_before = copy.deepcopy(doc)
    with pytest.raises(error) as info:
        patch.json_patch(doc, ops)
    assert message in str(info.value)
    assert doc == doc_before


def test_json_patch_test_failure_is_patch_error() -> None:
    assert issubclass(PatchTestFailed, PatchError)


def test_repeated_copies_stop_at_the_copy_bound() -> None:
    # each copy doubles the spec: thirty would ask for a terabyte
    doc = {"spec": {"a": "x" * 1000}}
    bomb = [{"op": "copy", "from": "/spec", "path": f"/spec/k{i}"} for i in range(30)]
    with pytest.raises(PatchError, match="copy operations of the patch add more than 3145728"):
        patch.json_patch(doc, bomb)
    small = patch.json_patch(doc, bomb[:5], max_copy_bytes=None)
    assert len(small["spec"]) == 6
    with pytest.raises(PatchError, match="add more than 10000 bytes"):
        patch.json_patch(doc, bomb[:5], max_copy_bytes=10_000)


def test_moving_array_elements_stops_at_the_shift_bound() -> None:
    doc = {"a": list(range(1000))}
    head = [{"op": "remove", "path": "/a/0"}] * 100  # moves 999 + 998 + ... + 900 elements
    with pytest.raises(PatchError, match="move more than 50000 array elements"):
        patch.json_patch(doc, head, max_shifted_elements=50_000)
    assert patch.json_patch(doc, head, max_shifted_elements=94_950)["a"] == \
        list(range(100, 1000))
    tail = [{"op": "remove", "path": "/a/999"}, {"op": "add", "path": "/a/-", "value": 7}]
    assert patch.json_patch(doc, tail * 100, max_shifted_elements=0)["a"][-1] == 7
    move = [{"op": "move", "from": "/a/0", "path": "/a/1"}]  # out (999), back in (998)
    with pytest.raises(PatchError, match="move more than 1996 array elements"):
        patch.json_patch(doc, move * 2, max_shifted_elements=1996)


def test_json_patch_shares_nothing() -> None:
    value = {"x": [1]}
    doc = {"a": {"b": [1]}}
    got = patch.json_patch(doc, [{"op": "add", "path": "/v", "value": value}])
    got["v"]["x"].append(2)
    got["a"]["b"].append(2)
    assert value == {"x": [1]}
    assert doc == {"a": {"b": [1]}}


# --- strategic merge patch: apimachinery's test schema -----------------------------------------

# mergeItem: mergingList merges by name and nests further mergeItems; mergingIntList merges as
# a set; nonMergingList and nonMergingIntList are replaced; retainKeysMap holds lists too.
SCHEMA = {
    "mergingList": "name",
    "mergingIntList": "",
    "mergingList.mergingList": "name",
    "mergingList.mergingIntList": "",
    "mergingList.mergingList.mergingList": "name",
    "retainKeysMap.mergingList": "name",
    "retainKeysMap.mergingIntList": "",
    "retainKeysMergingList": "name",
}

# (id, original, patch, result) in YAML
SMP: list[tuple[str, str, str, str]] = [
    ("nested-patch-merge-with-empty-list",
     "name: hello\nmergingList:\n- name: a\n  value: 1\n",
     "$setElementOrder/mergingList:\n- name: a\nmergingList:\n- name: a\n  mergingList: []\n",
     "name: hello\nmergingList:\n- name: a\n  value: 1\n  mergingList: []\n"),
    ("delete-items-in-list-of-scalars",
     "mergingIntList: [1, 2, 3, 4]",
     "$setElementOrder/mergingIntList: [1, 2]\n$deleteFromPrimitiveList/mergingIntList: [3]",
     "mergingIntList: [1, 2, 4]"),
    ("delete-all-duplicates-in-list-of-scalars",
     "mergingIntList: [1, 2, 3, 3, 4]",
     "$setElementOrder/mergingIntList: [1, 2]\n$deleteFromPrimitiveList/mergingIntList: [3]",
     "mergingIntList: [1, 2, 4]"),
    ("add-and-delete-items-in-list-of-scalars",
     "mergingIntList: [1, 2, 3]",
     "$setElementOrder/mergingIntList: [1, 2, 4]\n"
     "$deleteFromPrimitiveList/mergingIntList: [3]\nmergingIntList: [4]",
     "mergingIntList: [1, 2, 4]"),
    ("merge-lists-of-maps",
     "mergingList:\n- {name: 1, other: a}\n- {name: 2, value: 2, other: b}\n",
     "$setElementOrder/mergingList: [{name: 4}, {name: 1}, {name: 2}, {name: 3}]\n"
     "mergingList:\n- {name: 4, value: 4}\n- {name: 3, value: 3}\n",
     "mergingList:\n- {name: 4, value: 4}\n- {name: 1, other: a}\n"
     "- {name: 2, value: 2, other: b}\n- {name: 3, value: 3}\n"),
    ("add-field-to-map-in-merging-list",
     "mergingList:\n- {name: 1, other: a}\n- {name: 2, value: 2}\n",
     "$setElementOrder/mergingList: [{name: 1}, {name: 2}]\n"
     "mergingList:\n- {name: 1, value: 1}\n",
     "mergingList:\n- {name: 1, value: 1, other: a}\n- {name: 2, value: 2}\n"),
    ("delete-map-from-merging-list",
     "mergingList:\n- {name: 1}\n- {name: 2, other: b}\n",
     "$setElementOrder/mergingList: [{name: 2}]\nmergingList:\n- {name: 1, $patch: delete}\n",
     "mergingList:\n- {name: 2, other: b}\n"),
    ("delete-missing-map-from-merging-list",
     "mergingList:\n- {name: 2, other: b}\n",
     "$setElementOrder/mergingList: [{name: 2}]\nmergingList:\n- {name: 1, $patch: delete}\n",
     "mergingList:\n- {name: 2, other: b}\n"),
    ("add-map-and-delete-map-from-merging-list",
     "mergingList:\n- {name: 1}\n- {name: 2, other: b}\n- {name: 4, other: c}\n",
     "$setElementOrder/mergingList: [{name: 2}, {name: 3}]\n"
     "mergingList:\n- {name: 3}\n- {name: 1, $patch: delete}\n",
     "mergingList:\n- {name: 2, other: b}\n- {name: 4, other: c}\n- {name: 3}\n"),
    ("delete-field-from-map-in-merging-list",
     "mergingList:\n- {name: 1, value: 1, other: a}\n- {name: 2, value: 2}\n",
     "$setElementOrder/mergingList: [{name: 1}, {name: 2}]\n"
     "mergingList:\n- {name: 1, value: null}\n",
     "mergingList:\n- {name: 1, other: a}\n- {name: 2, value: 2}\n"),
    ("replace-non-merging-list-nested-in-merging-list",
     "mergingList:\n- name: 1\n  other: a\n  nonMergingList:\n  - {name: 1}\n"
     "  - {name: 2, value: 2}\n- {name: 2}\n",
     "$setElementOrder/mergingList: [{name: 1}, {name: 2}]\n"
     "mergingList:\n- name: 1\n  nonMergingList:\n  - {name: 1, value: 1}\n",
     "mergingList:\n- name: 1\n  other: a\n  nonMergingList:\n  - {name: 1, value: 1}\n"
     "- {name: 2}\n"),
    ("add-field-in-merging-list-nested-in-merging-list",
     "mergingList:\n- name: 1\n  mergingList:\n  - {name: 1}\n  - {name: 2, value: 2}\n"
     "- {name: 2}\n",
     "$setElementOrder/mergingList: [{name: 1}, {name: 2}]\n"
     "mergingList:\n- name: 1\n  $setElementOrder/mergingList: [{name: 1}, {name: 2}]\n"
     "  mergingList:\n  - {name: 1, value: 1}\n",
     "mergingList:\n- name: 1\n  mergingList:\n  - {name: 1, value: 1}\n"
     "  - {name: 2, value: 2}\n- {name: 2}\n"),
    ("merge-lists-of-scalars-with-order",
     "mergingIntList: [1, 2, 4]",
     "$setElementOrder/mergingIntList: [1, 2, 3]\nmergingIntList: [3]",
     "mergingIntList: [1, 2, 3, 4]"),
    ("add-item-to-int-list-and-preserve-order",
     "mergingIntList: [1, 4, 2]",
     "$setElementOrder/mergingIntList: [3, 1, 2]\nmergingIntList: [3]",
     "mergingIntList: [3, 1, 4, 2]"),
    ("delete-item-from-int-list-and-preserve-order",
     "mergingIntList: [1, 2, 3]",
     "$setElementOrder/mergingIntList: [2, 1]\n$deleteFromPrimitiveList/mergingIntList: [3]",
     "mergingIntList: [2, 1]"),
    ("set-elements-order",
     "mergingList:\n- {name: 1, other: a}\n- {name: 3, value: 3}\n- {name: 4, value: 4}\n"
     "- {name: 2, value: 2}\n",
     "$setElementOrder/mergingList: [{name: 4}, {name: 2}, {name: 3}, {name: 1}]",
     "mergingList:\n- {name: 4, value: 4}\n- {name: 2, value: 2}\n- {name: 3, value: 3}\n"
     "- {name: 1, other: a}\n"),
    ("set-elements-order-with-server-only-items",
     "mergingList:\n- {name: 1, other: a}\n- {name: 2, value: 2}\n- {name: 7}\n- {name: 9}\n"
     "- {name: 8}\n- {name: 3, value: 3}\n- {name: 4, value: 4}\n",
     "$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}]",
     "mergingList:\n- {name: 2, value: 2}\n- {name: 1, other: a}\n- {name: 7}\n- {name: 9}\n"
     "- {name: 8}\n- {name: 4, value: 4}\n- {name: 3, value: 3}\n"),
    ("set-element-order-names-missing-item",
     "mergingList:\n- {name: 1}\n- {name: 3}\n",
     "$setElementOrder/mergingList: [{name: 3}, {name: 2}, {name: 1}]\n"
     "mergingList:\n- {name: 3, value: 3}\n- {name: 1, value: 1}\n",
     "mergingList:\n- {name: 3, value: 3}\n- {name: 1, value: 1}\n"),
    ("set-element-order-on-int-list-only",
     "mergingIntList: [1, 3]",
     "$setElementOrder/mergingIntList: [3, 2, 1]",
     "mergingIntList: [3, 1]"),
    ("delete-from-primitive-list-missing-item", "mergingIntList: [1, 2]",
     "$deleteFromPrimitiveList/mergingIntList: [3]", "mergingIntList: [1, 2]"),
    ("delete-from-primitive-list-missing-list", "foo: [bar]",
     "$deleteFromPrimitiveList/mergingIntList: [3]", "foo: [bar]"),
    ("delete-from-primitive-list-null-list", "mergingIntList:",
     "$deleteFromPrimitiveList/mergingIntList: [3]", "mergingIntList:"),
    ("delete-from-non-merging-list", "nonMergingIntList: [1, 2, 3]",
     "$deleteFromPrimitiveList/nonMergingIntList: [2]", "nonMergingIntList: [1, 3]"),
    ("non-merging-list-replaced", "nonMergingIntList: [1, 2]", "nonMergingIntList: [3]",
     "nonMergingIntList: [3]"),
    ("merging-list-replace-directive",
     "mergingList:\n- {name: 1, value: a}\n- {name: 2}\n",
     "mergingList:\n- {name: 3}\n- {$patch: replace}\n",
     "mergingList:\n- {name: 3}\n"),
    ("map-replace-directive", "simpleMap: {a: '1', b: '2'}",
     "simpleMap: {$patch: replace, c: '3'}", "simpleMap: {c: '3'}"),
    ("map-delete-directive", "simpleMap: {a: '1'}\nname: x", "simpleMap: {$patch: delete}",
     "simpleMap: {}\nname: x"),
    ("map-delete-directive-on-missing-map", "name: x", "simpleMap: {$patch: delete}",
     "name: x"),
    ("map-merge-directive-is-default", "simpleMap: {a: '1'}",
     "simpleMap: {$patch: merge, b: '2'}", "simpleMap: {a: '1', b: '2'}"),
    ("whole-object-replace", "name: x\nvalue: y", "$patch: replace\nother: z", "other: z"),
    ("whole-object-delete", "name: x", "$patch: delete", "{}"),
    ("retain-keys-clears-defaulted-field", "retainKeysMap: {value: foo}",
     "retainKeysMap:\n  $retainKeys: [other]\n  other: bar\n", "retainKeysMap: {other: bar}"),
    ("retain-keys-discriminated-union", "retainKeysMap: {name: type1, value: foo}",
     "retainKeysMap:\n  $retainKeys: [name, other]\n  name: type2\n  other: bar\n",
     "retainKeysMap: {name: type2, other: bar}"),
    ("retain-keys-adds-a-field", "retainKeysMap: {name: foo, other: a}",
     "retainKeysMap:\n  $retainKeys: [name, value]\n  value: bar\n",
     "retainKeysMap: {name: foo, value: bar}"),
    ("retain-keys-deletes-a-field", "retainKeysMap: {name: foo, value: bar}",
     "retainKeysMap:\n  $retainKeys: [name]\n  value: null\n", "retainKeysMap: {name: foo}"),
    ("retain-keys-in-list-element",
     "retainKeysMergingList:\n- {name: 1}\n- {name: 2, value: a, other: b}\n",
     "$setElementOrder/retainKeysMergingList: [{name: 1}, {name: 2}]\n"
     "retainKeysMergingList:\n- {name: 2, $retainKeys: [name, value], value: c}\n",
     "retainKeysMergingList:\n- {name: 1}\n- {name: 2, value: c}\n"),
    ("new-subtree-drops-nulls-and-directives", "name: x",
     "mergingList:\n- {name: 1, value: null}\n- {name: 2, $patch: delete}\n",
     "name: x\nmergingList:\n- {name: 1}\n"),
    ("type-change-replaces", "mergingList: abc", "mergingList:\n- {name: 1}\n",
     "mergingList:\n- {name: 1}\n"),
    ("null-deletes", "name: x\nvalue: y", "value: null", "name: x"),
    ("null-for-missing-key", "name: x", "value: null", "name: x"),
]


def _yaml(text: str) -> Any:
    value = yaml.safe_load(text)
    return {} if value is None else value


@pytest.mark.parametrize(("original", "body", "want"), [c[1:] for c in SMP],
                         ids=[c[0] for c in SMP])
def test_strategic_merge_patch(original: str, body: str, want: str) -> None:
    target, patch_body = _yaml(original), _yaml(body)
    target_before, body_before = copy.deepcopy(target), copy.deepcopy(patch_body)
    assert patch.strategic_merge_patch(target, patch_body, merge_keys=SCHEMA) == _yaml(want)
    assert target == target_before
    assert patch_body == body_before


SMP_BAD: list[tuple[str, str, str, str]] = [
    ("order-mismatch-maps",
     "mergingList:\n- {name: 1}\n- {name: 3}\n- {name: 2}\n",
     "$setElementOrder/mergingList: [{name: 1}, {name: 2}, {name: 3}]\n"
     "mergingList:\n- {name: 3, value: 3}\n- {name: 1, value: 1}\n",
     "doesn't match $setElementOrder list"),
    ("order-mismatch-ints", "mergingIntList: [1, 3, 2]",
     "$setElementOrder/mergingIntList: [1, 2, 3]\nmergingIntList: [3, 1]", "doesn't match"),
    ("missing-merge-key", "mergingList:\n- {name: 1, value: a}\n",
     "mergingList:\n- {value: b}\n", "does not contain declared merge key: name"),
    ("delete-without-merge-key", "mergingList:\n- {name: 1}\n",
     "mergingList:\n- {$patch: delete}\n", "does not contain declared merge key: name"),
    ("merge-directive-in-list", "mergingList:\n- {name: 1}\n",
     "mergingList:\n- {name: 2}\n- {$patch: merge}\n",
     "merging lists cannot yet be specified in the patch"),
    ("unknown-directive-in-list", "mergingList:\n- {name: 1}\n",
     "mergingList:\n- {name: 1, $patch: frobnicate}\n", 'unknown patch type: "frobnicate"'),
    ("unknown-directive-in-map", "simpleMap: {a: '1'}", "simpleMap: {$patch: frobnicate}",
     'unknown patch type: "frobnicate"'),
    ("objects-in-list-without-merge-key", "nonMergingList:\n- {name: 1}\n",
     "$deleteFromPrimitiveList/nonMergingList:\n- {name: 1}\n",
     "cannot merge lists without merge key for nonMergingList"),
    ("mixed-element-types", "mergingIntList: [1, 2]", "mergingIntList: [a]",
     "list element types are not identical"),
    ("list-of-lists", "mergingIntList: [[1]]", "mergingIntList: [[2]]",
     "lists of lists are not supported"),
    ("retain-keys-not-a-list", "retainKeysMap: {name: a}", "retainKeysMap: {$retainKeys: name}",
     "invalid patch format of retainKeys"),
    ("retain-keys-missing-patched-key", "retainKeysMap: {name: a}",
     "retainKeysMap: {$retainKeys: [name], value: b}", "invalid patch format of retainKeys"),
    ("bad-delete-from-primitive-list-key", "mergingIntList: [1]",
     "$deleteFromPrimitiveListmergingIntList: [1]", "invalid patch format of primitive list"),
    ("bad-set-element-order-key", "mergingIntList: [1]", "$setElementOrder: [1]",
     "invalid patch format of setElementOrder list"),
    ("set-element-order-not-a-list", "mergingIntList: [1]",
     "$setElementOrder/mergingIntList: 1", "invalid patch format of setElementOrder list"),
]


@pytest.mark.parametrize(("original", "body", "message"), [c[1:] for c in SMP_BAD],
                         ids=[c[0] for c in SMP_BAD])
def test_strategic_merge_patch_rejects(original: str, body: str, message: str) -> None:
    target = _yaml(original)
    target_before = copy.deepcopy(target)
    with pytest.raises(PatchError) as info:
        patch.strategic_merge_patch(target, _yaml(body), merge_keys=SCHEMA)
    assert message in str(info.value)
    assert target == target_before


# --- strategic merge patch: the built-in kinds (default table) ---------------------------------

OWNER_A = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "uid-a"}
OWNER_B = {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "uid-b"}

BUILTIN: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ("configmap-data-merges",
     {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}},
     {"data": {"b": None, "c": "3"}},
     {"metadata": {"name": "c"}, "data": {"a": "1", "c": "3"}}),
    ("kubectl-apply-configmap",
     {"metadata": {"name": "c", "annotations": {"other": "x"}}, "data": {"a": "1"}},
     {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
      "data": {"a": "2"}},
     {"metadata": {"name": "c", "annotations": {
         "other": "x", "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
      "data": {"a": "2"}}),
    ("finalizers-merge-as-set",
     {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["b", "c"]}},
     {"metadata": {"finalizers": ["a", "b", "c"]}}),
    ("new-finalizer-goes-first-without-order",
     {"metadata": {"finalizers": ["a"]}}, {"metadata": {"finalizers": ["b"]}},
     {"metadata": {"finalizers": ["b", "a"]}}),
    ("finalizers-with-set-element-order",
     {"metadata": {"finalizers": ["a"]}},
     {"metadata": {"$setElementOrder/finalizers": ["a", "b"], "finalizers": ["b"]}},
     {"metadata": {"finalizers": ["a", "b"]}}),
    ("finalizers-delete-from-primitive-list",
     {"metadata": {"finalizers": ["a", "b", "c"]}},
     {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
     {"metadata": {"finalizers": ["a", "c"]}}),
    ("finalizers-null-removes-all",
     {"metadata": {"name": "x", "finalizers": ["a"]}}, {"metadata": {"finalizers": None}},
     {"metadata": {"name": "x"}}),
    ("finalizers-added-when-missing",
     {"metadata": {"name": "x"}}, {"metadata": {"finalizers": ["a"]}},
     {"metadata": {"name": "x", "finalizers": ["a"]}}),
    ("owner-references-merge-by-uid",
     {"metadata": {"ownerReferences": [OWNER_A]}},
     {"metadata": {"ownerReferences": [{**OWNER_A, "controller": True}, OWNER_B]}},
     {"metadata": {"ownerReferences": [{**OWNER_A, "controller": True}, OWNER_B]}}),
    ("owner-reference-delete-directive",
     {"metadata": {"ownerReferences": [OWNER_A, OWNER_B]}},
     {"metadata": {"ownerReferences": [{"uid": "uid-a", "$patch": "delete"}]}},
     {"metadata": {"ownerReferences": [OWNER_B]}}),
    ("namespace-spec-finalizers-are-atomic",
     {"spec": {"finalizers": ["kubernetes", "x"]}}, {"spec": {"finalizers": ["y"]}},
     {"spec": {"finalizers": ["y"]}}),
    ("labels-merge", {"metadata": {"labels": {"a": "1"}}},
     {"metadata": {"labels": {"a": None, "b": "2"}}}, {"metadata": {"labels": {"b": "2"}}}),
    ("secret-data-replace-directive",
     {"type": "Opaque", "data": {"a": "MQ==", "b": "Mg=="}},
     {"data": {"$patch": "replace", "c": "Mw=="}},
     {"type": "Opaque", "data": {"c": "Mw=="}}),
]


@pytest.mark.parametrize(("target", "body", "want"), [c[1:] for c in BUILTIN],
                         ids=[c[0] for c in BUILTIN])
def test_strategic_merge_patch_builtin(target: dict[str, Any], body: dict[str, Any],
                                       want: dict[str, Any]) -> None:
    target_before, body_before = copy.deepcopy(target), copy.deepcopy(body)
    assert patch.strategic_merge_patch(target, body) == want
    assert target == target_before
    assert body == body_before


def test_strategic_merge_patch_shares_nothing() -> None:
    target = {"metadata": {"finalizers": ["a"], "labels": {"x": "1"}}}
    body = {"metadata": {"finalizers": ["b"]}, "data": {"k": "v"}}
    got = patch.strategic_merge_patch(target, body)
    got["metadata"]["finalizers"].append("z")
    got["metadata"]["labels"]["y"] = "2"
    got["data"]["k2"] = "v2"
    assert target == {"metadata": {"finalizers": ["a"], "labels": {"x": "1"}}}
    assert body == {"metadata": {"finalizers": ["b"]}, "data": {"k": "v"}}


def test_strategic_merge_patch_rejects_non_objects() -> None:
    with pytest.raises(PatchError, match="must be JSON objects"):
        patch.strategic_merge_patch({}, [{"op": "add"}])  # type: ignore[arg-type]


@pytest.mark.parametrize("body", [
    {"metadata": {"finalizers": [f"new/{i}" for i in range(2000)]}},
    {"metadata": {"ownerReferences": [{"uid": f"v{i}", "name": "y"} for i in range(2000)]}},
    {"metadata": {"$deleteFromPrimitiveList/finalizers": [f"old/{i}" for i in range(2000)]}},
    {"metadata": {"$setElementOrder/finalizers": [f"old/{i}" for i in range(2000)],
                  "finalizers": ["old/1"]}},
], ids=["finalizers", "owner-references", "delete-from-primitive-list", "set-element-order"])
def test_merging_long_lists_stops_at_the_work_bound(body: dict[str, Any]) -> None:
    # merging lists compares each element with each: two lists of 2,000 held the caller
    # for about fifteen seconds
    target = {"metadata": {
        "finalizers": [f"old/{i}" for i in range(2000)],
        "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "x", "uid": f"u{i}"}
                            for i in range(2000)]}}
    with pytest.raises(PatchError, match=r"^the lists merged at metadata\.(finalizers|"
                       r"ownerReferences) are too long: a strategic merge patch may compare "
                       r"list elements at most 100000 times$"):
        patch.strategic_merge_patch(target, body)


def test_lists_within_the_work_bound_merge() -> None:
    target = {"metadata": {"finalizers": [f"old/{i}" for i in range(100)]}}
    body = {"metadata": {"finalizers": [f"new/{i}" for i in range(100)]}}
    merged = patch.strategic_merge_patch(target, body)
    assert sorted(merged["metadata"]["finalizers"]) == sorted(
        [*(f"old/{i}" for i in range(100)), *(f"new/{i}" for i in range(100))])
    with pytest.raises(PatchError, match="at most 39999 times"):
        patch.strategic_merge_patch(target, body, max_work=39_999)  # (100 + 100) ** 2
    assert patch.strategic_merge_patch(target, body, max_work=40_000) == merged


def test_default_merge_keys_are_read_only() -> None:
    with pytest.raises(TypeError):
        patch.DEFAULT_MERGE_KEYS["spec.x"] = "y"  # type: ignore[index]


def test_copies_nesting_the_result_too_deep_to_walk_are_a_patch_error() -> None:
    # each copy of /x to its own deepest point doubles its depth: a few hundred bytes of
    # copies, far inside the copy bound, make a result no recursive walk can take
    ops: list[Any] = [{"op": "add", "path": "/x", "value": {"a": {}}}]
    ops += [{"op": "copy", "from": "/x", "path": "/x" + "/a" * (2 ** k)} for k in range(15)]
    with pytest.raises(patch.PatchError, match="nests deeper than 128 levels"):
        patch.json_patch({}, ops)
