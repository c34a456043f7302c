"""Reads through a real store: the resourceVersion query parameter, and a paginated LIST that
shows one snapshot across its pages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.registry import continuetokens
from setpoint.registry.options import ListOptions, WriteOptions
from setpoint.registry.reads import parse_resource_version

from .storefixture import configmap, configmap_store


@given(st.text(max_size=100))
def test_a_resource_version_is_a_revision_or_a_bad_request(text: str) -> None:
    result: int | errors.ApiError
    try:
        result = parse_resource_version(text)
    except errors.BadRequest as e:
        result = e
    if isinstance(result, int):
        assert 0 <= result < 2**64
        assert text.isascii()
        assert int(text) == result  # leading zeros allowed, as Go's ParseUint
    else:
        assert str(result).startswith("resourceVersion: Invalid value: ")
        assert len(str(result)) < 300  # a huge value is shown cut short


@pytest.mark.parametrize("text", ["", "-1", "+1", "1.0", " 1", "1_000", "abc", "\u0661",
                                  "1" * 30, str(2**64)])
def test_what_is_not_a_canonical_revision(text: str) -> None:
    with pytest.raises(errors.BadRequest):
        parse_resource_version(text)


async def test_the_pages_of_a_list_show_one_snapshot() -> None:
    async with configmap_store() as (store, _):
        for i in range(5):
            await store.create("ns", configmap(f"cm{i}"), "v1", WriteOptions())
        first = await store.list("ns", "v1", ListOptions(limit=2))
        assert [o["metadata"]["name"] for o in first.items] == ["cm0", "cm1"]
        assert first.remaining == 3
        assert continuetokens.decode(first.continue_token,
                                     "/registry/core/configmaps/ns/") == (
            first.resource_version, "/registry/core/configmaps/ns/cm1")
        # written after the first page: not in the later ones, which read the same revision
        await store.create("ns", configmap("cm2a"), "v1", WriteOptions())
        names = [o["metadata"]["name"] for o in first.items]
        token = first.continue_token
        while token:
            page = await store.list("ns", "v1", ListOptions(limit=2, continue_token=token))
            assert page.resource_version == first.resource_version
            names += [o["metadata"]["name"] for o in page.items]
            token = page.continue_token
        assert names == ["cm0", "cm1", "cm2", "cm3", "cm4"]
        latest = await store.list("ns", "v1", ListOptions())
        assert len(latest.items) == 6
        assert latest.continue_token == ""


async def test_a_token_of_another_list_is_refused() -> None:
    async with configmap_store() as (store, _):
        for i in range(3):
            await store.create("ns", configmap(f"cm{i}"), "v1", WriteOptions())
        page = await store.list("ns", "v1", ListOptions(limit=1))
        with pytest.raises(errors.BadRequest, match="not a key of this list"):
            await store.list("other", "v1", ListOptions(limit=1,
                                                       continue_token=page.continue_token))
