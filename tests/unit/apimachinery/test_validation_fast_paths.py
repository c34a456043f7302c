"""The checks that spare the common names a call into RE2 accept only what the expressions
match: same verdicts, same messages, whatever the string."""

from __future__ import annotations

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
