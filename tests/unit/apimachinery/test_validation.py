"""Table tests for setpoint.apimachinery.validation (cases from apimachinery validation_test.go)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from setpoint.apimachinery import validation

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    r"for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

Check = Callable[[str], list[str]]

GOOD: list[tuple[Check, list[str]]] = [
    (validation.is_dns1123_label, [
        "a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
        "a" * 63,
    ]),
    (validation.is_dns1123_subdomain, [
        "a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2",
        "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1",
        "a-1.1", "a--1--2--b.1", "0.a", "01.a", "012.a", "1a.a", "1-a.a", "0.1", "01.1",
        "012.1", "1a.1", "1-a.1", "1--a--b--2.1", "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5",
        "11.22.33.44.55", "a" * 253,
    ]),
    (validation.is_qualified_name, [
        "simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple",
        "now-with-dashes/simple", "now-with-dashes/now-with-dashes", "now.with.dots/simple",
        "now-with.dashes-and.dots/simple", "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678",
        "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123", "requests.storage-foo",
        "a" * 63, "a" * 253 + "/" + "b" * 63,
    ]),
    (validation.is_valid_label_value, [
        "simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "a" * 63, "",
        "Mixed_Case.v1",
    ]),
]

BAD: list[tuple[Check, list[str]]] = [
    (validation.is_dns1123_label, [
        "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a",
        "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a",
        "a b", "1 ", " 1", "1 2", "a" * 64, "a\n",
    ]),
    (validation.is_dns1123_subdomain, [
        "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a",
        "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a",
        "a b", "1 ", " 1", "1 2", "A.a", "aB.a", "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1",
        "1A.1", "0.A", "01.A", "012.A", "1A.a", "1a.A", "A.B.C.D.E", "AA.BB.CC.DD.EE",
        "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b", "a:b", "a%b", "a?b", "a$b",
        "a" * 254, "a\n",
    ]),
    (validation.is_qualified_name, [
        "nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash",
        "Example.com/abc", "example_com/abc", "example.com/", "/simple", "a" * 64,
        "a" * 254 + "/abc", "", "é",
    ]),
    (validation.is_valid_label_value, [
        "nospecialchars%^=@", "Tama-nui-te-r\u0101.is.M\u0101ori.sun", "\\backslashes\\are\\bad",
        "-starts-with-dash", "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64,
        "has space", "\u0661\u0662",
    ]),
]


def _cases(table: list[tuple[Check, list[str]]]) -> list[tuple[Check, str]]:
    return [(check, value) for check, values in table for value in values]


def _ids(table: list[tuple[Check, list[str]]]) -> list[str]:
    return [f"{check.__name__}:{value[:20]!r}{'...' if len(value) > 20 else ''}"
            for check, values in table for value in values]


@pytest.mark.parametrize(("check", "value"), _cases(GOOD), ids=_ids(GOOD))
def test_good_names(check: Check, value: str) -> None:
    assert check(value) == []


@pytest.mark.parametrize(("check", "value"), _cases(BAD), ids=_ids(BAD))
def test_bad_names(check: Check, value: str) -> None:
    assert check(value) != []


# (id, check, value, exact messages)
MESSAGES: list[tuple[str, Check, str, list[str]]] = [
    ("subdomain-regex", validation.is_dns1123_subdomain, "Foo", [SUBDOMAIN_MSG]),
    ("subdomain-too-long", validation.is_dns1123_subdomain, "a" * 254,
     ["must be no more than 253 characters"]),
    ("subdomain-too-long-and-bad", validation.is_dns1123_subdomain, "A" * 254,
     ["must be no more than 253 characters", SUBDOMAIN_MSG]),
    ("label-regex", validation.is_dns1123_label, "Foo", [LABEL_MSG]),
    ("label-dots", validation.is_dns1123_label, "my.name", ["must not contain dots"]),
    ("label-too-long", validation.is_dns1123_label, "a" * 64,
     ["must be no more than 63 characters"]),
    ("label-too-long-with-dots", validation.is_dns1123_label, "a." * 40 + "a",
     ["must be no more than 63 characters", "must not contain dots"]),
    ("qname-name-regex", validation.is_qualified_name, "-a", ["name part " + QNAME_MSG]),
    ("qname-empty", validation.is_qualified_name, "",
     ["name part must be non-empty", "name part " + QNAME_MSG]),
    ("qname-too-long", validation.is_qualified_name, "a" * 64,
     ["name part must be no more than 63 characters"]),
    ("qname-empty-prefix", validation.is_qualified_name, "/a", ["prefix part must be non-empty"]),
    ("qname-bad-prefix", validation.is_qualified_name, "Example.com/a",
     ["prefix part " + SUBDOMAIN_MSG]),
    ("qname-empty-name", validation.is_qualified_name, "example.com/",
     ["name part must be non-empty", "name part " + QNAME_MSG]),
    ("qname-two-slashes", validation.is_qualified_name, "a/b/c",
     ["a qualified name " + QNAME_MSG
      + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]),
    ("label-value-regex", validation.is_valid_label_value, "-a", [LABEL_VALUE_MSG]),
    ("label-value-too-long", validation.is_valid_label_value, "a" * 64,
     ["must be no more than 63 characters"]),
    ("label-value-bytes-not-chars", validation.is_valid_label_value, "\u00e9" * 32,
     ["must be no more than 63 characters", LABEL_VALUE_MSG]),
]


@pytest.mark.parametrize(("check", "value", "want"), [c[1:] for c in MESSAGES],
                         ids=[c[0] for c in MESSAGES])
def test_messages(check: Check, value: str, want: list[str]) -> None:
    assert check(value) == want
