"""Patch-type selection and applying a patch: the one dispatcher behind PATCH, and a PATCH
through a real store."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors, patch
from setpoint.registry.options import WriteOptions
from setpoint.registry.patching import (
    PATCH_APPLY,
    PATCH_APPLY_CBOR,
    PATCH_JSON,
    PATCH_MERGE,
    PATCH_STRATEGIC,
    apply_patch,
    check_patch_type,
)

from .storefixture import configmap, configmap_store

ALL_TYPES = (PATCH_JSON, PATCH_MERGE, PATCH_STRATEGIC, PATCH_APPLY, PATCH_APPLY_CBOR)
ACCEPTED = ("the body of the request was in an unknown format - accepted media types include: "
            f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}")
ACCEPTED_STRATEGIC = ("the body of the request was in an unknown format - accepted media types "
                      f"include: {PATCH_JSON}, {PATCH_MERGE}, {PATCH_STRATEGIC}, {PATCH_APPLY}")


def patched(base: dict[str, Any], patch_type: str, body: Any) -> dict[str, Any]:
    return apply_patch(base, patch_type, body, name="cm", group="", resource="configmaps",
                       merge_keys=patch.DEFAULT_MERGE_KEYS)


@pytest.mark.parametrize("patch_type", [*ALL_TYPES, "application/json", "text/plain"])
@pytest.mark.parametrize("strategic", [False, True])
@pytest.mark.parametrize("field_manager", ["", "kubectl"])
def test_which_patch_types_a_resource_takes(patch_type: str, strategic: bool,
                                            field_manager: str) -> None:
    # apply in CBOR is refused as any unknown type: setpoint does not decode CBOR
    refused_type = patch_type not in (PATCH_JSON, PATCH_MERGE, PATCH_APPLY) and not (
        strategic and patch_type == PATCH_STRATEGIC)
    refused_apply = patch_type == PATCH_APPLY and not field_manager
    if refused_type:
        with pytest.raises(errors.UnsupportedMediaType) as caught:
            check_patch_type(patch_type, strategic=strategic, field_manager=field_manager)
        assert str(caught.value) == (ACCEPTED_STRATEGIC if strategic else ACCEPTED)
    elif refused_apply:
        with pytest.raises(errors.BadRequest, match="fieldManager is required for apply"):
            check_patch_type(patch_type, strategic=strategic, field_manager=field_manager)
    else:
        check_patch_type(patch_type, strategic=strategic, field_manager=field_manager)


def test_each_patch_type_patches_as_its_kind() -> None:
    base = {"metadata": {"name": "cm"}, "spec": {"containers": [{"name": "a", "image": "x"}]},
            "data": {"a": "1", "b": "2"}}
    before = copy.deepcopy(base)
    assert patched(copy.deepcopy(base), PATCH_JSON, [
        {"op": "replace", "path": "/data/a", "value": "9"}])["data"] == {"a": "9", "b": "2"}
    assert patched(copy.deepcopy(base), PATCH_MERGE, {"data": {"b": None}})["data"] == \
        {"a": "1"}
    # merge patch replaces a list; strategic merge patch merges it by its merge key
    containers = {"spec": {"containers": [{"name": "b", "image": "y"}]}}
    assert patched(copy.deepcopy(base), PATCH_MERGE, containers)["spec"]["containers"] == \
        [{"name": "b", "image": "y"}]
    merged = apply_patch(copy.deepcopy(base), PATCH_STRATEGIC, containers, name="cm", group="",
                         resource="pods", merge_keys={"spec.containers": "name"})
    assert sorted(c["name"] for c in merged["spec"]["containers"]) == ["a", "b"]
    assert base == before


@pytest.mark.parametrize(("patch_type", "body", "message"), [
    (PATCH_JSON, {"op": "add"}, "the body of a json-patch must be a JSON array of operations, "
                                "got an object"),
    (PATCH_MERGE, [1], "the body of a merge patch must be a JSON object, got an array"),
    (PATCH_APPLY, "x", "the body of a apply patch must be a JSON object, got a string"),
    (PATCH_STRATEGIC, None, "the body of a strategic merge patch must be a JSON object, got "
                            "null"),
    (PATCH_JSON, [{"op": "replace", "path": "", "value": 1}],
     "the patched object must be a JSON object"),
])
def test_a_body_of_the_wrong_shape_is_a_bad_request(patch_type: str, body: Any,
                                                    message: str) -> None:
    with pytest.raises(errors.BadRequest) as caught:
        patched({"metadata": {}}, patch_type, body)
    assert str(caught.value) == message


def test_a_json_patch_that_cannot_apply_is_invalid_on_patch() -> None:
    with pytest.raises(errors.Invalid) as caught:
        patched({"metadata": {}}, PATCH_JSON, [{"op": "remove", "path": "/data/none"}])
    details = caught.value.details
    assert details["kind"] == "configmaps"
    assert details["name"] == "cm"
    assert [c["field"] for c in details["causes"]] == ["patch"]


def test_an_unknown_patch_type_is_unsupported() -> None:
    with pytest.raises(errors.UnsupportedMediaType) as caught:
        patched({}, "application/yaml", {})
    assert str(caught.value) == ACCEPTED


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=10)
operations = st.lists(st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"]),
     "path": st.sampled_from(["", "/", "/data", "/data/a", "/metadata/name", "/l/0", "/l/-"])},
    optional={"value": json_values, "from": st.sampled_from(["/data", "/l/0", "/nope"])}),
    max_size=4)


@given(st.sampled_from(ALL_TYPES), json_values | operations)
def test_any_patch_gives_an_object_or_an_api_error(patch_type: str, body: Any) -> None:
    base = {"metadata": {"name": "cm"}, "data": {"a": "1"}, "l": [1, 2]}
    before = copy.deepcopy(base)
    body_before = copy.deepcopy(body)
    result: dict[str, Any] | errors.ApiError
    try:
        result = patched(copy.deepcopy(base), patch_type, body)
    except errors.ApiError as e:
        result = e
    assert isinstance(result, dict) or result.code in (400, 415, 422)
    assert base == before
    assert body == body_before


async def test_a_patch_through_the_store_writes_once_and_keeps_what_it_does_not_name() -> None:
    async with configmap_store() as (store, _):
        created = await store.create("ns", configmap("cm", labels={"a": "1"}), "v1",
                                     WriteOptions())
        rv = created.object["metadata"]["resourceVersion"]
        result = await store.patch("ns", "cm", PATCH_MERGE, {"data": {"k2": "v2"}}, "v1",
                                   WriteOptions())
        assert result.object["data"] == {"k": "v", "k2": "v2"}
        assert result.object["metadata"]["labels"] == {"a": "1"}
        assert int(result.object["metadata"]["resourceVersion"]) > int(rv)
        # a patch that changes nothing writes nothing
        same = await store.patch("ns", "cm", PATCH_MERGE, {"data": {"k2": "v2"}}, "v1",
                                 WriteOptions())
        assert same.object["metadata"]["resourceVersion"] == \
            result.object["metadata"]["resourceVersion"]
        # a built-in kind takes strategic merge patches (the strategy says so)
        assert store.strategy.strategic_merge
        merged = await store.patch("ns", "cm", PATCH_STRATEGIC, {"data": {"k3": "v3"}}, "v1",
                                   WriteOptions())
        assert merged.object["data"] == {"k": "v", "k2": "v2", "k3": "v3"}
        with pytest.raises(errors.Conflict):
            await store.patch("ns", "cm", PATCH_MERGE,
                              {"metadata": {"resourceVersion": rv}, "data": {}}, "v1",
                              WriteOptions())
        with pytest.raises(errors.NotFound):
            await store.patch("ns", "other", PATCH_MERGE, {}, "v1", WriteOptions())


def test_copies_nesting_the_object_too_deep_to_walk_are_a_422_on_the_patch() -> None:
    ops: list[Any] = [{"op": "add", "path": "/x", "value": {"a": {}}}]
    ops += [{"op": "copy", "from": "/x", "path": "/x" + "/a" * (2 ** k)} for k in range(15)]
    base = configmap("cm")
    with pytest.raises(errors.Invalid) as caught:
        patched(base, PATCH_JSON, ops)
    assert caught.value.code == 422
    assert caught.value.details["causes"] == [{
        "reason": "FieldValueInvalid", "field": "patch",
        "message": "the patched object nests deeper than 128 levels"}]
    assert base == configmap("cm")
