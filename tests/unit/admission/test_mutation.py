"""Mutations of MutatingAdmissionPolicies, without a server: what CEL builds and how it is
applied (JSON patches against the RFC 6902 reference, apply configurations over merge
types), and the bounds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.admission import expressions as ex
from setpoint.admission import mutation as mut
from setpoint.apimachinery import patch, typed
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.cel.objects import StructValue

DECL = ex.Declarations(has_params=True)
#: every operation CEL builds from the params, ``from`` only where the param has one
FROM_PARAMS = mut.compile_mutation(
    "params.map(o, JSONPatch{op: o.op, path: o.path, ?from: o.?from, value: o.value})",
    "JSONPatch", DECL)


def run(expression: ex.Expression, params: Any, obj: Any = None) -> Any:
    return ex.Evaluation({"params": params, "object": obj}, {}).run(expression)


keys = st.sampled_from(["a", "b", "c", "a/b", "m~n", "0", "1", "-"])
scalars = st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=3)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(keys, inner, max_size=3), max_leaves=8)
documents = st.dictionaries(keys, values, max_size=4)
pointers = st.lists(keys, max_size=3).map(
    lambda parts: "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)) \
    | st.sampled_from(["", "a", "/a/", "/~2", "/0/-"])
operations = st.builds(
    lambda op, path, source, value: {"op": op, "path": path, "value": value,
                                     **({"from": source} if op in ("copy", "move") else {})},
    st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "nope"]),
    pointers, pointers, values)


@settings(max_examples=300, deadline=None)
@given(documents, st.lists(operations, max_size=5))
def test_a_json_patch_built_in_cel_applies_as_the_reference(doc: dict[str, Any],
                                                            ops: list[dict[str, Any]]) -> None:
    built = run(FROM_PARAMS, ops)
    before = deep_copy(doc)
    try:
        expected: Any = patch.json_patch(doc, ops)
    except patch.PatchTestFailed:
        expected = doc
    except patch.PatchError:
        expected = None
    if expected is None or not isinstance(expected, dict):
        with pytest.raises(mut.MutationError):
            mut.apply_json_patch(doc, built)
    else:
        assert mut.apply_json_patch(doc, built) == expected
    assert doc == before  # the input is never changed


def test_json_patch_results_must_be_json_patch_values() -> None:
    with pytest.raises(mut.MutationError, match="should evaluate to array"):
        mut.apply_json_patch({}, {"op": "add"})
    with pytest.raises(mut.MutationError, match="array of JSONPatch"):
        mut.apply_json_patch({}, [{"op": "add", "path": "/a", "value": 1}])


def test_the_mutation_expression_type_is_checked() -> None:
    with pytest.raises(ex.CompileError, match="must evaluate to Object"):
        mut.compile_mutation("Object.spec{}", "ApplyConfiguration", DECL)
    with pytest.raises(ex.CompileError, match=r"must evaluate to list\(JSONPatch\)"):
        mut.compile_mutation("JSONPatch{}", "JSONPatch", DECL)
    assert mut.compile_mutation('Object{spec: Object.spec{x: [1]}}', "ApplyConfiguration",
                                DECL).type.name == "Object"


SPEC = typed.object_type({"spec": typed.struct({
    "containers": typed.map_list(typed.struct({"name": typed.SCALAR}), ("name",)),
    "selector": typed.map_of(typed.SCALAR, atomic=True),
    "args": typed.atomic_list(typed.SCALAR)})})


def apply(expression: str, obj: dict[str, Any]) -> dict[str, Any]:
    compiled = mut.compile_mutation(expression, "ApplyConfiguration", DECL)
    return mut.apply_configuration(obj, run(compiled, None, obj), SPEC)


def test_apply_configuration_merges_maps_and_keyed_lists_and_replaces_atomic_lists() -> None:
    obj = {"spec": {"containers": [{"name": "a", "image": "1"}], "args": ["x"], "n": 1}}
    out = apply("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'b'}, "
                "Object.spec.containers{name: 'a', port: 80}], args: ['y'], m: 2}}", obj)
    # items merge by key, in the configuration's order (structured-merge-diff's)
    assert out == {"spec": {"containers": [{"name": "b"},
                                           {"name": "a", "image": "1", "port": 80}],
                            "args": ["y"], "n": 1, "m": 2}}
    assert obj["spec"]["args"] == ["x"]


def test_apply_configuration_refuses_atomic_structs_and_misnamed_types() -> None:
    with pytest.raises(mut.MutationError, match=r"may not mutate atomic arrays, maps or "
                                                r"structs: \.spec\.selector"):
        apply("Object{spec: Object.spec{selector: {'a': 'b'}}}", {})
    with pytest.raises(mut.MutationError, match="type mismatch"):
        apply("Object{spec: Object.metadata{}}", {})
    with pytest.raises(mut.MutationError, match="duplicate entries"):
        apply("Object{spec: Object.spec{containers: [Object.spec.containers{name: 'a'}, "
              "Object.spec.containers{name: 'a'}]}}", {})


def test_results_are_bounded() -> None:
    big = mut.compile_mutation("[JSONPatch{op: 'add', path: '/a', value: params}]",
                               "JSONPatch", DECL)
    with pytest.raises(mut.MutationError, match="larger than"):
        mut.apply_json_patch({}, run(big, "x" * (mut.MAX_RESULT_BYTES + 1)))


@settings(max_examples=300, deadline=None)
@given(documents, documents)
def test_any_apply_configuration_merges_or_fails_cleanly(doc: dict[str, Any],
                                                         config: dict[str, Any]) -> None:
    before, given_config = deep_copy(doc), deep_copy(config)
    value = StructValue("Object", dict(config))
    try:
        out = mut.apply_configuration(doc, value, SPEC)
    except mut.MutationError:
        pass
    else:
        assert isinstance(out, dict)
        # what the configuration sets is in the result (lists of unkeyed specs replaced)
        for key, v in config.items():
            if not isinstance(v, dict | list):
                assert out[key] == v
    assert doc == before
    assert config == given_config
