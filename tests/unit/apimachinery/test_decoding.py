"""Bounded JSON and YAML decoding: limits, Kubernetes' readings, and totality over any bytes."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import decoding
from setpoint.apimachinery.decoding import DecodeError, DecodeLimits


def laughs(levels: int, fanout: int = 9) -> bytes:
    """The classic alias bomb: each level lists the previous one ``fanout`` times."""
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * fanout) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fanout) + "]")
    return ("\n".join(lines) + "\n").encode()


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` dicts inside one another: ``nested(2) == {"a": {"a": 1}}``."""
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def nodes_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(nodes_of(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(nodes_of(v) for v in value)
    return 1


def assert_json_value(value: Any, limits: DecodeLimits = decoding.DEFAULT_LIMITS) -> None:
    """Everything a decoded value promises: JSON types, int64, finite, bounded, encodable."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if isinstance(v, dict | list):
            assert id(v) not in seen, "a container is shared between two places"
            seen.add(id(v))
        if isinstance(v, dict):
            assert all(isinstance(k, str) for k in v)
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, bool) or v is None or isinstance(v, str):
            pass
        elif isinstance(v, int):
            assert decoding.INT64_MIN <= v <= decoding.INT64_MAX
        elif isinstance(v, float):
            assert math.isfinite(v)
        else:
            raise AssertionError(f"not a JSON value: {v!r}")
    assert depth_of(value) <= limits.max_depth
    orjson.dumps(value)


# --- YAML aliases ----------------------------------------------------------------------------


def test_the_alias_bomb_is_refused_for_excessive_aliasing() -> None:
    bomb = laughs(9)
    assert len(bomb) < 500
    with pytest.raises(DecodeError, match="document contains excessive aliasing"):
        decoding.decode_yaml(bomb)


@pytest.mark.parametrize(("levels", "fanout"), [(4, 9), (6, 4), (12, 2), (9, 9), (3, 100)])
def test_alias_bombs_of_every_shape_are_refused(levels: int, fanout: int) -> None:
    with pytest.raises(DecodeError, match="excessive aliasing"):
        decoding.decode_yaml(laughs(levels, fanout))


def test_a_few_aliases_expand_into_independent_copies() -> None:
    value = decoding.decode_yaml(b"a: &x {b: [1, 2]}\nc: *x\nd: *x\n")
    assert value == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]}, "d": {"b": [1, 2]}}
    value["c"]["b"].append(3)
    assert value["a"]["b"] == [1, 2]
    assert value["d"]["b"] == [1, 2]
    assert_json_value(value)


def test_small_documents_may_be_mostly_aliases_as_go_yaml_allows() -> None:
    # 3 levels of 9: 819 nodes decoded, nearly all through aliases, under go-yaml's floor
    assert nodes_of(decoding.decode_yaml(laughs(3))) > 700


@given(levels=st.integers(1, 12), fanout=st.integers(1, 12))
@settings(max_examples=60, deadline=None)
def test_alias_expansion_is_bounded_by_the_ratio_rule(levels: int, fanout: int) -> None:
    """Whatever the shape, a document either fails or expands to at most go-yaml's budget:
    99 % of up to 400,000 nodes may come from aliases."""
    source = laughs(levels, fanout)
    try:
        value = decoding.decode_yaml(source)
    except DecodeError as e:
        if "excessive aliasing" not in str(e) and "nested deeper" not in str(e):
            pytest.fail(f"refused for another reason: {e}")
        return
    total = nodes_of(value)
    spelled = source.count(b",") + source.count(b"[") + 2  # an upper bound on written nodes
    assert total <= max(1000, 100 * spelled, 400_000)
    assert_json_value(value)


def test_an_anchor_that_contains_itself_is_refused() -> None:
    with pytest.raises(DecodeError, match="contains itself"):
        decoding.decode_yaml(b"a: &a [1, *a]\n")


def test_an_undefined_alias_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="undefined alias"):
        decoding.decode_yaml(b"a: *nope\n")


def test_merge_keys_give_explicit_keys_precedence() -> None:
    value = decoding.decode_yaml(
        b"base: &b {x: 1, y: 2}\nother: &o {y: 3, z: 4}\n"
        b"m:\n  x: 0\n  <<: [*b, *o]\n")
    assert value["m"] == {"x": 0, "y": 2, "z": 4}
    with pytest.raises(DecodeError, match="map merge requires"):
        decoding.decode_yaml(b"a:\n  <<: 5\n")


# --- depth -----------------------------------------------------------------------------------


@pytest.mark.parametrize("decode", [decoding.decode_json, decoding.decode_yaml],
                         ids=["json", "yaml"])
def test_nesting_up_to_the_limit_decodes_and_one_more_is_refused(decode: Any) -> None:
    limit = decoding.MAX_DEPTH
    assert decode(orjson.dumps(nested(limit))) == nested(limit)
    with pytest.raises(DecodeError, match=f"nested deeper than the limit of {limit} levels"):
        decode(orjson.dumps(nested(limit + 1)))


@pytest.mark.parametrize("body", [
    b"[" * 5000 + b"]" * 5000,  # beyond orjson's own limit
    b"[" * 900 + b"]" * 900,
    b"a: " + b"[" * 3000,  # beyond libyaml's
    "".join("  " * i + "- \n" for i in range(300)).encode(),  # block sequences
    b"a:\n" + b"".join(b" " * (i + 1) + b"a:\n" for i in range(200)),  # block mappings
], ids=["json-5000", "json-900", "flow-3000", "block-seq-300", "block-map-200"])
def test_deep_bodies_are_refused_naming_the_limit(body: bytes) -> None:
    with pytest.raises(DecodeError, match="nested deeper than the limit of 128"):
        decoding.decode_yaml(body)


def test_the_limit_is_a_parameter_within_bounds() -> None:
    small = DecodeLimits(max_depth=2)
    assert decoding.decode_json(b'{"a": {}}', small) == {"a": {}}
    with pytest.raises(DecodeError, match="limit of 2 levels"):
        decoding.decode_json(b'{"a": [[]]}', small)
    with pytest.raises(DecodeError, match="limit of 2 levels"):
        decoding.decode_yaml(b"a: [[]]", small)
    with pytest.raises(ValueError, match="max_depth"):
        DecodeLimits(max_depth=0)
    with pytest.raises(ValueError, match="max_depth"):
        DecodeLimits(max_depth=100_000)


def test_too_deep_names_the_first_path_beyond_the_limit() -> None:
    obj = {"spec": {"items": [{"a": {"b": {}}}]}}
    assert str(decoding.too_deep(obj, 4)) == "spec.items[0].a"
    assert decoding.too_deep(obj, 6) is None
    assert decoding.too_deep(obj, 5) is not None
    assert decoding.too_deep("scalar", 1) is None
    assert str(decoding.too_deep(nested(300), decoding.MAX_DEPTH)).count("a") == 128


def test_depth_counts_containers_without_recursing() -> None:
    assert decoding.depth("x") == 0
    assert decoding.depth({}) == 1
    assert decoding.depth({"a": [1, {"b": []}]}) == 4
    assert decoding.depth(nested(5000)) == 5000


# --- numbers ---------------------------------------------------------------------------------


def test_integers_beyond_int64_become_floats_as_kubernetes_decodes_them() -> None:
    assert decoding.decode_json(b"[9223372036854775807, -9223372036854775808]") == [
        9223372036854775807, -9223372036854775808]
    value = decoding.decode_json(b'{"a": 9223372036854775808, "b": [18446744073709551615]}')
    assert value == {"a": 9.223372036854776e18, "b": [1.8446744073709552e19]}
    assert isinstance(value["a"], float)
    assert decoding.decode_json(b"18446744073709551616") == 1.8446744073709552e19
    assert decoding.decode_yaml(b"a: 123456789012345678901234567890") == {
        "a": 1.2345678901234568e29}
    assert decoding.decode_yaml(b"a: " + b"7" * 200) == {"a": float("7" * 200)}


@pytest.mark.parametrize("body", [b"[1e400]", b'{"a": -1e999}', b"1" + b"0" * 400],
                         ids=lambda b: b[:16].decode())
def test_json_numbers_beyond_a_64_bit_float_are_refused(body: bytes) -> None:
    with pytest.raises(DecodeError, match="infinity"):
        decoding.decode_json(body)


@pytest.mark.parametrize("body", [
    b"a: " + b"9" * 5000, b"a: 0x" + b"f" * 400, b"a: 1.5e+999", b"a: .inf", b"a: -.Inf",
    b"a: .nan", b"a: 1" + b":00" * 200,
], ids=lambda b: b[:16].decode())
def test_yaml_numbers_without_a_finite_64_bit_form_are_refused(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decoding.decode_yaml(body)


def test_what_yaml_1_1_does_not_call_a_number_stays_a_string() -> None:
    # as go-yaml: 1e400 is no float of YAML 1.1 (and would not fit one), so it is text
    assert decoding.decode_yaml(b"[1e400]") == ["1e400"]


def test_yaml_1_1_integers_are_read_as_pyyaml_reads_them() -> None:
    value = decoding.decode_yaml(b"a: 0x1F\nb: -0b101\nc: 017\nd: 1_000\ne: 1:30\nf: +12")
    assert value == {"a": 31, "b": -5, "c": 15, "d": 1000, "e": 90, "f": 12}
    assert decoding.decode_yaml(b"a: !!int '12'\nb: !!float '1'") == {"a": 12, "b": 1.0}
    with pytest.raises(DecodeError, match="as an integer"):
        decoding.decode_yaml(b"a: !!int twelve")


# --- scalars, keys, tags, documents ----------------------------------------------------------


def test_scalars_keep_their_kubernetes_meaning() -> None:
    value = decoding.decode_yaml(
        b"t: 2001-12-14t21:59:43.10-05:00\nd: 2002-12-14\nb: yes\nn: ~\nbin: !!binary aGk=\n"
        b"s: !!str 12\nq: '0x10'\n")
    assert value == {"t": "2001-12-14t21:59:43.10-05:00", "d": "2002-12-14", "b": True,
                     "n": None, "bin": "hi", "s": "12", "q": "0x10"}


def test_keys_become_strings_as_go_prints_them() -> None:
    assert decoding.decode_yaml(b"1: a\ntrue: b\n~: c\n1.5: d\n") == {
        "1": "a", "true": "b", "null": "c", "1.5": "d"}
    with pytest.raises(DecodeError, match="invalid map key"):
        decoding.decode_yaml(b"? [a, b]\n: 1\n")


@pytest.mark.parametrize("body", [
    b"a: !foo x", b"a: !!python/object:os.system x", b"!!python/tuple [1]", b"a: !!timestamp x",
    b"a: !!binary '***'",
], ids=["local", "python", "python-seq", "bad-timestamp", "bad-binary"])
def test_unknown_or_malformed_tags_are_refused(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decoding.decode_yaml(body)


def test_core_collection_tags_decode_as_plain_collections() -> None:
    assert decoding.decode_yaml(b"a: !!set {x, y}\nb: !!omap [{k: 1}]") == {
        "a": {"x": None, "y": None}, "b": [{"k": 1}]}


def test_one_document_is_required_and_empty_ones_do_not_count() -> None:
    assert decoding.decode_yaml(b"---\n---\na: 1\n---\n") == {"a": 1}
    with pytest.raises(DecodeError, match="exactly one YAML document"):
        decoding.decode_yaml(b"a: 1\n---\nb: 2\n")
    with pytest.raises(DecodeError, match="exactly one YAML document"):
        decoding.decode_yaml(b"---\n")


def test_a_kind_list_decodes_as_it_is() -> None:
    body = b"apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  metadata: {name: a}\n"
    assert decoding.decode_yaml(body) == {
        "apiVersion": "v1", "kind": "List",
        "items": [{"kind": "ConfigMap", "metadata": {"name": "a"}}]}


def test_json_sent_as_yaml_is_decoded_as_json() -> None:
    assert decoding.decode_yaml(b'{"a": "yes", "b": 1.0}') == {"a": "yes", "b": 1.0}


def test_text_that_is_not_unicode_is_refused() -> None:
    with pytest.raises(DecodeError, match="UTF-8"):
        decoding.decode_yaml(b"a: \xff\xfe")
    with pytest.raises(DecodeError, match="Unicode"):
        decoding.decode_yaml("a: \ud800")
    with pytest.raises(DecodeError):
        decoding.decode_yaml(b'a: "\\ud800"')
    with pytest.raises(DecodeError):
        decoding.decode_json(b'["\\ud800"]')


# --- totality --------------------------------------------------------------------------------

YAML_PIECES = st.sampled_from([
    "a", "b", ":", ": ", " ", "\n", "\n  ", "- ", "[", "]", "{", "}", ",", "&x ", "*x", "&y ",
    "*y", "<<: ", "!!int ", "!!str ", "!!binary ", "!!float ", "!!set ", "!foo ", "? ", "'",
    '"', "\\u", "0x1F", "1e400", "9" * 30, ".inf", ".nan", "1:30", "yes", "~", "---\n",
    "...\n", "#", "|\n", ">-\n", "\t", "%YAML 1.1\n", "\x00", "\xff", "😀",
])


@given(st.binary(max_size=300))
@settings(max_examples=400, deadline=None)
def test_any_bytes_decode_or_raise_decode_error(raw: bytes) -> None:
    for decode in (decoding.decode_json, decoding.decode_yaml):
        try:
            value = decode(raw)
        except DecodeError:
            continue
        assert_json_value(value)


@given(st.lists(YAML_PIECES, max_size=60).map("".join))
@settings(max_examples=600, deadline=None)
def test_yaml_like_garbage_decodes_or_raises_decode_error(text: str) -> None:
    for raw in (text, text.encode("utf-8", errors="surrogatepass")):
        try:
            value = decoding.decode_yaml(raw)
        except DecodeError:
            continue
        assert_json_value(value)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(decoding.INT64_MIN, decoding.INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30)


@given(JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_json_values_round_trip_through_both_decoders(value: Any) -> None:
    assert decoding.decode_json(orjson.dumps(value)) == value
    assert decoding.decode_yaml(orjson.dumps(value)) == value


# what PyYAML's dumper writes so that YAML (not JSON) reads it back unchanged: no control or
# line-break characters (its emitter folds some), floats left to the tests above
YAML_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
                    max_size=12)
YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(decoding.INT64_MIN, decoding.INT64_MAX) | YAML_TEXT,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(YAML_TEXT, children, max_size=4),
    max_leaves=30)


@given(st.dictionaries(YAML_TEXT, YAML_VALUES, min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_objects_round_trip_through_block_yaml(value: dict[str, Any]) -> None:
    text = yaml.safe_dump(value, allow_unicode=True, default_flow_style=False)
    assert decoding.decode_yaml(text.encode()) == value


# --- the quick paths agree with the walks ------------------------------------------------------

WIDE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=24)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=40)


@given(WIDE_JSON, st.integers(1, 12))
@settings(max_examples=400, deadline=None)
def test_decoding_json_agrees_with_the_full_walk(value: Any, max_depth: int) -> None:
    """Whether the bytes let the decoder skip its walk or not, the answer is the walk's:
    the same value (integers beyond int64 as floats) or the same refusal."""
    try:
        raw = orjson.dumps(value)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: not JSON orjson writes
        return
    limits = DecodeLimits(max_depth=max_depth)
    try:
        expected = decoding._bound_json(orjson.loads(raw), max_depth)
    except DecodeError as e:
        with pytest.raises(DecodeError, match=str(e)):
            decoding.decode_json(raw, limits)
        return
    assert decoding.decode_json(raw, limits) == expected
    assert decoding.decode_json(raw.decode(), limits) == expected


@given(WIDE_JSON, st.integers(1, 12))
@settings(max_examples=400, deadline=None)
def test_too_deep_answers_as_depth_does(value: Any, max_depth: int) -> None:
    path = decoding.too_deep(value, max_depth)
    assert (path is None) == (decoding.depth(value) <= max_depth)


def test_numbers_in_strings_and_many_brackets_still_take_the_walk() -> None:
    # brackets and digits in strings only make the decoder walk; the walk then decides
    assert decoding.decode_json(b'{"a": "' + b"[" * 200 + b'"}') == {"a": "[" * 200}
    assert decoding.decode_json(b'{"a": "' + b"9" * 30 + b'", "b": 18446744073709551615}') == {
        "a": "9" * 30, "b": 1.8446744073709552e19}
    with pytest.raises(DecodeError, match="nested deeper"):
        decoding.decode_json(b"[" * 129 + b"]" * 129)
