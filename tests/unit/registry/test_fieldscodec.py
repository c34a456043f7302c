"""The remembered fieldsV1 encoding answers exactly what fieldpath answers, and stays
bounded."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from setpoint.apimachinery import fieldpath
from setpoint.registry.fieldscodec import FieldsCodec

_ELEMENT = hs.one_of(
    hs.builds(fieldpath.field, hs.sampled_from(["spec", "status", "a", "b", "metadata"])),
    hs.builds(fieldpath.index, hs.integers(0, 3)),
    hs.builds(fieldpath.value, hs.sampled_from(["x", 1, True])),
    hs.builds(lambda k: fieldpath.key({"name": k}), hs.sampled_from(["c1", "c2"])),
)
_SETS = hs.frozensets(hs.lists(_ELEMENT, min_size=1, max_size=4).map(tuple), max_size=12)


@given(hs.lists(_SETS, min_size=1, max_size=6))
def test_answers_are_fieldpaths_answers(sets: list[frozenset[Any]]) -> None:
    codec = FieldsCodec(max_sets=3)
    for fields in sets * 2:  # the second time round, some come from memory
        encoded = codec.encode(fields)
        assert encoded == fieldpath.to_fields_v1(fields)
        assert codec.decode(encoded) == fieldpath.from_fields_v1(encoded) == \
            fieldpath.from_fields_v1(fieldpath.to_fields_v1(fields))


def test_an_encoding_handed_out_is_the_callers() -> None:
    codec = FieldsCodec()
    fields = frozenset({fieldpath.path("spec", "a"), fieldpath.path("status")})
    first = codec.encode(fields)
    first["f:spec"]["f:changed"] = {}
    second = codec.encode(fields)
    assert second == fieldpath.to_fields_v1(fields)
    second.clear()
    assert codec.encode(fields) == fieldpath.to_fields_v1(fields)


@pytest.mark.parametrize("malformed", [[], "f:spec", {"f:spec": []}, {"k:notjson": {}},
                                       {"f:a": {"k:{": {}}}])
def test_malformed_input_fails_every_time(malformed: Any) -> None:
    codec = FieldsCodec()
    for _ in range(2):
        with pytest.raises(ValueError):  # noqa: PT011 - fieldpath's own error, any message
            codec.decode(malformed)


def test_memory_is_bounded() -> None:
    codec = FieldsCodec(max_sets=4, max_text_bytes=200)
    for i in range(50):
        fields = frozenset({fieldpath.path("spec", f"f{i}")})
        assert codec.decode(codec.encode(fields)) == fields
    huge = frozenset(fieldpath.path("spec", f"field-{i}") for i in range(100))
    assert codec.decode(codec.encode(huge)) == huge
    assert len(codec._sets) <= 4
    assert len(codec._texts) <= 4
    assert all(len(text) <= 200 for text in codec._texts.values())
    assert all(len(text) <= 200 for text in codec._sets)
