"""RE2 matching: Go's semantics, linear time, and nothing raised while matching."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery.regexp import (
    DEFAULT_BUDGET,
    BudgetExceeded,
    Regexp,
    RegexpError,
    budget,
)

SRC = Path(__file__).resolve().parents[3] / "src" / "setpoint"


@pytest.mark.parametrize(("pattern", "text", "found"), [
    (r"^[a-z]+$", "abc\n", False),  # $ is the end of the text, not before a final newline
    (r"(?m)^b$", "a\nb\nc", True),
    (r"\d", "\u0663", False),  # ASCII classes, as Go's
    (r"\w", "\u00e9", False),
    (r"\s", "\v", False),
    (r"\bfoo\b", "a foo b", True),
    (r"\p{Greek}+", "λόγος", True),
    (r"(?i)straße", "STRASSE", False),  # simple case folding only
    (r"(?i)k", "\u212a", True),
    (r"a.c", "a\nc", False),
    (r"(?s)a.c", "a\nc", True),
], ids=lambda v: repr(v) if isinstance(v, str) else None)
def test_search_has_go_semantics(pattern: str, text: str, found: bool) -> None:
    assert Regexp(pattern).search(text) is found


def test_anchoring_of_match_and_fullmatch() -> None:
    r = Regexp("ab")
    assert r.search("xab")
    assert not r.match("xab")
    assert r.match("abx")
    assert not r.fullmatch("abx")
    assert r.fullmatch("ab")


def test_groups_are_leftmost_first_and_unicode_safe() -> None:
    assert Regexp(r"(a+?)(a*)").groups("aaa") == ("a", "aa")
    assert Regexp(r"(x)?(b)").groups("b") == (None, "b")
    assert Regexp(r"(é+)-(\d+)").groups("ééé-12") == ("ééé", "12")
    assert Regexp(r"(\d+)").groups("12x") is None
    assert Regexp(r"(\d+)").groups("12x", whole=False) == ("12",)


def test_find_and_findall_follow_go() -> None:
    assert Regexp("a+").find("baaac") == "aaa"
    assert Regexp("z").find("abc") is None
    # FindAllString: an empty match right after a match is skipped
    assert Regexp("a*").findall("baaac") == ["", "aaa", ""]
    assert Regexp("a|").findall("aab") == ["a", "a", ""]
    assert Regexp("").findall("hé") == ["", "", ""]
    assert Regexp("[0-9]").findall("1a2b3", 2) == ["1", "2"]
    assert Regexp("[0-9]").findall("123", 0) == []
    assert list(Regexp(r"(\w)(\d)?").finditer("a1b")) == [("a1", "a", "1"), ("b", "b", None)]


def test_invalid_patterns_raise_regexp_error_with_re2s_reason() -> None:
    for pattern, reason in (("(", "missing )"), ("a{1001}", "repetition size"),
                            ("(?=x)", "invalid perl operator"), ("\\Z", "escape")):
        with pytest.raises(RegexpError) as raised:
            Regexp(pattern)
        assert reason in str(raised.value)


def test_a_pattern_over_the_memory_budget_is_refused() -> None:
    with pytest.raises(RegexpError, match="too large"):
        Regexp(r"\pL{1000}")  # a thousand copies of the whole Unicode letter class


def test_catastrophic_patterns_read_the_text_once() -> None:
    # exponential for a backtracking matcher: 2^100000 ways to split the a's
    text = "a" * 100_000 + "!"
    assert not Regexp(r"^(a+)+$").search(text)
    assert not Regexp(r"^(a|aa)+$").search(text)
    assert not Regexp(r"(.*a){20}$").fullmatch(text)
    assert Regexp(r"^(a+)+").find(text) == "a" * 100_000


@given(st.text(max_size=50), st.text(max_size=50))
@settings(max_examples=300, deadline=None)
def test_matching_never_raises(pattern: str, text: str) -> None:
    try:
        compiled = Regexp(pattern)
    except RegexpError:
        return
    compiled.search(text)
    compiled.fullmatch(text)
    compiled.groups(text)
    compiled.findall(text, 10)


def test_lone_surrogates_are_matched_not_raised() -> None:
    assert Regexp(".").findall("a\ud800b") == ["a", "\ud800", "b"]
    assert Regexp("^[a-z]+$").search("a\udc80") is False


def test_no_module_matches_with_pythons_backtracking_re() -> None:
    """Every regular expression the package runs goes through RE2."""
    offenders = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "re":
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


# --- the matching budget ---------------------------------------------------------------------

SLOW = "[^a]{1000}[^a]{1000}[^a]{1000}a"  # 24,000 instructions, and no DFA to run them


def test_metered_patterns_charge_program_size_times_text_length() -> None:
    pattern = Regexp(SLOW, metered=True)
    assert pattern.size > 20_000
    with budget(10 * pattern.size) as current:
        assert not pattern.search("b" * 8)
        assert current.remaining == 10 * pattern.size - 9 * pattern.size
        with pytest.raises(BudgetExceeded):
            pattern.search("b" * 8)
        assert current.remaining == pattern.size  # a refused match costs nothing


def test_a_text_the_budget_cannot_pay_for_is_refused_before_matching() -> None:
    pattern = Regexp(SLOW, metered=True)
    text = "b" * (DEFAULT_BUDGET // pattern.size + 1)
    with pytest.raises(BudgetExceeded, match="exceeds the 100000000 units"):
        pattern.search(text)  # no ambient budget: one match may cost DEFAULT_BUDGET
    assert not Regexp(SLOW).search("b" * 100)  # the server's own patterns are not metered


def test_nested_budgets_share_the_outer_one() -> None:
    pattern = Regexp("x", metered=True)
    with budget(100) as outer, budget(10**9) as inner:
        assert inner is outer
        pattern.search("y" * 9)  # 2 instructions x 10 bytes
    assert outer.remaining < 100


def test_findall_pays_once_for_the_whole_text() -> None:
    pattern = Regexp("a", metered=True)
    text = "a" * 10_000
    with budget(pattern.size * (len(text) + 1)) as current:
        assert len(pattern.findall(text)) == 10_000
    assert current.remaining == 0
