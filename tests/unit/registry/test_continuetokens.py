"""Continue tokens: what the server makes decodes back exactly; anything else a client sends
is a 400 with Kubernetes' wording, never another error."""

from __future__ import annotations

import base64

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors
from setpoint.registry import continuetokens

PREFIX = "/registry/core/configmaps/"

keys = st.text(min_size=1, max_size=200).filter(lambda k: "\x00" not in k).map(
    lambda k: PREFIX + k)
revisions = st.integers(min_value=1, max_value=2**63 - 1)


def token_of(data: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(data)).decode().rstrip("=")


def outcome(token: str) -> tuple[int, str] | errors.ApiError:
    """What decoding ``token`` gives: its page, or the error it is refused with."""
    try:
        return continuetokens.decode(token, PREFIX)
    except errors.BadRequest as e:
        return e


def assert_page_or_refused(result: tuple[int, str] | errors.ApiError) -> None:
    if isinstance(result, errors.ApiError):
        assert result.code == 400
        assert str(result).startswith("continue key is not valid: ")
    else:  # still a token of this list: a revision and a key under the prefix
        assert result[0] > 0
        assert result[1].startswith(PREFIX)
        assert result[1] != PREFIX


@given(revisions, keys)
def test_a_token_decodes_to_what_it_was_made_of(revision: int, key: str) -> None:
    token = continuetokens.encode(revision, key)
    assert "=" not in token
    assert continuetokens.decode(token, PREFIX) == (revision, key)


@given(revisions, keys, st.data())
def test_a_changed_token_decodes_to_the_same_page_or_is_refused(
        revision: int, key: str, data: st.DataObject) -> None:
    token = continuetokens.encode(revision, key)
    at = data.draw(st.integers(min_value=0, max_value=len(token) - 1))
    char = data.draw(st.characters(codec="ascii"))
    assert_page_or_refused(outcome(token[:at] + char + token[at + 1:]))


@given(st.text(max_size=300))
def test_any_text_is_a_token_or_a_bad_request(token: str) -> None:
    assert_page_or_refused(outcome(token))


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=20),
                    lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(st.sampled_from(["v", "rv", "start", "x"]), children,
                                      max_size=4), max_leaves=12))
def test_any_json_inside_is_a_token_or_a_bad_request(data: object) -> None:
    try:
        token = token_of(data)
    except TypeError:  # an integer orjson cannot write: not a token anyone could send
        return
    assert_page_or_refused(outcome(token))


@pytest.mark.parametrize(("data", "why"), [
    ({"v": "meta.k8s.io/v2", "rv": 5, "start": PREFIX + "a"},
     'server does not recognize this encoded version "meta.k8s.io/v2"'),
    ({"rv": 5, "start": PREFIX + "a"}, "server does not recognize this encoded version null"),
    ({"v": "meta.k8s.io/v1", "rv": 0, "start": PREFIX + "a"},
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    ({"v": "meta.k8s.io/v1", "rv": True, "start": PREFIX + "a"},
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    ({"v": "meta.k8s.io/v1", "rv": "5", "start": PREFIX + "a"},
     "incorrect encoded start resourceVersion (version meta.k8s.io/v1)"),
    ({"v": "meta.k8s.io/v1", "rv": 5, "start": "/registry/core/secrets/ns/a"},
     "the encoded start key is not a key of this list"),
    ({"v": "meta.k8s.io/v1", "rv": 5, "start": PREFIX},
     "the encoded start key is not a key of this list"),
    ({"v": "meta.k8s.io/v1", "rv": 5, "start": PREFIX + "a\x00b"},
     "the encoded start key is not a key of this list"),
    (["meta.k8s.io/v1", 5], "not an object"),
])
def test_tokens_this_server_did_not_make_are_refused(data: object, why: str) -> None:
    with pytest.raises(errors.BadRequest) as caught:
        continuetokens.decode(token_of(data), PREFIX)
    assert str(caught.value) == f"continue key is not valid: {why}"


def test_a_token_over_the_limit_is_refused_before_decoding() -> None:
    long = continuetokens.encode(5, PREFIX + "k" * continuetokens.MAX_LENGTH)
    assert len(long) > continuetokens.MAX_LENGTH
    with pytest.raises(errors.BadRequest, match="too long"):
        continuetokens.decode(long, PREFIX)
    with pytest.raises(errors.BadRequest, match="illegal base64 data or JSON"):
        continuetokens.decode("%%%", PREFIX)
