"""Revision rules shared by every backend."""

from __future__ import annotations

import pytest

from setpoint.storage import Expired, FutureRevision, rules


@pytest.mark.parametrize(("requested", "current", "compacted", "served"), [
    (None, 0, 0, 0),
    (None, 7, 3, 7),
    (0, 7, 3, 7),
    (None, 7, 7, 7),
    (4, 7, 3, 4),
    (7, 7, 3, 7),
    (1, 1, 0, 1),
    (3, 7, 3, 3),
    (7, 7, 7, 7),
], ids=["empty", "newest", "zero-is-newest", "all-compacted", "above-compacted", "current",
        "first", "at-compacted", "at-compacted-current"])
def test_read_revision_serves(requested: int | None, current: int, compacted: int,
                              served: int) -> None:
    assert rules.read_revision(requested, current=current, compacted=compacted) == served


@pytest.mark.parametrize(("requested", "current", "compacted", "error"), [
    (2, 7, 3, Expired),
    (1, 7, 3, Expired),
    (8, 7, 3, FutureRevision),
    (1, 0, 0, FutureRevision),
    (-1, 7, 3, ValueError),
], ids=["just-below-compacted", "below-compacted", "future", "empty-store", "negative"])
def test_read_revision_rejects(requested: int, current: int, compacted: int,
                               error: type[Exception]) -> None:
    with pytest.raises(error):
        rules.read_revision(requested, current=current, compacted=compacted)


@pytest.mark.parametrize(("start", "first"), [(0, 1), (1, 1), (42, 42)])
def test_watch_start(start: int, first: int) -> None:
    assert rules.watch_start(start) == first


def test_watch_start_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        rules.watch_start(-1)


@pytest.mark.parametrize(("start", "compacted", "expired"), [
    (1, 0, False), (5, 4, False), (4, 4, True), (1, 4, True)])
def test_check_watch_start(start: int, compacted: int, expired: bool) -> None:
    if expired:
        with pytest.raises(Expired) as caught:
            rules.check_watch_start(start, compacted=compacted)
        assert (caught.value.requested, caught.value.compacted) == (start, compacted)
    else:
        rules.check_watch_start(start, compacted=compacted)


@pytest.mark.parametrize(("requested", "current", "compacted", "target"), [
    (5, 9, 2, 5), (9, 9, 2, 9), (2, 9, 2, None), (1, 9, 2, None), (0, 0, 0, None)],
    ids=["forward", "to-current", "same", "backwards", "empty"])
def test_compact_target(requested: int, current: int, compacted: int,
                        target: int | None) -> None:
    assert rules.compact_target(requested, current=current, compacted=compacted) == target


def test_compact_target_rejects_the_future_and_negatives() -> None:
    with pytest.raises(FutureRevision):
        rules.compact_target(10, current=9, compacted=2)
    with pytest.raises(ValueError, match="negative"):
        rules.compact_target(-1, current=9, compacted=2)


@pytest.mark.parametrize("limit", [None, 1, 500])
def test_check_limit_accepts(limit: int | None) -> None:
    rules.check_limit(limit)


@pytest.mark.parametrize("limit", [0, -1])
def test_check_limit_rejects(limit: int) -> None:
    with pytest.raises(ValueError, match="limit"):
        rules.check_limit(limit)


def test_check_write() -> None:
    rules.check_write("/a", b"")
    rules.check_write("/a")
    with pytest.raises(ValueError, match="key"):
        rules.check_write("", b"x")
    with pytest.raises(TypeError, match="bytes"):
        rules.check_write("/a", bytearray(b"x"))  # type: ignore[arg-type]


@pytest.mark.parametrize(("prefix", "end"), [
    ("", None),
    ("/registry/pods/", "/registry/pods0"),
    ("a", "b"),
    ("a\U0010ffff", "b"),
    ("\U0010ffff\U0010ffff", None),
    ("x\ud7ff", "x\ue000"),
    ("é", "ê"),
], ids=["empty", "slash", "letter", "max-tail", "all-max", "skips-surrogates", "non-ascii"])
def test_prefix_end(prefix: str, end: str | None) -> None:
    assert rules.prefix_end(prefix) == end


@pytest.mark.parametrize("prefix", ["/a/", "a\U0010ffff", "x\ud7ff", "é"])
@pytest.mark.parametrize("key_tail", ["", "z", "\U0010ffff", "\x00"])
def test_prefix_end_bounds_every_key_under_the_prefix(prefix: str, key_tail: str) -> None:
    end = rules.prefix_end(prefix)
    key = prefix + key_tail
    assert end is not None
    assert prefix <= key < end
    assert key.encode("utf-8", "surrogatepass") < end.encode("utf-8", "surrogatepass")
