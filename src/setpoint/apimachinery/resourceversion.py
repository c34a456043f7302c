"""resourceVersion values as Kubernetes reads them.

A resourceVersion is opaque to clients, but the server parses the ones it is sent with
``strconv.ParseUint(s, 10, 64)``: ASCII decimal digits only (leading zeros allowed), at most
2^64 - 1. ``" 1"``, ``"+1"``, ``"1_000"``, ``"-1"`` and ``"\\u0661"`` (an Arabic-Indic one) are not
resourceVersions, although Python's ``int()`` reads them all.

Where kube-apiserver meets one (and what setpoint answers, never a 500):

* the ``resourceVersion`` query parameter of get, list and watch: Go's parse error, which
  kube-apiserver answers with 500; setpoint answers 400 with the same message;
* ``metadata.resourceVersion`` in the body of an update or in a patched object: parsed
  and compared as a number (``"01"`` is revision 1), an unparsable one fails the update
  (500 from kube-apiserver); setpoint answers 422 on that field;
* ``preconditions.resourceVersion`` of a delete: compared as a string, so anything but the
  exact current value is a 409 precondition failure — parsing plays no part;
* the revision inside a continue token: a JSON integer of the token this server made.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["ResourceVersionError", "parse"]

_MAX = (1 << 64) - 1


class ResourceVersionError(ValueError):
    """Not a resourceVersion; the message is Go's ``strconv.ParseUint`` error."""


def parse(value: Any) -> int:
    """The revision ``value`` names; :class:`ResourceVersionError` unless it is a string of
    ASCII decimal digits within uint64."""
    if not isinstance(value, str):
        raise ResourceVersionError(f"must be a string, not {type(value).__name__}")
    shown = orjson.dumps(value if len(value) <= 64 else value[:64] + "...").decode()
    if not value or not value.isascii() or not value.isdigit():
        raise ResourceVersionError(f"strconv.ParseUint: parsing {shown}: invalid syntax")
    if len(value.lstrip("0")) > 20 or int(value) > _MAX:
        raise ResourceVersionError(f"strconv.ParseUint: parsing {shown}: value out of range")
    return int(value)
