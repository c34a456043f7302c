"""Timestamps and durations as cel-go reads and prints them (Go's ``time`` package rules).

* :func:`parse_timestamp`: RFC 3339 (``time.RFC3339``), fractional seconds to nanoseconds,
  ``Z`` or a numeric offset; the result must lie in years 0001..9999.
* :func:`parse_duration`: Go's ``time.ParseDuration`` (``1h30m``, ``-1.5s``, ``300ms``,
  ``2us``/``2µs``), exact to the nanosecond, within int64 nanoseconds.
* :func:`format_timestamp` / :func:`format_duration`: ``string(ts)`` and ``string(d)``.
* :func:`local_fields`: calendar fields of an instant in a time zone (IANA name, ``UTC``, or a
  ``±HH:MM`` offset), for ``getHours()`` and friends.

Not guaranteed: IANA zone names need the system time-zone database (``zoneinfo``); without
it such a name is an error, while ``UTC`` and numeric offsets always work.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Final
from zoneinfo import ZoneInfo

from setpoint.apimachinery import regexp
from setpoint.cel.errors import EvalError
from setpoint.cel.objects import NANOS, Duration, Timestamp

_RFC3339: Final = regexp.Regexp(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})")
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_LAYOUT: Final = "2006-01-02T15:04:05Z07:00"

_UNITS: Final = {
    "ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000,
    "s": NANOS, "m": 60 * NANOS, "h": 3600 * NANOS,
}
_INT64_MAX: Final = (1 << 63) - 1


def parse_timestamp(text: str) -> Timestamp:
    m = _RFC3339.groups(text)
    if m is None:
        raise EvalError(f'parsing time "{text}" as "{_LAYOUT}": cannot parse "{text}"')
    year, month, day, hour, minute, second = (int(g or 0) for g in m[:6])
    frac, zone = m[6] or "", m[7] or "Z"
    try:
        naive = datetime(year, month, day, hour, minute, second)
    except ValueError:
        raise EvalError(f'parsing time "{text}": day out of range') from None
    if hour > 23 or minute > 59 or second > 59:
        raise EvalError(f'parsing time "{text}": out of range')
    offset = 0
    if zone != "Z":
        sign = -1 if zone[0] == "-" else 1
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 24 or om > 59:
            raise EvalError(f'parsing time "{text}": time zone offset out of range')
        offset = sign * (oh * 3600 + om * 60)
    whole = (naive - datetime(1970, 1, 1)) // timedelta(seconds=1) - offset
    nanos = int((frac + "000000000")[:9]) if frac else 0
    return Timestamp(whole * NANOS + nanos, offset)


def format_timestamp(ts: Timestamp) -> str:
    """Go's ``time.RFC3339Nano`` in the offset the timestamp was written with (``Z`` for UTC);
    trailing zeros of the fraction trimmed."""
    seconds, nanos = divmod(ts.nanos, NANOS)
    try:
        dt = _EPOCH + timedelta(seconds=seconds + ts.offset)
    except OverflowError:
        dt, ts = _EPOCH + timedelta(seconds=seconds), Timestamp(ts.nanos)
    text = (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"
            f"T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}")
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    if not ts.offset:
        return text + "Z"
    sign = "-" if ts.offset < 0 else "+"
    hours, minutes = divmod(abs(ts.offset) // 60, 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


def parse_duration(text: str) -> Duration:
    """Go's ``time.ParseDuration``; errors read ``time: invalid duration "x"``."""
    s = text
    neg = False
    if s and s[0] in "+-":
        neg = s[0] == "-"
        s = s[1:]
    if s == "0":
        return Duration(0)
    if not s:
        raise EvalError(f'time: invalid duration "{text}"')
    total = 0
    while s:
        i = 0
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        whole = s[:i]
        s = s[i:]
        frac = ""
        if s.startswith("."):
            j = 1
            while j < len(s) and s[j].isascii() and s[j].isdigit():
                j += 1
            frac = s[1:j]
            s = s[j:]
        if not whole and not frac:
            raise EvalError(f'time: invalid duration "{text}"')
        j = 0
        while j < len(s) and not (s[j] == "." or (s[j].isascii() and s[j].isdigit())):
            j += 1
        unit = s[:j]
        s = s[j:]
        if not unit:
            raise EvalError(f'time: missing unit in duration "{text}"')
        scale = _UNITS.get(unit)
        if scale is None:
            raise EvalError(f'time: unknown unit "{unit}" in duration "{text}"')
        value = int(whole or "0") * scale
        if frac:
            value += int(frac) * scale // 10 ** len(frac)
        total += value
        if total > _INT64_MAX + (1 if neg else 0):
            raise EvalError(f'time: invalid duration "{text}"')
    return Duration(-total if neg else total)


_OPENAPI_DATETIME: Final = regexp.Regexp(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?"
    r"(Z|z|[+-]\d{2}:?\d{2})?")
_OPENAPI_DURATION_PART: Final = regexp.Regexp(r"([0-9]+)\s*([A-Za-z\x{b5}]+)")
_ZONE_OFFSET: Final = regexp.Regexp(r"([+-]?)(\d{2}):(\d{2})")
_OPENAPI_UNITS: Final = (
    (1, ("ns", "nano")), (1_000, ("us", "\u00b5s", "micro")), (1_000_000, ("ms", "milli")),
    (NANOS, ("s", "sec")), (60 * NANOS, ("m", "min")), (3600 * NANOS, ("h", "hr", "hour")),
    (86_400 * NANOS, ("d", "day")), (7 * 86_400 * NANOS, ("w", "wk", "week")),
)


def parse_openapi_datetime(text: str) -> Timestamp:
    """``strfmt.ParseDateTime``: RFC 3339, also with a lower-case ``t``/``z``, a space for
    ``T``, an offset without colon, no seconds, or no zone (UTC)."""
    m = _OPENAPI_DATETIME.groups(text)
    if m is None:
        raise EvalError(f'parsing time "{text}": not a date-time')
    year, month, day, hour, minute = m[:5]
    second, frac, zone = m[5] or "00", m[6], m[7] or "Z"
    if zone in ("Z", "z"):
        zone = "Z"
    elif ":" not in zone:
        zone = zone[:3] + ":" + zone[3:]
    return parse_timestamp(f"{year}-{month}-{day}T{hour}:{minute}:{second}"
                           f"{'.' + frac if frac else ''}{zone}")


def parse_openapi_duration(text: str) -> Duration:
    """``strfmt.ParseDuration``: Go's syntax, else ``<n> <unit>`` parts with longer unit names
    and days and weeks (``3d``, ``1 week``, ``2 hours``)."""
    try:
        return parse_duration(text)
    except EvalError:
        pass
    total, matched = 0, False
    for _, number, word in _OPENAPI_DURATION_PART.finditer(text):
        factor, unit = int(number or 0), (word or "").strip().lower()
        for scale, variants in _OPENAPI_UNITS:
            last = len(variants) - 1
            if any(v == unit or (i == last and unit.startswith(v))
                   for i, v in enumerate(variants)):
                total += factor * scale
                matched = True
                break
    if not matched:
        raise EvalError(f"unable to parse {text} as duration")
    return Duration(total)


def format_duration(d: Duration) -> str:
    """``string(duration)``: seconds with the shortest decimal fraction, then ``s``."""
    sign = "-" if d.nanos < 0 else ""
    whole, nanos = divmod(abs(d.nanos), NANOS)
    if nanos:
        return f"{sign}{whole}.{f'{nanos:09d}'.rstrip('0')}s"
    return f"{sign}{whole}s"


@dataclass(frozen=True, slots=True)
class LocalFields:
    year: int
    month: int  # 1..12
    day: int  # 1..31
    weekday: int  # 0 = Sunday
    yearday: int  # 1..366
    hour: int
    minute: int
    second: int
    millisecond: int


def _zone(name: str) -> tzinfo:
    if name in ("UTC", "Z", ""):
        return UTC
    m = _ZONE_OFFSET.groups(name)
    if m:
        delta = timedelta(hours=int(m[1] or 0), minutes=int(m[2] or 0))
        return timezone(-delta if m[0] == "-" else delta)
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):
        raise EvalError(f"unknown time zone {name}") from None


def local_fields(ts: Timestamp, zone: str = "UTC") -> LocalFields:
    seconds, nanos = divmod(ts.nanos, NANOS)
    try:
        dt = (_EPOCH + timedelta(seconds=seconds)).astimezone(_zone(zone))
    except OverflowError:
        raise EvalError("timestamp overflow") from None
    return LocalFields(dt.year, dt.month, dt.day, (dt.weekday() + 1) % 7,
                       dt.timetuple().tm_yday, dt.hour, dt.minute, dt.second,
                       nanos // 1_000_000)
