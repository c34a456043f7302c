"""Reading decoded JSON whose shape is not trusted: a member that should be an object or an
array, taken as empty when it is anything else (absent, ``null``, a string ...).

For code that reads objects validation already checked, or that must not fail on what it
does not understand (printers, controllers, status helpers). Validation itself reports the
wrong shape instead of using these.

Invariants: the value itself is returned when it has the shape (no copy: writes to it are
writes to the object); otherwise a new empty ``dict`` or ``list`` each call, so a caller that
writes to it changes nothing shared.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_dict", "as_list", "objects_in"]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object (a ``dict``), else a new empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array (a ``list``), else a new empty one."""
    return value if isinstance(value, list) else []


def objects_in(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of ``value`` if it is a JSON array (anything else in it skipped),
    else a new empty list."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
