"""How an operator's hooks read a review: any bytes are a JSON document nested at most
``MAX_REVIEW_DEPTH`` levels, or ``BadReview`` (a 400), never another exception."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import decoding
from setpoint.runtime import hookserver


def nested(levels: int) -> bytes:
    return b'{"a":' * levels + b"{}" + b"}" * levels


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.integers(0, 1200).map(nested),
                 st.integers(0, 1200).map(lambda n: b"[" * n + b"]" * n)))
def test_any_body_is_a_shallow_enough_document_or_a_bad_review(body: bytes) -> None:
    try:
        doc = hookserver.decode_review(body)
    except hookserver.BadReview as e:
        message = str(e)
        assert message.startswith(("not JSON: ", "the review nests deeper than"))
        return
    assert decoding.too_deep(doc, hookserver.MAX_REVIEW_DEPTH) is None


def test_the_bound_is_on_the_review_as_a_whole() -> None:
    assert hookserver.decode_review(nested(hookserver.MAX_REVIEW_DEPTH - 1)) is not None
    with pytest.raises(hookserver.BadReview) as caught:
        hookserver.decode_review(nested(hookserver.MAX_REVIEW_DEPTH))
    assert str(caught.value) == "the review nests deeper than 256 levels"
    with pytest.raises(hookserver.BadReview) as caught:
        hookserver.decode_review(b'{"a": ')
    assert str(caught.value).startswith("not JSON: ")
    assert hookserver.decode_review(orjson.dumps({"request": {"uid": "u"}})) == \
        {"request": {"uid": "u"}}
