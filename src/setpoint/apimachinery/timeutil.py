"""Timestamps and ages as Kubernetes writes them.

* :func:`format_time` renders ``metav1.Time``: RFC 3339 in UTC, whole seconds, ``Z`` suffix.
* :func:`format_micro_time` renders ``metav1.MicroTime``: the same with exactly six fractional
  digits (``Event.eventTime``, ``Lease.spec.renewTime``).
* :func:`parse_time` reads any RFC 3339 timestamp (fractions, ``Z`` or a numeric offset) and
  always returns an aware datetime in UTC.
* :func:`human_duration` is ``k8s.io/apimachinery/pkg/util/duration.HumanDuration``, the text
  ``kubectl get`` shows in ``AGE`` columns; the server sends it verbatim in Table cells.

Invariants: ``parse_time(format_time(dt)) == dt`` with sub-second digits dropped, and
``parse_time(format_micro_time(dt)) == dt`` for any aware ``dt``. Naive datetimes given to the
formatters are taken to be UTC already; nothing here reads the wall clock.

>>> from datetime import datetime, timezone
>>> format_time(datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc))
'2024-01-02T03:04:05Z'
>>> human_duration(190)
'3m10s'
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from setpoint.apimachinery import regexp

__all__ = ["format_micro_time", "format_time", "human_duration", "parse_time"]

# year, month, day, hour, minute, second, fraction, utc, sign, offset hour, offset minute
_RFC3339 = regexp.Regexp(
    r"(\d{4})-(\d{2})-(\d{2})"
    r"[Tt](\d{2}):(\d{2}):(\d{2})"
    r"(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))",
)

_NANOS_PER_SECOND = 1_000_000_000
_SECOND = _NANOS_PER_SECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE


def _utc(dt: datetime) -> datetime:
    if dt.tzinfo is None or dt.utcoffset() is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def format_time(dt: datetime) -> str:
    """``2024-01-02T03:04:05Z``: UTC, truncated to whole seconds."""
    u = _utc(dt)
    # Not strftime: its %Y does not zero-pad years below 1000 on every platform.
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}"
            f"T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z")


def format_micro_time(dt: datetime) -> str:
    """``2024-01-02T03:04:05.000000Z``: UTC, always six fractional digits."""
    u = _utc(dt)
    return format_time(u)[:-1] + f".{u.microsecond:06d}Z"


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 timestamp into an aware UTC datetime.

    Fractions longer than six digits are truncated to microseconds (Python's resolution).
    Raises :class:`ValueError` for anything that is not a complete RFC 3339 date-time.
    """
    if not isinstance(text, str):
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    match = _RFC3339.groups(text)
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second, fraction, utc, sign, off_h, off_m = match
    micros = int(((fraction or "") + "000000")[:6])
    try:
        parsed = datetime(
            int(year or 0), int(month or 0), int(day or 0),
            int(hour or 0), int(minute or 0), int(second or 0), micros,
            tzinfo=UTC,
        )
    except ValueError as e:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}: {e}") from e
    if utc is None:
        off_hour, off_minute = int(off_h or 0), int(off_m or 0)
        if off_hour > 23 or off_minute > 59:
            raise ValueError(f"not an RFC 3339 timestamp: {text!r}: bad offset")
        offset = timedelta(hours=off_hour, minutes=off_minute)
        # The wall time is local to the offset; UTC is the wall time minus the offset.
        parsed = parsed - offset if sign == "+" else parsed + offset
    return parsed


def _trunc_div(a: int, b: int) -> int:
    """Integer division rounding toward zero, as Go's ``/`` on integers."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def human_duration(seconds: float) -> str:
    """A succinct age with two or three significant figures, as ``duration.HumanDuration``.

    Slightly negative ages (down to but excluding -2s) read ``0s`` to tolerate clock skew;
    anything earlier reads ``<invalid>``.
    """
    d = round(seconds * _NANOS_PER_SECOND)
    whole_seconds = _trunc_div(d, _SECOND)
    if whole_seconds < -1:
        return "<invalid>"
    if whole_seconds < 0:
        return "0s"
    if whole_seconds < 60 * 2:
        return f"{whole_seconds}s"
    minutes = d // _MINUTE
    if minutes < 10:
        s = (d // _SECOND) % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = d // _HOUR
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = divmod(hours // 24, 365)
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"
