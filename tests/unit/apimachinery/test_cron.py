"""Cron parsing and next-run computation, checked against a brute-force reference."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery import cron


def reference_day(schedule: cron.Schedule, day: datetime) -> bool:
    dom = day.day in schedule.days
    dow = (day.weekday() + 1) % 7 in schedule.weekdays
    return (dom and dow) if schedule.day_star or schedule.weekday_star else (dom or dow)


def reference_next(schedule: cron.Schedule, after: datetime) -> datetime | None:
    """Scan day by day, then minute by minute within a matching day (UTC only)."""
    day = datetime(after.year, after.month, after.day, tzinfo=UTC)
    for _ in range(366 * 5):
        if day.month in schedule.months and reference_day(schedule, day):
            for hour in sorted(schedule.hours):
                for minute in sorted(schedule.minutes):
                    found = day.replace(hour=hour, minute=minute)
                    if found > after:
                        return found
        day += timedelta(days=1)
    return None


def field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    single = number.map(str)
    ranged = st.tuples(number, number).map(lambda t: f"{min(t)}-{max(t)}")
    stepped = st.tuples(st.sampled_from(["*", str(low)]), st.integers(1, high - low + 1)).map(
        lambda t: f"{t[0]}/{t[1]}")
    part = st.one_of(st.just("*"), single, ranged, stepped)
    return st.lists(part, min_size=1, max_size=3).map(",".join)


schedules = st.tuples(field(0, 59), field(0, 23), field(1, 31), field(1, 12),
                      field(0, 6)).map(" ".join)
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1),
                        timezones=st.just(UTC))


@settings(max_examples=300, deadline=None)
@given(schedules, instants)
def test_next_matches_a_brute_force_reference(text: str, after: datetime) -> None:
    schedule = cron.parse(text)
    assert schedule.next(after, UTC) == reference_next(schedule, after)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_anything_parses_or_raises_cron_error(text: str) -> None:
    try:
        schedule = cron.parse(text)
    except cron.CronError:
        return
    found = schedule.next(datetime(2024, 1, 1, tzinfo=UTC), UTC)
    assert found is None or found > datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("text", "after", "expected"), [
    ("*/15 * * * *", "2024-01-01T00:07:30", "2024-01-01T00:15:00"),
    ("@hourly", "2024-01-01T00:00:00", "2024-01-01T01:00:00"),
    ("@daily", "2024-01-01T10:00:00", "2024-01-02T00:00:00"),
    ("@weekly", "2024-01-01T00:00:00", "2024-01-07T00:00:00"),  # a Monday; next Sunday
    ("@monthly", "2024-01-15T00:00:00", "2024-02-01T00:00:00"),
    ("@yearly", "2024-01-15T00:00:00", "2025-01-01T00:00:00"),
    ("0 9 * * mon-fri", "2024-01-05T10:00:00", "2024-01-08T09:00:00"),
    ("0 0 13 * 5", "2024-01-01T00:00:00", "2024-01-05T00:00:00"),  # Friday OR the 13th
    ("0 0 29 feb *", "2024-03-01T00:00:00", "2028-02-29T00:00:00"),
    ("30 1 * JAN ?", "2024-01-31T02:00:00", "2025-01-01T01:30:00"),
])
def test_known_schedules(text: str, after: str, expected: str) -> None:
    start = datetime.fromisoformat(after).replace(tzinfo=UTC)
    assert cron.parse(text).next(start, UTC) == datetime.fromisoformat(expected).replace(
        tzinfo=UTC)


def test_impossible_schedules_never_run() -> None:
    assert cron.parse("0 0 30 2 *").next(datetime(2024, 1, 1, tzinfo=UTC), UTC) is None


def test_time_zones_and_constant_delays() -> None:
    paris = ZoneInfo("Europe/Paris")
    after = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
    found = cron.parse("0 9 * * *").next(after, paris)
    assert found is not None
    assert found.astimezone(UTC) == datetime(2024, 6, 2, 7, 0, tzinfo=UTC)
    assert cron.parse("@every 90s").next(after, UTC) == after + timedelta(seconds=90)


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty spec string"),
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
])
def test_errors_carry_cron_messages(text: str, message: str) -> None:
    with pytest.raises(cron.CronError) as caught:
        cron.parse(text)
    assert str(caught.value) == message


def test_long_schedules_and_delays_are_refused() -> None:
    with pytest.raises(cron.CronError):
        cron.parse("* " * 1000)
    with pytest.raises(cron.CronError):
        cron.parse("@every 99999999999999h")
    with pytest.raises(cron.CronError):
        cron.parse("@every 1x")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789.hms", max_size=30))
def test_every_never_overflows(duration: str) -> None:
    try:
        schedule = cron.parse(f"@every {duration}")
    except cron.CronError:
        return
    after = datetime(2024, 1, 1, tzinfo=UTC)
    found = schedule.next(after, UTC)
    assert found is not None
    assert found > after
