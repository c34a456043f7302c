"""CRD-time per-node checks of an ``openAPIV3Schema``: apiextensions'
``ValidateCustomResourceDefinitionOpenAPISchema``.

On every schema object (through properties, additionalProperties, items, junctors,
definitions and dependencies): supported ``type`` names, ``type: null``, forbidden keywords
(``$ref``, ``id``, ``definitions``, ``dependencies``, ``patternProperties``,
``additionalItems``, ``items`` arrays), ``uniqueItems: true``, properties together with
``additionalProperties``, defaults where they are not allowed (top-level metadata,
additionalProperties under metadata), embedded resources inside resource meta,
``x-kubernetes-preserve-unknown-fields: false``, the list-type/map-type/list-map-keys rules and
the shape of ``x-kubernetes-validations`` entries. Beyond upstream: keywords with a value of
the wrong JSON type, and ``deprecated``/``discriminator``/``readOnly``/``writeOnly``/``xml``.

Invariants: works on the raw dicts (so it sees what the structural model drops); never raises
and never mutates.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from setpoint.apimachinery import fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.schema.structural import META_FIELDS, parse, walk

_OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_RULE_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                 "FieldValueRequired")
_UNSUPPORTED_EXTRA = ("deprecated", "discriminator", "readOnly", "writeOnly", "xml")
_EXPECTED_TYPES = {
    "type": "a string", "format": "a string", "title": "a string", "description": "a string",
    "pattern": "a string", "nullable": "a boolean", "uniqueItems": "a boolean",
    "exclusiveMaximum": "a boolean", "exclusiveMinimum": "a boolean",
    "x-kubernetes-embedded-resource": "a boolean", "x-kubernetes-int-or-string": "a boolean",
    "x-kubernetes-preserve-unknown-fields": "a boolean", "maximum": "a number",
    "minimum": "a number", "multipleOf": "a number", "maxLength": "an integer",
    "minLength": "an integer", "maxItems": "an integer", "minItems": "an integer",
    "maxProperties": "an integer", "minProperties": "an integer", "enum": "an array",
    "required": "an array of strings", "properties": "an object of schemas",
    "additionalProperties": "a boolean or a schema", "items": "a schema", "allOf":
    "an array of schemas", "anyOf": "an array of schemas", "oneOf": "an array of schemas",
    "not": "a schema", "x-kubernetes-list-type": "a string", "x-kubernetes-map-type": "a string",
    "x-kubernetes-list-map-keys": "an array of strings",
    "x-kubernetes-validations": "an array of objects",
}


@dataclass(frozen=True, slots=True)
class _Ctx:
    allow_defaults: bool = True
    disallow_reason: str = ""
    inside_meta: bool = False

    def forbid_defaults(self, reason: str) -> _Ctx:
        return replace(self, allow_defaults=False, disallow_reason=reason)


class _OpenAPIChecker:
    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.malformed = {id(n.raw): n.malformed for n in walk(parse(schema))}

    def check(self, raw: Any, path: FieldPath, ctx: _Ctx,
              is_root: bool = False) -> list[FieldError]:
        if not isinstance(raw, Mapping):
            return []
        errs = self._node(raw, path, ctx)
        bad = [k for k in self.malformed.get(id(raw), ())
               if not (k == "items" and isinstance(raw.get(k), list))]
        errs.extend(fields.invalid(path.child(k), raw.get(k),
                                   f"must be {_EXPECTED_TYPES.get(k, 'valid')}")
                    for k in dict.fromkeys(bad))
        if raw.get("uniqueItems") is True:
            errs.append(fields.forbidden(
                path.child("uniqueItems"),
                "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
        props = raw.get("properties")
        props = props if isinstance(props, Mapping) else {}
        if "additionalProperties" in raw and raw["additionalProperties"] is not None:
            ap = raw["additionalProperties"]
            if props and (ap is False or isinstance(ap, Mapping)):
                errs.append(fields.forbidden(path.child("additionalProperties"),
                                             "additionalProperties and properties are mutual "
                                             "exclusive"))
            sub = ctx
            if ctx.inside_meta:
                sub = ctx.forbid_defaults("inside additionalProperties applying to object metadata")
            errs.extend(self.check(ap, path.child("additionalProperties"), sub))
        embedded = raw.get("x-kubernetes-embedded-resource") is True
        for k, v in props.items():
            sub = ctx
            if (is_root or embedded) and k in META_FIELDS:
                sub = replace(sub, inside_meta=True)
                if is_root:
                    sub = sub.forbid_defaults(f"in top-level {k}")
            errs.extend(self.check(v, path.child("properties").key(str(k)), sub))
        errs.extend(self.check(raw.get("not"), path.child("not"), ctx))
        for key in ("allOf", "oneOf", "anyOf"):
            subs = raw.get(key)
            if isinstance(subs, list):
                for i, sub_schema in enumerate(subs):
                    errs.extend(self.check(sub_schema, path.child(key).index(i), ctx))
        defs = raw.get("definitions")
        if isinstance(defs, Mapping):
            for k, v in defs.items():
                errs.extend(self.check(v, path.child("definitions").key(str(k)), ctx))
        items = raw.get("items")
        if isinstance(items, Mapping):
            errs.extend(self.check(items, path.child("items"), ctx))
        elif isinstance(items, list):
            for i, sub_schema in enumerate(items):
                errs.extend(self.check(sub_schema, path.child("items").index(i), ctx))
        deps = raw.get("dependencies")
        if isinstance(deps, Mapping):
            for k, v in deps.items():
                errs.extend(self.check(v, path.child("dependencies").key(str(k)), ctx))
        errs.extend(_extensions(raw, path))
        errs.extend(_rules(raw, path))
        return errs

    def _node(self, raw: Mapping[str, Any], path: FieldPath, ctx: _Ctx) -> list[FieldError]:
        errs: list[FieldError] = []
        t = raw.get("type")
        if isinstance(t, str) and t and t not in _OPENAPI_TYPES:
            errs.append(fields.not_supported(path.child("type"), t, _OPENAPI_TYPES))
        if raw.get("default") is not None and not ctx.allow_defaults:
            detail = "must not be set"
            if ctx.disallow_reason:
                detail += " " + ctx.disallow_reason
            errs.append(fields.forbidden(path.child("default"), detail))
        if raw.get("id"):
            errs.append(fields.forbidden(path.child("id"), "id is not supported"))
        if raw.get("additionalItems") is not None:
            errs.append(fields.forbidden(path.child("additionalItems"),
                                         "additionalItems is not supported"))
        if raw.get("patternProperties"):
            errs.append(fields.forbidden(path.child("patternProperties"),
                                         "patternProperties is not supported"))
        if raw.get("definitions"):
            errs.append(fields.forbidden(path.child("definitions"), "definitions is not supported"))
        if raw.get("dependencies") is not None:
            errs.append(fields.forbidden(path.child("dependencies"),
                                         "dependencies is not supported"))
        if raw.get("$ref") is not None:
            errs.append(fields.forbidden(path.child("$ref"), "$ref is not supported"))
        if t == "null":
            errs.append(fields.forbidden(
                path.child("type"), "type cannot be set to null, use nullable as an alternative"))
        if isinstance(raw.get("items"), list):
            errs.append(fields.forbidden(path.child("items"),
                                         "items must be a schema object and not an array"))
        if ctx.inside_meta and raw.get("x-kubernetes-embedded-resource") is True:
            errs.append(fields.forbidden(path.child("x-kubernetes-embedded-resource"),
                                         "must not be used inside of resource meta"))
        for key in _UNSUPPORTED_EXTRA:
            if key in raw:
                errs.append(fields.forbidden(path.child(key), f"{key} is not supported"))
        return errs


def _extensions(raw: Mapping[str, Any], path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    t = raw.get("type") if isinstance(raw.get("type"), str) else ""
    if raw.get("x-kubernetes-preserve-unknown-fields") is False:
        errs.append(fields.invalid(path.child("x-kubernetes-preserve-unknown-fields"), False,
                                   "must be true or undefined"))
    map_type = raw.get("x-kubernetes-map-type")
    if isinstance(map_type, str):
        if t != "object":
            msg = "must be object if x-kubernetes-map-type is specified"
            errs.append(fields.required(path.child("type"), msg) if not t
                        else fields.invalid(path.child("type"), t, msg))
        if map_type not in ("atomic", "granular"):
            errs.append(fields.not_supported(path.child("x-kubernetes-map-type"), map_type,
                                             ("atomic", "granular")))
    list_type = raw.get("x-kubernetes-list-type")
    list_type = list_type if isinstance(list_type, str) else None
    items = raw.get("items")
    items_schema = items if isinstance(items, Mapping) else None
    if list_type is not None and t != "array":
        msg = "must be array if x-kubernetes-list-type is specified"
        errs.append(fields.required(path.child("type"), msg) if not t
                    else fields.invalid(path.child("type"), t, msg))
    elif list_type == "set" and items_schema is not None:
        item_type = items_schema.get("type")
        if item_type == "array":
            ilt = items_schema.get("x-kubernetes-list-type")
            if ilt is not None and ilt != "atomic":
                errs.append(fields.invalid(path.child("items").child("x-kubernetes-list-type"),
                                           ilt, "must be atomic as item of a list with "
                                           "x-kubernetes-list-type=set"))
        elif item_type == "object" and items_schema.get("x-kubernetes-map-type") != "atomic":
            errs.append(fields.invalid(path.child("items").child("x-kubernetes-map-type"),
                                       items_schema.get("x-kubernetes-list-type"),
                                       "must be atomic as item of a list with "
                                       "x-kubernetes-list-type=set"))
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(fields.not_supported(path.child("x-kubernetes-list-type"), list_type,
                                         ("atomic", "set", "map")))
    keys_raw = raw.get("x-kubernetes-list-map-keys")
    keys = [k for k in keys_raw if isinstance(k, str)] if isinstance(keys_raw, list) else []
    if keys:
        msg = "must be map if x-kubernetes-list-map-keys is non-empty"
        if list_type is None:
            errs.append(fields.required(path.child("x-kubernetes-list-type"), msg))
        elif list_type != "map":
            errs.append(fields.invalid(path.child("x-kubernetes-list-type"), list_type, msg))
    if list_type == "map":
        if not keys:
            errs.append(fields.required(path.child("x-kubernetes-list-map-keys"),
                                        "must not be empty if x-kubernetes-list-type is map"))
        if items is None:
            errs.append(fields.required(path.child("items"),
                                        "must have a schema if x-kubernetes-list-type is map"))
        elif items_schema is None:
            errs.append(fields.invalid(path.child("items"), items,
                                       "must only have a single schema if x-kubernetes-list-type "
                                       "is map"))
        else:
            item_type = items_schema.get("type") or ""
            if item_type != "object":
                errs.append(fields.invalid(
                    path.child("items").child("type"), item_type,
                    "must be object if parent array's x-kubernetes-list-type is map"))
            else:
                iprops = items_schema.get("properties")
                iprops = iprops if isinstance(iprops, Mapping) else {}
                seen: set[str] = set()
                for k in keys:
                    if k in iprops:
                        sub = iprops[k] if isinstance(iprops[k], Mapping) else {}
                        if sub.get("type") in ("array", "object"):
                            errs.append(fields.invalid(
                                path.child("items").child("properties").key(k).child("type"),
                                item_type, "must be a scalar type if parent array's "
                                "x-kubernetes-list-type is map"))
                    else:
                        errs.append(fields.invalid(path.child("x-kubernetes-list-map-keys"), keys,
                                                   "entries must all be names of item properties"))
                    if k in seen:
                        errs.append(fields.invalid(path.child("x-kubernetes-list-map-keys"), keys,
                                                   "must not contain duplicate entries"))
                    seen.add(k)
    if items_schema is not None and list_type in ("set", "map"):
        if items_schema.get("nullable") is True:
            errs.append(fields.forbidden(path.child("items").child("nullable"),
                                         "cannot be nullable when x-kubernetes-list-type is "
                                         + list_type))
        if list_type == "map":
            iprops = items_schema.get("properties")
            iprops = iprops if isinstance(iprops, Mapping) else {}
            req = items_schema.get("required")
            required = set(req) if isinstance(req, list) else set()
            for k in keys:
                sub = iprops.get(k)
                if not isinstance(sub, Mapping):
                    continue
                kpath = path.child("items").child("properties").key(k)
                if k not in required and sub.get("default") is None:
                    errs.append(fields.required(
                        kpath.child("default"), "this property is in x-kubernetes-list-map-keys, "
                        "so it must have a default or be a required property"))
                if sub.get("nullable") is True:
                    errs.append(fields.forbidden(
                        kpath.child("nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable"))
    return errs


def _rules(raw: Mapping[str, Any], path: FieldPath) -> list[FieldError]:
    rules = raw.get("x-kubernetes-validations")
    if not isinstance(rules, list):
        return []
    errs: list[FieldError] = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            continue
        rpath = path.child("x-kubernetes-validations").index(i)
        text = _str(rule.get("rule"))
        message = _str(rule.get("message"))
        msg_expr = _str(rule.get("messageExpression"))
        trimmed_rule = text.strip()
        trimmed_msg = message.strip()
        if not trimmed_rule:
            errs.append(fields.required(rpath.child("rule"), "rule is not specified"))
        elif message and not trimmed_msg:
            errs.append(fields.invalid(rpath.child("message"), message,
                                       "message must be non-empty if specified"))
        elif "\n" in trimmed_msg or "\r" in trimmed_msg:
            errs.append(fields.invalid(rpath.child("message"), message,
                                       "message must not contain line breaks"))
        elif ("\n" in trimmed_rule or "\r" in trimmed_rule) and not trimmed_msg:
            errs.append(fields.required(rpath.child("message"),
                                        "message must be specified if rule contains line breaks"))
        if msg_expr and not msg_expr.strip():
            errs.append(fields.required(rpath.child("messageExpression"),
                                        "messageExpression must be non-empty if specified"))
        reason = rule.get("reason")
        if reason is not None and reason not in _RULE_REASONS:
            errs.append(fields.not_supported(rpath.child("reason"), reason, _RULE_REASONS))
        field_path = _str(rule.get("fieldPath"))
        if field_path and not field_path.strip():
            errs.append(fields.invalid(rpath.child("fieldPath"), field_path,
                                       "fieldPath must be non-empty if specified"))
        if "\n" in field_path or "\r" in field_path:
            errs.append(fields.invalid(rpath.child("fieldPath"), field_path,
                                       "fieldPath must not contain line breaks"))
    return errs


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def check_openapi(schema: Mapping[str, Any], path: FieldPath) -> list[FieldError]:
    """All per-node checks of ``schema`` (the root of an ``openAPIV3Schema``) at ``path``."""
    return _OpenAPIChecker(schema).check(schema, path, _Ctx(), is_root=True)
