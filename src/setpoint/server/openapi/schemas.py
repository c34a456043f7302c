"""Schema rewriting between the OpenAPI forms the server publishes.

Definitions are kept in OpenAPI v2 form (``#/definitions/`` references), as Kubernetes
publishes them in ``swagger.json``. From there:

* :func:`to_v3` gives the OpenAPI v3 form: references point into ``#/components/schemas/``,
  and a reference with siblings (a description) is wrapped in ``allOf``, as kube-openapi's v3
  builder does (kubectl's explain and strategic-merge lookups follow ``allOf[0]``);
* :func:`structural_v2` is apiextensions' ``ToStructuralOpenAPIV2`` for a CRD's
  ``openAPIV3Schema``: what OpenAPI v2 (and kubectl's client-side model of it) cannot express
  is removed, so that every published schema parses in kubectl;
* :func:`unfold` is apiextensions' ``Unfold``: ``x-kubernetes-int-or-string`` becomes an
  explicit ``anyOf`` of integer and string in the v3 form.

All functions are pure and return new values; the input is never mutated. Only schema
keywords are walked: the names in ``properties`` (``$ref`` and ``x-...`` are valid property
names, JSONSchemaProps has both) and the values of ``enum``, ``default`` or extensions are data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Obj = dict[str, Any]

V2_PREFIX = "#/definitions/"
V3_PREFIX = "#/components/schemas/"

_MAPS = ("properties", "patternProperties", "definitions")
_ONE = ("not", "additionalItems")
_LISTS = ("allOf", "anyOf", "oneOf")

#: the schema keywords OpenAPI v2 knows (gnostic's ``Schema`` message), besides ``x-`` ones
V2_KEYWORDS = frozenset({
    "$ref", "format", "title", "description", "default", "multipleOf", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties", "required", "enum",
    "additionalProperties", "type", "items", "allOf", "properties", "discriminator", "readOnly",
    "xml", "externalDocs", "example",
})


def _map_children(schema: Obj, fn: Callable[[Any], Any]) -> Obj:
    """A copy of ``schema`` with ``fn`` applied to each direct subschema."""
    out: Obj = {}
    for key, value in schema.items():
        if key in _MAPS and isinstance(value, dict):
            out[key] = {name: fn(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = fn(value)
        elif key == "items" and isinstance(value, list):
            out[key] = [fn(sub) for sub in value]
        elif key in _ONE and isinstance(value, dict):
            out[key] = fn(value)
        elif key in _LISTS and isinstance(value, list):
            out[key] = [fn(sub) for sub in value]
        else:
            out[key] = value
    return out


def subschemas(schema: Any) -> Iterator[Any]:
    """The schemas directly inside ``schema`` (not property names, not data)."""
    if not isinstance(schema, dict):
        return
    for key, value in schema.items():
        if key in _MAPS and isinstance(value, dict):
            yield from value.values()
        elif key in ("items", "additionalProperties", *_ONE) and isinstance(value, dict):
            yield value
        elif key in ("items", *_LISTS) and isinstance(value, list):
            yield from value


def references(schema: Any) -> Iterator[str]:
    """The definition names ``schema`` refers to (``#/definitions/NAME``), depth first."""
    if not isinstance(schema, dict):
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(V2_PREFIX):
        yield ref[len(V2_PREFIX):]
    for sub in subschemas(schema):
        yield from references(sub)


def ref(name: str) -> Obj:
    return {"$ref": V2_PREFIX + name}


def to_v3(schema: Any) -> Any:
    """The OpenAPI v3 form of a v2-form schema (see the module docstring)."""
    if not isinstance(schema, dict):
        return schema
    out = _map_children(schema, to_v3)
    target = out.get("$ref")
    if isinstance(target, str):
        if target.startswith(V2_PREFIX):
            target = V3_PREFIX + target[len(V2_PREFIX):]
        if len(out) == 1:
            return {"$ref": target}
        del out["$ref"]
        out["allOf"] = [{"$ref": target}]
    return out


def _is_true(schema: Obj, key: str) -> bool:
    return schema.get(key) is True


def structural_v2(schema: Any) -> Any:
    """``ToStructuralOpenAPIV2`` of a structural CRD schema, and only v2 keywords kept.

    Junctors (``allOf``/``anyOf``/``oneOf``/``not``) are dropped; a ``nullable`` node loses its
    type, properties and items; a node preserving unknown fields loses its properties and
    items, and its type if that was ``object``; an array without items loses its type; a
    nullable property is not required. Keywords v2 has no place for (``nullable`` and
    others) are left out, extensions (``x-...``) kept.
    """
    if not isinstance(schema, dict):
        return schema
    node = {k: v for k, v in schema.items()
            if (k in V2_KEYWORDS or k.startswith("x-")) and k != "allOf"}
    nullable = _is_true(schema, "nullable")
    preserve = _is_true(schema, "x-kubernetes-preserve-unknown-fields")
    if nullable:
        node.pop("type", None)
    if nullable or preserve:
        node.pop("items", None)
        node.pop("properties", None)
    if "items" not in node and node.get("type") == "array":
        node.pop("type")
    if preserve and node.get("type") == "object":
        node.pop("type")
    properties = node.get("properties")
    required = node.get("required")
    if isinstance(properties, dict) and isinstance(required, list):
        nullable_props = {name for name, sub in properties.items()
                          if isinstance(sub, dict) and _is_true(sub, "nullable")}
        if nullable_props:
            node["required"] = [r for r in required if r not in nullable_props]
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and _is_true(extra, "nullable"):
        node.pop("required", None)
    if not node.get("required"):
        node.pop("required", None)
    return _map_children(node, structural_v2)


_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


def unfold(schema: Any) -> Any:
    """apiextensions' ``Unfold``: ``x-kubernetes-int-or-string`` as an explicit ``anyOf``."""
    if not isinstance(schema, dict):
        return schema
    out = _map_children(schema, unfold)
    if not _is_true(out, "x-kubernetes-int-or-string"):
        return out
    any_of, all_of = out.get("anyOf"), out.get("allOf")
    if any_of == _INT_OR_STRING or (isinstance(all_of, list) and all_of
                                    and all_of[0] == {"anyOf": _INT_OR_STRING}):
        return out
    if any_of is None:
        out["anyOf"] = [dict(s) for s in _INT_OR_STRING]
    else:
        out["allOf"] = [{"anyOf": [dict(s) for s in _INT_OR_STRING]}, *(all_of or [])]
    return out


def without_defaults(schema: Any) -> Any:
    """``schema`` without ``default`` anywhere (Kubernetes prunes defaults from v2)."""
    if not isinstance(schema, dict):
        return schema
    out = _map_children(schema, without_defaults)
    out.pop("default", None)
    return out
