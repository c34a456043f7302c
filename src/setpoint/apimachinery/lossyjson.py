"""JSON of text that arrived as bytes that are not UTF-8.

An HTTP header's bytes that are not UTF-8 are read as lone surrogates (``surrogateescape``),
and orjson refuses to encode those: a Status message or an audit event that quotes such a
header (an ``Impersonate-User``, a ``User-Agent``) could not be written at all. :func:`dumps`
writes each such character as U+FFFD instead, as Go's ``encoding/json`` writes invalid UTF-8
(so kube-apiserver's answers and audit events read the same).

Invariants: ``dumps(v) == orjson.dumps(v)`` for every ``v`` orjson encodes (the replacing walk
runs only after orjson refused, so the usual case costs nothing more); the walk is iterative
(no recursion limit, whatever the nesting); a value orjson refuses for another reason still
raises its ``TypeError``.
"""

from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any, option: int | None = None) -> bytes:
    try:
        return orjson.dumps(value, option=option)
    except TypeError:
        return orjson.dumps(scrub(value), option=option)


def text(value: str) -> str:
    """``value`` with every lone surrogate replaced by U+FFFD (one per undecodable byte)."""
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate no undecodable byte stands for
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in value)


def scrub(value: Any) -> Any:
    """A copy of the JSON ``value`` (dicts, lists, tuples, scalars) whose strings, keys
    included, are :func:`text`; other values are kept as they are."""
    if isinstance(value, str):
        return text(value)
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (source, parent, key in parent)
    while stack:
        source, parent, key = stack.pop()
        if isinstance(source, dict):
            copy: Any = {}
            for k, v in source.items():
                k = text(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((v, copy, k))
        elif isinstance(source, list | tuple):
            copy = [None] * len(source)
            for i, v in enumerate(source):
                stack.append((v, copy, i))
        else:
            copy = text(source) if isinstance(source, str) else source
        parent[key] = copy
    return root[0]
