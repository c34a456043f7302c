"""String formats (kube-openapi's ``strfmt`` checks), RE2 translation and Go value helpers."""

from __future__ import annotations

import pytest

from setpoint.schema import formats, govalues, regex

FORMAT_CASES: list[tuple[str, str, bool]] = [
    ("date", "2024-02-29", True), ("date", "2023-02-29", False), ("date", "2024-1-01", False),
    ("date-time", "2024-01-02T03:04:05Z", True),
    ("date-time", "2024-01-02T03:04:05.123+02:00", True),
    ("datetime", "2024-01-02t03:04:05z", True), ("date-time", "2024-01-02T25:00:00Z", False),
    ("date-time", "2024-01-02 03:04:05Z", False),
    # the fraction is any one character then digits; the zone follows the digits
    ("date-time", "2024-01-02T03:04:05,5Z", True), ("date-time", "2024-01-02T03:04:05.Z", False),
    ("date-time", "2024-01-02T03:04:05\n5Z", False),
    ("date-time", "2024-01-02T03:04:05+0530", False),
    ("date-time", "2024-01-02T03:04:05+05:30x", False), ("date", "2024-01-0\u0663", False),
    ("date-time", "2024-01-02T03:04:60Z", False), ("date", "2024-01-02\n", False),
    ("duration", "1h30m", True), ("duration", "-1.5s", True), ("duration", "3 days", True),
    ("duration", "1 fortnight", False), ("duration", "", False),
    ("email", "a@example.com", True), ("email", "Alice <a@example.com>", True),
    ("email", "@example.com", False), ("email", "a@", False),
    ("email", "josé.o'neil+x@example.com", True), ("email", "a b@example.com", False),
    ("email", "a..b@example.com", False),
    ("hostname", "example.com", True), ("hostname", "a-b", True), ("hostname", "ab-c", False),
    ("hostname", "a..b", False), ("hostname", "exa_mple.com", False),
    ("ipv4", "192.168.0.1", True), ("ipv4", "192.168.000.001", True), ("ipv4", "256.0.0.1", False),
    ("ipv4", "::ffff:1.2.3.4", True), ("ipv4", "::1", False),
    ("ipv6", "2001:db8::1", True), ("ipv6", "1.2.3.4", False), ("ipv6", "fe80::1%eth0", False),
    ("cidr", "10.0.0.0/8", True), ("cidr", "2001:db8::/32", True), ("cidr", "10.0.0.0/33", False),
    ("cidr", "10.0.0.0", False),
    ("mac", "01:23:45:67:89:ab", True), ("mac", "01-23-45-67-89-ab", True),
    ("mac", "0123.4567.89ab", True), ("mac", "01:23:45:67:89", False),
    ("uri", "https://example.com/a?b=c", True), ("uri", "/absolute/path", True),
    ("uri", "mailto:a@b.c", True), ("uri", "relative/path", False), ("uri", "", False),
    ("uri", "http://exa mple.com/", False), ("uri", "/bad%zz", False),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True),
    ("uuid", "123E4567E89B12D3A456426614174000", True),
    ("uuid", "123e4567-e89b-12d3-a456", False),
    ("uuid4", "123e4567-e89b-42d3-a456-426614174000", True),
    ("uuid4", "123e4567-e89b-12d3-a456-426614174000", False),
    ("byte", "aGVsbG8=", True), ("byte", "aGVsbG8", False), ("byte", "", False),
    ("password", "anything", True),
    ("isbn10", "0-321-75104-3", True), ("isbn13", "978-0321751041", True), ("isbn", "123", False),
    ("creditcard", "4111-1111-1111-1111", True), ("creditcard", "4111-1111-1111-1112", False),
    ("ssn", "123-45-6789", True), ("ssn", "123456789", False),
    ("hexcolor", "#FFF", True), ("hexcolor", "#FFFF", False),
    ("rgbcolor", "rgb(255, 0, 10)", True), ("rgbcolor", "rgb(256,0,0)", False),
    ("bsonobjectid", "507f1f77bcf86cd799439011", True), ("bsonobjectid", "507f1f77", False),
]


@pytest.mark.parametrize(("fmt", "value", "valid"), FORMAT_CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in FORMAT_CASES])
def test_formats(fmt: str, value: str, valid: bool) -> None:
    check = formats.validator(fmt)
    assert check is not None
    assert check(value) is valid


@pytest.mark.parametrize(("schema_type", "fmt", "kept"), [
    ("string", "date-time", "date-time"), ("", "email", "email"), ("string", "foo", ""),
    ("string", "k8s-short-name", ""), ("integer", "int32", "int32"), ("integer", "email", ""),
    ("number", "double", "double"), ("number", "int64", ""), ("boolean", "date", ""),
    ("object", "email", ""),
])
def test_effective_format(schema_type: str, fmt: str, kept: str) -> None:
    assert formats.effective_format(schema_type, fmt) == kept


REGEX_ERRORS: list[tuple[str, str]] = [
    ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
    ("(?!a)", "invalid or unsupported Perl syntax: `(?!`"),
    ("(?<=a)b", "invalid named capture: `(?<=a)b`"),
    ("(?>a)", "invalid or unsupported Perl syntax: `(?>`"),
    ("(a)\\1", "invalid escape sequence: `\\1`"),
    ("a**", "invalid nested repetition operator: `**`"),
    ("a++", "invalid nested repetition operator: `++`"),
    ("+", "missing argument to repetition operator: `+`"),
    ("a{1001}", "invalid repeat count: `{1001}`"),
    ("a{3,2}", "invalid repeat count: `{3,2}`"),
    ("(a", "missing closing ): `(a`"),
    ("a)", "unexpected ): `a)`"),
    ("[a", "missing closing ]: `[a`"),
    ("[z-a]", "invalid character class range: `z-a`"),
    ("\\Z", "invalid escape sequence: `\\Z`"),
    ("\\e", "invalid escape sequence: `\\e`"),
]


@pytest.mark.parametrize(("pattern", "error"), REGEX_ERRORS, ids=[c[0] for c in REGEX_ERRORS])
def test_re2_rejections(pattern: str, error: str) -> None:
    assert regex.error(pattern) == "error parsing regexp: " + error
    with pytest.raises(regex.PatternError, match="error parsing regexp"):
        regex.compile_pattern(pattern)


REGEX_MATCHES: list[tuple[str, str, bool]] = [
    ("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-name", True),
    ("^[a-z]+$", "abc\n", False),
    ("(?m)^b$", "a\nb\nc", True),
    ("\\d+", "\u0663", False),
    ("\\w", "\u00e9", False),
    ("\\bfoo\\b", "a foo b", True),
    ("\\bfoo\\b", "afoob", False),
    ("[[:alpha:]]+\\z", "abc", True),
    ("a{,2}", "a{,2}", True),
    ("\\Qa.b\\E", "axb", False),
    ("\\Qa.b\\E", "a.b", True),
    ("(?i)abc", "ABC", True),
    ("a(?i)b|c", "C", True),
    ("x(?i)y", "XY", False),
    ("(?P<word>\\w+)", "hi", True),
    ("(?<word>\\w+)", "hi", True),
    ("\\x{41}\\101", "AA", True),
    ("[\\d-]+", "1-2", True),
    ("^$*", "", True),
]


@pytest.mark.parametrize(("pattern", "text", "matches"), REGEX_MATCHES,
                         ids=[f"{c[0]}~{c[1]!r}" for c in REGEX_MATCHES])
def test_re2_semantics(pattern: str, text: str, matches: bool) -> None:
    assert regex.compile_pattern(pattern).search(text) is matches


@pytest.mark.parametrize(("pattern", "text"), [
    ("\\pL+", "é"), ("\\p{Greek}", "λ"), ("(?U)a+", "a"), ("[[:^alpha:]]", "1"),
    ("(?P<1st>x)", "x"), ("[\\D]", "x"),
])
def test_valid_go_patterns_python_could_not_run_now_validate(pattern: str, text: str) -> None:
    # these were skipped when patterns ran on Python's re; RE2 runs them as Go does
    assert regex.error(pattern) is None
    assert regex.compile_pattern(pattern).search(text)
    assert not regex.compile_pattern(pattern).search("")


@pytest.mark.parametrize(("pattern", "error"), [
    ("\\C", "invalid escape sequence: `\\C`"),
    ("\\p{NoSuchScript}", "invalid character class range: `\\p{NoSuchScript}`"),
    ("((((a{100}){100}){100}){100})", "invalid repetition size: `{100}`"),
])
def test_patterns_go_or_re2_cannot_compile_are_refused(pattern: str, error: str) -> None:
    assert regex.error(pattern) == "error parsing regexp: " + error


def test_backtracking_patterns_match_in_linear_time() -> None:
    # ^(a+)+$ against a's and one other character: 2^n paths for a backtracking matcher
    compiled = regex.compile_pattern("^(a+)+$")
    assert not compiled.search("a" * 100_000 + "!")
    assert compiled.search("a" * 100_000)


@pytest.mark.parametrize(("value", "v", "json"), [
    (10.0, "10", "10"), (1.5, "1.5", "1.5"), (1e8, "1e+08", "100000000"),
    (123456.0, "123456", "123456"), (1234567.0, "1.234567e+06", "1234567"),
    (0.0001, "0.0001", "0.0001"), (0.00001, "1e-05", "0.00001"), (1e-7, "1e-07", "1e-7"),
    (1e21, "1e+21", "1e+21"), (-2.5, "-2.5", "-2.5"), (0.0, "0", "0"),
])
def test_go_float_formatting(value: float, v: str, json: str) -> None:
    assert govalues.format_float_v(value) == v
    assert govalues.format_float_json(value) == json


def test_go_deep_equal_and_json() -> None:
    assert govalues.deep_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not govalues.deep_equal(1, 1.0)
    assert not govalues.deep_equal(True, 1)
    assert not govalues.deep_equal({"a": 1}, {"a": 1.0})
    assert govalues.to_json({"b": 1.0, "a": ["<x>", None, True]}) == \
        '{"a":["\\u003cx\\u003e",null,true],"b":1}'
    assert govalues.quote('a"b\n\x00\u00e9') == '"a\\"b\\n\\x00\u00e9"'
    assert govalues.is_json_integer(3.0)
    assert govalues.is_json_integer(1e15 + 0.5)
    assert not govalues.is_json_integer(2.0**60)
    assert govalues.float_to_int64(-1.9) == -1
    assert govalues.float_to_int64(1e30) == govalues.INT64_MIN
