"""Patterns checked as Go's regexp parser checks them, compiled and run on RE2."""

from __future__ import annotations

import pytest

from setpoint.apimachinery import goregexp

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
    assert goregexp.error(pattern) == "error parsing regexp: " + error
    with pytest.raises(goregexp.PatternError, match="error parsing regexp"):
        goregexp.compile_pattern(pattern)


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
    assert goregexp.compile_pattern(pattern).search(text) is matches


@pytest.mark.parametrize(("pattern", "text"), [
    ("\\pL+", "é"), ("\\p{Greek}", "λ"), ("(?U)a+", "a"), ("[[:^alpha:]]", "1"),
    ("(?P<1st>x)", "x"), ("[\\D]", "x"),
])
def test_valid_go_patterns_python_could_not_run_now_validate(pattern: str, text: str) -> None:
    # these were skipped when patterns ran on Python's re; RE2 runs them as Go does
    assert goregexp.error(pattern) is None
    assert goregexp.compile_pattern(pattern).search(text)
    assert not goregexp.compile_pattern(pattern).search("")


@pytest.mark.parametrize(("pattern", "error"), [
    ("\\C", "invalid escape sequence: `\\C`"),
    ("\\p{NoSuchScript}", "invalid character class range: `\\p{NoSuchScript}`"),
    ("((((a{100}){100}){100}){100})", "invalid repetition size: `{100}`"),
])
def test_patterns_go_or_re2_cannot_compile_are_refused(pattern: str, error: str) -> None:
    assert goregexp.error(pattern) == "error parsing regexp: " + error


def test_backtracking_patterns_match_in_linear_time() -> None:
    # ^(a+)+$ against a's and one other character: 2^n paths for a backtracking matcher
    compiled = goregexp.compile_pattern("^(a+)+$")
    assert not compiled.search("a" * 100_000 + "!")
    assert compiled.search("a" * 100_000)
