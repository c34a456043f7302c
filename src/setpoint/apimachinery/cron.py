"""Cron schedules as Kubernetes' CronJobs read them: parse, and compute the next run.

The syntax is the standard one of ``robfig/cron`` (what kube-apiserver validates with and
the CronJob controller schedules with): five fields ``minute hour day-of-month month
day-of-week``, each ``*``, ``?``, a number, a name (``jan``..``dec``, ``sun``..``sat``), a
range ``a-b``, a step ``x/n`` and lists ``a,b``; the descriptors ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``), ``@hourly`` and
``@every <duration>``. Day of month and day of week combine as cron does: when either
starts with ``*`` or ``?`` both must match, otherwise either may.

Invariants: :func:`parse` accepts at most :data:`MAX_LENGTH` characters and raises
:class:`CronError` with robfig's message for anything else; :meth:`Schedule.next` returns
a time strictly after the one given, on a whole minute (``@every``: whole second), or
``None`` when nothing matches within :data:`SEARCH_YEARS` years (``0 0 30 2 *``).

Non-guarantees: ``CRON_TZ=``/``TZ=`` prefixes are refused (Kubernetes refuses them in new
CronJobs; the ``timeZone`` field replaces them). Wall-clock times that a daylight-saving
change skips are taken at the offset before the change (Go normalises them forwards); a
repeated hour runs once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

MAX_LENGTH = 1024
SEARCH_YEARS = 5
#: the longest ``@every`` delay (Go's durations end near 292 years)
MAX_EVERY = 290 * 365 * 86400.0

_MONTHS = {name: i + 1 for i, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class CronError(ValueError):
    """A schedule that does not parse (the message is robfig/cron's)."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int] | None = None


_FIELDS = (_Field("minute", 0, 59), _Field("hour", 0, 23), _Field("dom", 1, 31),
           _Field("month", 1, 12, _MONTHS), _Field("dow", 0, 6, _DAYS))


def _number(text: str, names: dict[str, int] | None) -> int:
    if names is not None and text.lower() in names:
        return names[text.lower()]
    if not text or not text.isascii() or not text.isdigit() or len(text) > 9:
        raise CronError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": '
                        "invalid syntax")
    return int(text)


def _range(expr: str, spec: _Field) -> tuple[frozenset[int], bool]:
    """The values of one comma-separated part, and whether it was a bare star."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = False
    if low_and_high[0] in ("*", "?"):
        start, end, star = spec.low, spec.high, True
        if len(low_and_high) > 1:
            raise CronError(f"too many hyphens: {expr}")
    else:
        start = _number(low_and_high[0], spec.names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _number(low_and_high[1], spec.names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _number(range_and_step[1], None)
        if len(low_and_high) == 1 and not star:
            end = spec.high  # "N/step" means "N-max/step"
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < spec.low:
        raise CronError(f"beginning of range ({start}) below minimum ({spec.low}): {expr}")
    if end > spec.high:
        raise CronError(f"end of range ({end}) above maximum ({spec.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return frozenset(range(start, end + 1, step)), star


def _parse_duration(text: str) -> float:
    """A Go duration (``1h30m``, ``90s``), in seconds."""
    rest, total = text, 0.0
    if not rest or rest == "0":
        return 0.0
    while rest:
        i = 0
        while i < len(rest) and (rest[i].isdigit() or rest[i] == "."):
            i += 1
        number, rest = rest[:i], rest[i:]
        j = 0
        while j < len(rest) and not (rest[j].isdigit() or rest[j] == "."):
            j += 1
        unit, rest = rest[:j], rest[j:]
        if not number or unit not in _UNITS or not number.isascii():
            raise CronError(f'failed to parse duration {text}: time: invalid duration "{text}"')
        try:
            total += float(number) * _UNITS[unit]
        except ValueError as e:
            raise CronError(f'failed to parse duration {text}: time: invalid duration '
                            f'"{text}"') from e
    return total


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule: the allowed values of each field, or a constant delay."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    day_star: bool = False
    weekday_star: bool = False
    #: ``@every``: seconds between runs (0 for field schedules)
    every: float = 0.0

    def day_matches(self, day: datetime) -> bool:
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return dom and dow
        return dom or dow

    def next(self, after: datetime, zone: tzinfo) -> datetime | None:
        """The first run strictly after ``after`` (aware), in ``zone``'s wall clock."""
        if self.every:
            delay = max(1.0, float(int(self.every)))
            return after.replace(microsecond=0) + timedelta(seconds=delay)
        local = after.astimezone(zone)
        wall = local.replace(tzinfo=None, second=0, microsecond=0) + timedelta(minutes=1)
        limit = wall.year + SEARCH_YEARS
        while wall.year <= limit:
            if wall.month not in self.months:
                year, month = (wall.year + 1, 1) if wall.month == 12 else (
                    wall.year, wall.month + 1)
                wall = datetime(year, month, 1)
                continue
            if not self.day_matches(wall):
                wall = datetime(wall.year, wall.month, wall.day) + timedelta(days=1)
                continue
            if wall.hour not in self.hours:
                wall = wall.replace(minute=0) + timedelta(hours=1)
                continue
            if wall.minute not in self.minutes:
                wall += timedelta(minutes=1)
                continue
            found = wall.replace(tzinfo=zone)
            if found > after:
                return found
            wall += timedelta(minutes=1)
        return None


def parse(text: str) -> Schedule:
    """Parse a schedule as ``cron.ParseStandard`` does (see the module docstring)."""
    if len(text) > MAX_LENGTH:
        raise CronError(f"schedule longer than {MAX_LENGTH} characters")
    if not text:
        raise CronError("empty spec string")
    if text.startswith("TZ=") or text.startswith("CRON_TZ="):
        raise CronError("time zones in the schedule are not supported")
    if text.startswith("@"):
        if text.startswith("@every "):
            delay = _parse_duration(text[len("@every "):])
            if delay <= 0:
                raise CronError(f"failed to parse duration {text}: delay must be positive")
            if delay > MAX_EVERY:
                raise CronError(f'failed to parse duration {text}: time: invalid duration '
                                f'"{text[len("@every "):]}"')
            return Schedule(every=delay)
        if text not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    parts = text.split()
    if len(parts) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(parts)}: [{' '.join(parts)}]")
    values: list[frozenset[int]] = []
    stars: list[bool] = []
    for part, spec in zip(parts, _FIELDS, strict=True):
        allowed: set[int] = set()
        star = False
        for expr in part.split(","):
            found, was_star = _range(expr, spec)
            allowed |= found
            star = star or was_star
        values.append(frozenset(allowed))
        stars.append(star)
    return Schedule(minutes=values[0], hours=values[1], days=values[2], months=values[3],
                    weekdays=values[4], day_star=stars[2], weekday_star=stars[4])
