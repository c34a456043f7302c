"""Table tests for setpoint.apimachinery.timeutil (cases from apimachinery's duration_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from setpoint.apimachinery import timeutil

SECOND = 1.0
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
YEAR = 365 * DAY
MS = 0.001
NS = 1e-9

HUMAN = [
    (SECOND, "1s"),
    (70 * SECOND, "70s"),
    (190 * SECOND, "3m10s"),
    (70 * MINUTE, "70m"),
    (47 * HOUR, "47h"),
    (49 * HOUR, "2d1h"),
    ((8 * 24 + 2) * HOUR, "8d"),
    (367 * DAY, "367d"),
    (2 * YEAR + 25 * HOUR, "2y1d"),
    (8 * YEAR + 2 * HOUR, "8y"),
    # boundaries
    (-2 * SECOND, "<invalid>"),
    (-100 * SECOND, "<invalid>"),
    (-2 * SECOND + NS, "0s"),
    (-1 * SECOND, "0s"),
    (0, "0s"),
    (SECOND - MS, "0s"),
    (2 * MINUTE - MS, "119s"),
    (2 * MINUTE, "2m"),
    (2 * MINUTE + SECOND, "2m1s"),
    (10 * MINUTE - MS, "9m59s"),
    (10 * MINUTE, "10m"),
    (10 * MINUTE + SECOND, "10m"),
    (3 * HOUR - MS, "179m"),
    (3 * HOUR, "3h"),
    (3 * HOUR + MINUTE, "3h1m"),
    (8 * HOUR - MS, "7h59m"),
    (8 * HOUR, "8h"),
    (8 * HOUR + 59 * MINUTE, "8h"),
    (2 * DAY - MS, "47h"),
    (2 * DAY, "2d"),
    (2 * DAY + HOUR, "2d1h"),
    (8 * DAY - MS, "7d23h"),
    (8 * DAY, "8d"),
    (8 * DAY + 23 * HOUR, "8d"),
    (2 * YEAR - MS, "729d"),
    (2 * YEAR, "2y"),
    (2 * YEAR + 23 * HOUR + 59 * MINUTE, "2y"),
    (2 * YEAR + DAY - MS, "2y"),
    (2 * YEAR + DAY, "2y1d"),
    (3 * YEAR, "3y"),
    (7 * YEAR, "7y"),
    (8 * YEAR - MS, "7y364d"),
    (8 * YEAR, "8y"),
    (8 * YEAR + 364 * DAY, "8y"),
    (9 * YEAR, "9y"),
    (100 * YEAR, "100y"),
]


@pytest.mark.parametrize(("seconds", "want"), HUMAN, ids=[f"{s!r}->{w}" for s, w in HUMAN])
def test_human_duration(seconds: float, want: str) -> None:
    assert timeutil.human_duration(seconds) == want


def _dt(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
        micro: int = 0, tz: timezone = UTC) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)


FORMAT = [
    ("utc", _dt(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.000000Z"),
    ("fraction-truncated", _dt(2024, 1, 2, 3, 4, 5, 999999), "2024-01-02T03:04:05Z",
     "2024-01-02T03:04:05.999999Z"),
    ("offset-converted", _dt(2024, 1, 2, 3, 4, 5, 120, tz=timezone(timedelta(hours=2))),
     "2024-01-02T01:04:05Z", "2024-01-02T01:04:05.000120Z"),
    ("negative-offset-crosses-day", _dt(2024, 12, 31, 23, 30, 0,
                                        tz=timezone(timedelta(hours=-1))),
     "2025-01-01T00:30:00Z", "2025-01-01T00:30:00.000000Z"),
    ("naive-is-utc", datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05Z",
     "2024-01-02T03:04:05.000000Z"),
    ("small-year", _dt(999, 1, 1), "0999-01-01T00:00:00Z", "0999-01-01T00:00:00.000000Z"),
]


@pytest.mark.parametrize(("dt", "want", "want_micro"), [c[1:] for c in FORMAT],
                         ids=[c[0] for c in FORMAT])
def test_format(dt: datetime, want: str, want_micro: str) -> None:
    assert timeutil.format_time(dt) == want
    assert timeutil.format_micro_time(dt) == want_micro


PARSE = [
    ("z", "2024-01-02T03:04:05Z", _dt(2024, 1, 2, 3, 4, 5)),
    ("lowercase", "2024-01-02t03:04:05z", _dt(2024, 1, 2, 3, 4, 5)),
    ("micro", "2024-01-02T03:04:05.123456Z", _dt(2024, 1, 2, 3, 4, 5, 123456)),
    ("milli", "2024-01-02T03:04:05.5Z", _dt(2024, 1, 2, 3, 4, 5, 500000)),
    ("nano-truncated", "2024-01-02T03:04:05.123456789Z", _dt(2024, 1, 2, 3, 4, 5, 123456)),
    ("plus-zero", "2024-01-02T03:04:05+00:00", _dt(2024, 1, 2, 3, 4, 5)),
    ("kopf-event-time", "2024-01-02T03:04:05.654321+00:00", _dt(2024, 1, 2, 3, 4, 5, 654321)),
    ("plus-offset", "2024-01-02T03:04:05+05:30", _dt(2024, 1, 1, 21, 34, 5)),
    ("minus-offset", "2024-01-02T23:04:05-02:00", _dt(2024, 1, 3, 1, 4, 5)),
    ("leap-day", "2024-02-29T00:00:00Z", _dt(2024, 2, 29)),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in PARSE], ids=[c[0] for c in PARSE])
def test_parse_time(text: str, want: datetime) -> None:
    got = timeutil.parse_time(text)
    assert got == want
    assert got.tzinfo is UTC


BAD = [
    ("empty", ""),
    ("junk", "yesterday"),
    ("date-only", "2024-01-02"),
    ("no-zone", "2024-01-02T03:04:05"),
    ("space-separator", "2024-01-02 03:04:05Z"),
    ("empty-fraction", "2024-01-02T03:04:05.Z"),
    ("bad-month", "2024-13-02T03:04:05Z"),
    ("bad-day", "2023-02-29T03:04:05Z"),
    ("bad-hour", "2024-01-02T24:04:05Z"),
    ("leap-second", "2024-01-02T23:59:60Z"),
    ("bad-offset", "2024-01-02T03:04:05+25:00"),
    ("short-offset", "2024-01-02T03:04:05+0100"),
    ("trailing", "2024-01-02T03:04:05Zjunk"),
    ("leading-space", " 2024-01-02T03:04:05Z"),
    ("unicode-digits", "\uff12\uff10\uff12\uff14-01-02T03:04:05Z"),
]


@pytest.mark.parametrize("text", [c[1] for c in BAD], ids=[c[0] for c in BAD])
def test_parse_time_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        timeutil.parse_time(text)


ROUNDTRIP = [
    _dt(2024, 1, 2, 3, 4, 5, 678901),
    _dt(1970, 1, 1),
    _dt(9999, 12, 31, 23, 59, 59, 999999),
]


@pytest.mark.parametrize("dt", ROUNDTRIP, ids=str)
def test_roundtrip(dt: datetime) -> None:
    assert timeutil.parse_time(timeutil.format_micro_time(dt)) == dt
    assert timeutil.parse_time(timeutil.format_time(dt)) == dt.replace(microsecond=0)
