"""Kubernetes' IntOrString as a count or a percentage of a total (``maxSurge: 25%``).

:func:`scaled` is ``GetScaledValueFromIntOrPercent``: an integer is itself, ``"N%"`` is N % of
the total, rounded up or down as asked. :func:`percent_errors` says what validation says of
a value that is neither a non-negative integer nor a percent string.

Invariants: pure; never raises on what :func:`percent_errors` accepts; bounded (a percent
string has at most 10 digits).
"""

from __future__ import annotations

from typing import Any

PERCENT_MESSAGE = ("a valid percent string must be a numeric string followed by an ending '%' "
                   "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")


def _percent(value: str) -> int | None:
    digits = value[:-1]
    if not value.endswith("%") or not digits or len(digits) > 10 or not digits.isascii() \
            or not digits.isdigit():
        return None
    return int(digits)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def percent_errors(value: Any) -> list[str]:
    """Why ``value`` is not a non-negative integer or a percent string."""
    if is_int(value):
        return [] if value >= 0 else ["must be greater than or equal to 0"]
    if isinstance(value, str):
        return [] if _percent(value) is not None else [PERCENT_MESSAGE]
    return [PERCENT_MESSAGE]


def over_100_percent(value: Any) -> bool:
    """Whether ``value`` is a percent string above 100%."""
    if isinstance(value, str):
        number = _percent(value)
        return number is not None and number > 100
    return False


def scaled(value: Any, total: int, *, round_up: bool) -> int:
    """``value`` as a count out of ``total``; anything unreadable counts as 0."""
    if is_int(value):
        return max(int(value), 0)
    if isinstance(value, str):
        number = _percent(value)
        if number is None:
            return 0
        whole, rest = divmod(number * total, 100)
        return whole + (1 if round_up and rest else 0)
    return 0


def is_zero(value: Any) -> bool:
    """Whether ``value`` is 0 or ``"0%"`` (validation's "may not be 0 when ..." test)."""
    if is_int(value):
        return bool(value == 0)
    return isinstance(value, str) and _percent(value) == 0
