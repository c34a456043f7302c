"""Continue tokens of a paginated LIST: where the next page starts, and at which revision.

A token is the unpadded URL-safe base64 of ``{"v": "meta.k8s.io/v1", "rv": R, "start": K}``
(Kubernetes' form): the next page lists the keys after ``K`` as they were at revision ``R``,
so every page of one LIST shows the same snapshot.

Invariants: :func:`decode` of what :func:`encode` made for a key under the listed prefix gives
back its revision and key; anything else a client sends (another server's version, a revision
that is not a positive integer, a key outside the listed prefix or holding a NUL, bytes that
are not base64 or JSON, a token over :data:`MAX_LENGTH`) is a 400 ``BadRequest`` with
Kubernetes' wording, never another exception.

Non-guarantees: tokens are not signed. A client may forge one for another revision or start
key of the same prefix; that only lists what the client may list anyway.
"""

from __future__ import annotations

import base64
from typing import Final

import orjson

from setpoint.apimachinery import errors

#: the longest continue token taken (the ones this server makes are far shorter)
MAX_LENGTH: Final = 8192

_VERSION: Final = "meta.k8s.io/v1"


def encode(revision: int, key: str) -> str:
    """The token of a page that ended with ``key``, of a list at ``revision``."""
    raw = orjson.dumps({"v": _VERSION, "rv": revision, "start": key})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, prefix: str) -> tuple[int, str]:
    """The revision and the last key of a continue token for a list of ``prefix``; 400 for
    anything this server did not make (see the module invariants)."""
    if len(token) > MAX_LENGTH:
        raise errors.BadRequest("continue key is not valid: too long")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
    except (ValueError, orjson.JSONDecodeError):
        raise errors.BadRequest("continue key is not valid: illegal base64 data or JSON") \
            from None
    if not isinstance(data, dict):
        raise errors.BadRequest("continue key is not valid: not an object")
    version = data.get("v")
    if version != _VERSION:
        raise errors.BadRequest("continue key is not valid: server does not recognize this "
                                f"encoded version {orjson.dumps(version).decode()}")
    revision, start = data.get("rv"), data.get("start")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision <= 0:
        raise errors.BadRequest("continue key is not valid: incorrect encoded start "
                                "resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start.startswith(prefix) or start == prefix or \
            "\x00" in start:
        raise errors.BadRequest("continue key is not valid: the encoded start key is not a "
                                "key of this list")
    return revision, start
