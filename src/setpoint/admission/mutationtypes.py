"""The CEL environment of MutatingAdmissionPolicy mutations: the admission environment plus
the types that build patches.

* ``JSONPatch{op, path, from, value}`` — one RFC 6902 operation (``op``, ``path``, ``from``
  strings, ``value`` any JSON value);
* ``Object``, ``Object.<field>``, ``Object.<field>.<field>`` ... — an apply configuration
  and its nested parts. As in Kubernetes when the schema is not attached to the
  expressions, every field is accepted and dynamically typed; that each nested type's name is
  its field path (``Object{spec: Object.spec{...}}``) is checked when the configuration is
  applied (:func:`setpoint.admission.mutation.check_type_names`);
* ``jsonpatch.escapeKey(string)`` — ``~`` as ``~0`` and ``/`` as ``~1``, for a key in a
  JSON pointer.

Invariant: the provider answers the same type object for the same name (object types compare
by identity); the memo is bounded.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from setpoint.admission.expressions import ADMISSION_LIBRARY
from setpoint.cel import types as t
from setpoint.cel.errors import NoSuchOverload
from setpoint.cel.functions import Function, Library, library, overload
from setpoint.cel.structs import StructType

OBJECT: Final = "Object"
JSON_PATCH_FIELDS: Final = {"op": t.STRING, "path": t.STRING, "from": t.STRING,
                            "value": t.DYN}
JSON_PATCH: Final = StructType(t.object_type("JSONPatch", JSON_PATCH_FIELDS), JSON_PATCH_FIELDS)
#: what a JSONPatch mutation must evaluate to
JSON_PATCH_LIST: Final = t.list_of(JSON_PATCH.type)
#: longest ``Object.a.b...`` type name a construction may use
MAX_TYPE_NAME: Final = 1024


@functools.lru_cache(maxsize=4096)
def _object_type(name: str) -> StructType:
    return StructType(t.object_type(name, {}))


def struct_type(name: str) -> StructType | None:
    """The message types of mutations (see the module doc)."""
    if name == "JSONPatch":
        return JSON_PATCH
    if (name == OBJECT or name.startswith(OBJECT + ".")) and len(name) <= MAX_TYPE_NAME:
        return _object_type(name)
    return None


def is_object(ty: t.Type) -> bool:
    """Whether ``ty`` is the root ``Object`` type (what an apply configuration must be)."""
    return ty.kind == "object" and ty.name == OBJECT


def escape_key(key: Any) -> str:
    if type(key) is not str:
        raise NoSuchOverload()
    return key.replace("~", "~0").replace("/", "~1")


def _escape_cost(args: Any, result: Any) -> int:
    return 1 + int(0.1 * len(args[0])) if args and type(args[0]) is str else 1


_FUNCTIONS: Final = library(
    Function("jsonpatch.escapeKey", (overload("string_jsonpatch_escapeKey_string", (t.STRING,),
                                              t.STRING),), escape_key, _escape_cost))
#: the functions and types mutations add to the admission environment
MUTATION_TYPES: Final = Library(_FUNCTIONS.functions, struct_type)
#: the environment of a mutation's expression (matchConditions and variables keep the
#: admission environment, as in Kubernetes, where only mutations build objects)
MUTATION_LIBRARY: Final = ADMISSION_LIBRARY | MUTATION_TYPES
