"""The JSON patch (RFC 6902) that turns one JSON value into another.

A mutating admission hook returns the object as it wants it; the AdmissionReview answer is a
JSONPatch from the object it was sent. :func:`json_diff` computes one::

    >>> json_diff({"metadata": {"name": "a"}}, {"metadata": {"name": "a", "labels": {"x": "1"}}})
    [{'op': 'add', 'path': '/metadata/labels', 'value': {'x': '1'}}]

Invariants: applying the result to ``old`` (with
:func:`setpoint.apimachinery.patch.json_patch`) gives a value equal to ``new``; equal values
give ``[]``; objects are compared key by key (``add``, ``remove``, ``replace``), an array
that changed is replaced whole (no moves are looked for, so the patch is correct rather than
minimal); numbers compare as JSON does (``1 == 1.0``), booleans never equal numbers; inputs
are never mutated and the patch shares no mutable structure with them.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery.jsoncopy import deep_copy

__all__ = ["json_diff"]


def _token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _diff(old: Any, new: Any, path: str, out: list[dict[str, Any]]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                out.append({"op": "remove", "path": f"{path}/{_token(key)}"})
        for key, value in new.items():
            where = f"{path}/{_token(key)}"
            if key not in old:
                out.append({"op": "add", "path": where, "value": deep_copy(value)})
            else:
                _diff(old[key], value, where, out)
        return
    if not _same(old, new):
        out.append({"op": "replace", "path": path, "value": deep_copy(new)})


def json_diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """The JSON patch from ``old`` to ``new`` (see the module doc)."""
    out: list[dict[str, Any]] = []
    _diff(old, new, "", out)
    return out
