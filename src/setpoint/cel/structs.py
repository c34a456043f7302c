"""Message types an environment declares, so that ``Type{field: value}`` can build them.

CEL's message construction (``JSONPatch{op: "add", path: "/x", value: 1}``) names a type the
environment must know. A :data:`StructProvider` answers, for a type name, a
:class:`StructType`: the CEL type the construction has and the type of each field it may set
(``None`` for a field it does not have). Without a provider (every environment but
MutatingAdmissionPolicy's) a construction is a compile error, ``undeclared reference to
'T'``, as in Kubernetes' other CEL environments.

:func:`to_json` turns what an expression built back into JSON values (structs into objects,
optionals unwrapped); it refuses values JSON cannot hold.

Invariants: providers are pure and answer the same :class:`StructType` (the same CEL type
object) for the same name, since object types compare by identity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from setpoint.cel import types as t
from setpoint.cel.errors import EvalError
from setpoint.cel.objects import CelList, CelMap, Optional, StructValue, UInt


@dataclass(frozen=True, slots=True)
class StructType:
    """A message type: its CEL type and its fields (``None``: every field, of type dyn)."""

    type: t.Type
    fields: Mapping[str, t.Type] | None = None

    def field(self, name: str) -> t.Type | None:
        if self.fields is None:
            return t.DYN
        return self.fields.get(name)


StructProvider = Callable[[str], "StructType | None"]

#: nesting accepted by :func:`to_json` (objects are bounded by the request size elsewhere)
MAX_DEPTH = 100


def to_json(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON: structs and maps as objects (string keys), lists, scalars."""
    if depth > MAX_DEPTH:
        raise EvalError(f"value nested deeper than {MAX_DEPTH} levels")
    if type(value) is float and not math.isfinite(value):
        raise EvalError(f"{value} is not a JSON number")
    if value is None or type(value) in (bool, str, int, float):
        return value
    if type(value) is UInt:
        return int(value)
    if type(value) is Optional:
        return to_json(value.value, depth + 1) if value.present else None
    if type(value) is StructValue:
        return {k: to_json(v, depth + 1) for k, v in value.fields.items()}
    if type(value) is list or isinstance(value, CelList):
        return [to_json(v, depth + 1) for v in value]
    if type(value) is dict or isinstance(value, CelMap):
        items = value.items()
        out: dict[str, Any] = {}
        for k, v in items:
            if type(k) is not str:
                raise EvalError(f"map key {k!r} is not a string")
            out[k] = to_json(v, depth + 1)
        return out
    raise EvalError(f"unsupported value of type {type(value).__name__} in an object")
