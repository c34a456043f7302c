"""The checks that spare the common names a call into RE2 accept only what the expressions
match: same verdicts, same messages, whatever the string."""

from __future__ import annotations

import types

from hypothesis import example, given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import validation as v

# a dotless i and a Kelvin sign: letters that are not ASCII, though they fold to it
NAMEISH = st.text(alphabet="abcz09-._AZ/ K\u0131\u212a", max_size=12)


@settings(max_examples=1000)
@given(NAMEISH)
@example("")
@example("a")
@example("-a")
@example("a-")
@example("a..b")
@example(".a")
@example("a.")
def test_a_plain_name_is_one_the_expression_matches(text: str) -> None:
    if v._plainly_dns1123_label(text):
        assert v._DNS1123_LABEL_RE.fullmatch(text)
    if v._plainly_dns1123_subdomain(text):
        assert v._DNS1123_SUBDOMAIN_RE.fullmatch(text)
    if v._plainly_qualified_name(text):
        assert v._QUALIFIED_NAME_RE.fullmatch(text)
        assert v._LABEL_VALUE_RE.fullmatch(text)
    # and the verdicts are the expressions' (the plain check only saves the call)
    assert (not v.is_dns1123_label(text)) == bool(
        len(text.encode()) <= 63 and v._DNS1123_LABEL_RE.fullmatch(text))
    assert (not v.is_dns1123_subdomain(text)) == bool(
        len(text.encode()) <= 253 and v._DNS1123_SUBDOMAIN_RE.fullmatch(text))
    assert (not v.is_valid_label_value(text)) == bool(
        len(text.encode()) <= 63 and v._LABEL_VALUE_RE.fullmatch(text))


def test_common_names_take_the_plain_way() -> None:
    assert v._plainly_dns1123_label("default")
    assert v._plainly_dns1123_subdomain("item-000001.example.com")
    assert v._plainly_qualified_name("app.kubernetes.io")
    assert not v._plainly_dns1123_label("Default")
    assert v.is_dns1123_label("Default")  # the expression's message, as before


# --- ObjectMeta: the plain case agrees with the full checks --------------------------------

ANY_VALUE = st.none() | st.booleans() | st.integers(-2, 3) | st.text(max_size=3) | st.just([]) \
    | st.just({}) | st.just([1]) | st.just(["a"]) | st.just({"a": "b"})
KEYISH = st.text(alphabet="abAZ09-._/\u0131", max_size=10)
META = st.fixed_dictionaries({}, optional={
    "name": NAMEISH | ANY_VALUE,
    "generateName": NAMEISH | ANY_VALUE,
    "namespace": NAMEISH | ANY_VALUE,
    "generation": ANY_VALUE,
    "labels": st.dictionaries(KEYISH, NAMEISH, max_size=3) | ANY_VALUE,
    "annotations": st.dictionaries(KEYISH, st.text(max_size=6), max_size=3) | ANY_VALUE,
    "ownerReferences": ANY_VALUE,
    "finalizers": ANY_VALUE | st.lists(KEYISH, max_size=2),
    "uid": ANY_VALUE,
})


@settings(max_examples=2000)
@given(META, st.booleans())
@example({"name": "a", "namespace": "ns", "finalizers": ""}, True)
@example({"name": "a", "ownerReferences": 0}, False)
@example({"name": "a", "namespace": "", "generation": True}, False)
@example({"name": "a", "namespace": "ns", "labels": {"example.com/a": "b"}}, True)
@example({"name": "a", "namespace": "ns", "annotations": {"a": "x" * 300_000}}, True)
def test_plain_object_meta_is_what_the_full_checks_accept(meta: dict[str, object],
                                                         namespaced: bool) -> None:
    full = v._validate_object_meta(meta, namespaced=namespaced, name_is_label=False,
                                   path=v._METADATA, name_check=None)
    if v._plain_object_meta(meta, namespaced):
        assert full == []
    # and the answer is the full checks' either way
    assert v.validate_object_meta(meta, namespaced=namespaced) == full
    if v._plain_common(meta):
        # a mapping that is not a dict takes the full checks
        slow: list[v.FieldError] = []
        v._validate_common(types.MappingProxyType(meta), v._METADATA, slow)
        assert slow == []


def test_the_objects_a_server_sees_most_take_the_plain_way() -> None:
    assert v._plain_object_meta({"name": "item-000001", "namespace": "default",
                                 "labels": {"app.kubernetes.io/name": "web", "tier": ""},
                                 "annotations": {"example.com/Note": "anything at all"},
                                 "uid": "u", "resourceVersion": "5",
                                 "creationTimestamp": "2026-01-01T00:00:00Z",
                                 "managedFields": [{}], "finalizers": []}, True)
    assert not v._plain_object_meta({"name": "Item"}, False)
    assert v.validate_object_meta({"name": "Item"}, namespaced=False)  # the full message
