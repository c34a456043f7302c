"""Deep copies of JSON values: the one way the server copies an object.

Invariant: the copy equals the original and shares no dict or list with it; scalars (str,
int, float, bool, None) are immutable and may be shared. The values copied are decoded JSON
(API objects, patches, schema defaults), which cannot hold NaN or Infinity: for them an
orjson round trip is exact and the fastest copy there is. What orjson cannot encode exactly
(integers beyond 64 bits, non-string keys, types other than JSON's) is copied by walking it.
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson

T = TypeVar("T")


def deep_copy(value: T) -> T:
    """A deep copy of the JSON value ``value`` (see the module's invariant)."""
    try:
        copied: T = orjson.loads(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return _walk(value)  # type: ignore[no-any-return]
    return copied


def _walk(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v) for v in value]
    return value
