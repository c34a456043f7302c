"""CRD-time checks of an ``openAPIV3Schema``: why Kubernetes rejects a v1 schema.

:func:`check_structural` reproduces what ``validateCustomResourceDefinitionValidation`` reports
for one version's schema, in upstream's order of precedence:

1. with the status subresource on, only some keywords may appear at the root;
   ``nullable: true`` is forbidden at the root;
2. ``NewStructural`` failures (``$ref``, ``id``, ``$schema``, ``definitions``, ``dependencies``,
   ``patternProperties``, ``additionalItems``, an ``items`` array,
   ``x-kubernetes-preserve-unknown-fields: false``) — reported only if nothing else is wrong;
3. ``ValidateStructural``: types present (``Required value: must not be empty for specified
   object fields``), root of type object, ``metadata`` restricted to ``name``/``generateName``,
   no ``additionalProperties`` at the root or on embedded resources, junctors
   (``allOf``/``anyOf``/``oneOf``/``not``) free of ``type``/``default``/``description``/
   ``nullable``/``additionalProperties``/extensions (except the two int-or-string patterns),
   fields used by root-level junctors declared outside them, valid RE2 patterns;
4. only if (3) passes: every ``default`` validates, is already pruned and, inside embedded
   resources, gives valid metadata (``ValidateDefaults``; CEL rules are not evaluated);
5. the per-node OpenAPI checks: ``uniqueItems: true``, properties together with
   ``additionalProperties``, forbidden defaults (top-level metadata, additionalProperties under
   metadata), ``type: null``, unknown types, list-type/map-type/list-map-keys misuse, and the
   shape of ``x-kubernetes-validations`` entries.

Beyond upstream (where the API server would fail to decode the CRD at all, or where a schema
keyword has no effect in Kubernetes): a keyword with a value of the wrong JSON type is
``Invalid``, and ``deprecated``, ``discriminator``, ``readOnly``, ``writeOnly`` and ``xml`` are
``Forbidden``.

Invariants: the input is never mutated; the result is sorted with
:func:`~setpoint.apimachinery.fields.sort_errors`; the function never raises on any input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from setpoint.apimachinery import fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.schema import govalues, objectmeta, pruning, regex, values
from setpoint.schema.structural import META_FIELDS, MISSING, Node, parse, walk

DEFAULT_PATH = FieldPath.root("spec", "validation", "openAPIV3Schema")

_OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_RULE_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                 "FieldValueRequired")
_ROOT_ALLOWED_WITH_STATUS = frozenset({
    "description", "type", "format", "title", "maximum", "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
    "uniqueItems", "multipleOf", "required", "items", "properties", "externalDocs", "example",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations",
})
_ROOT_ALLOWED_GO_NAMES = ("[Description Type Format Title Maximum ExclusiveMaximum Minimum "
                          "ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems "
                          "UniqueItems MultipleOf Required Items Properties ExternalDocs Example "
                          "XPreserveUnknownFields XValidations]")
# Keywords in Go struct order, for "the first offending field" at the root.
_KEYWORD_ORDER = (
    "id", "$schema", "$ref", "description", "type", "nullable", "format", "title", "default",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
)
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


def check_structural(schema: Any, path: FieldPath = DEFAULT_PATH, *,
                     status_subresource: bool = False) -> list[FieldError]:
    """Kubernetes' reasons a v1 ``openAPIV3Schema`` is not acceptable; empty if it is."""
    if not isinstance(schema, Mapping):
        return [fields.invalid(path, schema, "must be an object")]
    errs: list[FieldError] = []
    if status_subresource:
        errs.extend(_status_root(schema, path))
    if schema.get("nullable") is True:
        errs.append(fields.forbidden(path.child("nullable"), "nullable cannot be true at the root"))

    init_error = _new_structural_error(schema)
    if init_error is None:
        node = parse(schema)
        structural = validate_structural(node, path)
        if structural:
            errs.extend(structural)
        else:
            errs.extend(validate_defaults(node, path))
    errs.extend(_OpenAPIChecker(schema).check(schema, path, _Ctx(), is_root=True))
    if not errs and init_error is not None:
        errs.append(fields.invalid(path, "", init_error))
    return fields.sort_errors(errs)


# --- status subresource -----------------------------------------------------------------------

def _status_root(schema: Mapping[str, Any], path: FieldPath) -> list[FieldError]:
    for key in _KEYWORD_ORDER:
        if key not in schema or _is_zero(key, schema[key]):
            continue
        if key == "type":
            if schema[key] != "object":
                return [fields.invalid(
                    path.child("type"), schema[key],
                    'only "object" is allowed as the type at the root of the schema if the '
                    "status subresource is enabled")]
            continue
        if key not in _ROOT_ALLOWED_WITH_STATUS:
            return [fields.invalid(
                path, dict(schema),
                f"only {_ROOT_ALLOWED_GO_NAMES} fields are allowed at the root of the schema "
                "if the status subresource is enabled")]
    return []


def _is_zero(key: str, value: Any) -> bool:
    """Whether ``value`` decodes to the Go zero value of the JSONSchemaProps field ``key``."""
    if value is None or value is False or value == "":
        return True
    return key in ("enum", "allOf", "anyOf", "oneOf") and value == []


# --- NewStructural ----------------------------------------------------------------------------

def _new_structural_error(raw: Mapping[str, Any]) -> str | None:
    """The first error ``NewStructural`` returns, in its traversal order."""
    msg = _unsupported_fields(raw)
    if msg is not None:
        return msg
    for key in ("not",):
        sub = raw.get(key)
        if isinstance(sub, Mapping):
            msg = _new_structural_error(sub)
            if msg is not None:
                return msg
    for key in ("allOf", "anyOf", "oneOf"):
        subs = raw.get(key)
        if isinstance(subs, list):
            for sub in subs:
                if isinstance(sub, Mapping):
                    msg = _new_structural_error(sub)
                    if msg is not None:
                        return msg
    if raw.get("x-kubernetes-preserve-unknown-fields") is False:
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
    items = raw.get("items")
    if isinstance(items, list):
        return "OpenAPIV3Schema 'items' must be a schema, but is an array"
    if isinstance(items, Mapping):
        msg = _new_structural_error(items)
        if msg is not None:
            return msg
    props = raw.get("properties")
    if isinstance(props, Mapping):
        for sub in props.values():
            if isinstance(sub, Mapping):
                msg = _new_structural_error(sub)
                if msg is not None:
                    return msg
    ap = raw.get("additionalProperties")
    if isinstance(ap, Mapping):
        return _new_structural_error(ap)
    return None


def _unsupported_fields(raw: Mapping[str, Any]) -> str | None:
    if raw.get("id"):
        return "OpenAPIV3Schema 'id' is not supported"
    if raw.get("$schema"):
        return "OpenAPIV3Schema 'schema' is not supported"
    if raw.get("$ref"):
        return "OpenAPIV3Schema '$ref' is not supported"
    if raw.get("patternProperties"):
        return "OpenAPIV3Schema 'patternProperties' is not supported"
    if raw.get("dependencies"):
        return "OpenAPIV3Schema 'dependencies' is not supported"
    if raw.get("additionalItems") is not None:
        return "OpenAPIV3Schema 'additionalItems' is not supported"
    if raw.get("definitions"):
        return "OpenAPIV3Schema 'definitions' is not supported"
    return None


# --- ValidateStructural -----------------------------------------------------------------------

_ROOT, _ITEM, _FIELD = "root", "item", "field"
_EMPTY_TYPE = {
    _ROOT: "must not be empty at the root",
    _ITEM: "must not be empty for specified array items",
    _FIELD: "must not be empty for specified object fields",
}


def validate_structural(node: Node, path: FieldPath) -> list[FieldError]:
    """``ValidateStructural``: invariants of the whole tree plus root-junctor completeness."""
    errs = _invariants(node, _ROOT, path)
    errs.extend(_completeness_vv(node, node, path, path))
    return errs


def _invariants(s: Node | None, lvl: str, path: FieldPath) -> list[FieldError]:
    if s is None:
        return []
    errs: list[FieldError] = []
    if s.type == "array" and s.items is None:
        errs.append(fields.required(path.child("items"), "must be specified"))
    errs.extend(_invariants(s.items, _ITEM, path.child("items")))
    for k, v in (s.properties or {}).items():
        errs.extend(_invariants(v, _FIELD, path.child("properties").key(k)))
    if s.additional_properties is not None:
        if lvl == _ROOT:
            errs.append(fields.forbidden(path.child("additionalProperties"),
                                         "must not be used at the root"))
        ap = s.additional_schema
        if ap is not None:
            errs.extend(_invariants(ap, _FIELD, path.child("additionalProperties")))
    if s.int_or_string and s.preserve_unknown_fields:
        errs.append(fields.invalid(path.child("x-kubernetes-preserve-unknown-fields"), True,
                                   "must be false if x-kubernetes-int-or-string is true"))
    if s.int_or_string and s.embedded_resource:
        errs.append(fields.invalid(path.child("x-kubernetes-embedded-resource"), True,
                                   "must be false if x-kubernetes-int-or-string is true"))
    skip_any_of = _is_int_or_string_any_of(s.any_of)
    skip_first_all_of = bool(s.all_of) and _is_int_or_string_any_of(s.all_of[0].any_of)
    errs.extend(_value_validation(s, skip_any_of, skip_first_all_of, path))

    check_metadata = lvl == _ROOT or s.embedded_resource
    if s.embedded_resource and s.type != "object":
        msg = "must be object if x-kubernetes-embedded-resource is true"
        errs.append(fields.required(path.child("type"), msg) if not s.type
                    else fields.invalid(path.child("type"), s.type, msg))
    elif not s.type and not s.int_or_string and not s.preserve_unknown_fields:
        errs.append(fields.required(path.child("type"), _EMPTY_TYPE[lvl]))
    if s.embedded_resource and s.additional_properties is not None:
        errs.append(fields.forbidden(path.child("additionalProperties"),
                                     "must not be used if x-kubernetes-embedded-resource is set"))
    if lvl == _ROOT and s.type and s.type != "object":
        errs.append(fields.invalid(path.child("type"), s.type, "must be object at the root"))
    props = s.properties or {}
    for meta_key in ("kind", "apiVersion"):
        prop = props.get(meta_key)
        if prop is not None and check_metadata and prop.type != "string":
            errs.append(fields.invalid(path.child("properties").key(meta_key).child("type"),
                                       prop.type, "must be string"))
    metadata = props.get("metadata")
    if metadata is not None:
        mpath = path.child("properties").key("metadata")
        if check_metadata and metadata.type != "object":
            errs.append(fields.invalid(mpath.child("type"), metadata.type, "must be object"))
        if lvl == _ROOT and _metadata_restricted(metadata):
            errs.append(fields.forbidden(
                mpath, "must not specify anything other than name and generateName, but "
                "metadata is implicitly specified"))
    if s.embedded_resource and not s.preserve_unknown_fields and not s.properties:
        errs.append(fields.required(
            path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without "
            "x-kubernetes-preserve-unknown-fields"))
    return errs


def _metadata_restricted(metadata: Node) -> bool:
    """Whether root ``metadata`` says more than ``type``/``default`` and name/generateName."""
    props = set(metadata.raw.get("properties") or {}) if isinstance(
        metadata.raw.get("properties"), Mapping) else set()
    clear_props = props in ({"name"}, {"generateName"}, {"name", "generateName"})
    for key, value in metadata.raw.items():
        if key in ("type", "default"):
            continue
        if key == "properties" and (clear_props or not value):
            continue
        if key in ("required", "x-kubernetes-list-map-keys") and value is not None:
            return True
        if _is_zero(key, value):
            continue
        return True
    return False


def _is_int_or_string_any_of(branches: tuple[Node, ...]) -> bool:
    if len(branches) != 2:
        return False
    return _only_type(branches[0], "integer") and _only_type(branches[1], "string")


def _only_type(branch: Node, type_name: str) -> bool:
    if branch.type != type_name:
        return False
    for key, value in branch.raw.items():
        if key == "type":
            continue
        if key == "properties" and isinstance(value, Mapping):
            return False
        if key in ("required", "x-kubernetes-list-map-keys") and value is not None:
            return False
        if not _is_zero(key, value):
            return False
    return True


def _value_validation(s: Node, skip_any_of: bool, skip_first_all_of_any_of: bool,
                      path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    if not skip_any_of:
        for i, b in enumerate(s.any_of):
            errs.extend(_nested(b, False, path.child("anyOf").index(i)))
    for i, b in enumerate(s.all_of):
        errs.extend(_nested(b, skip_first_all_of_any_of and i == 0, path.child("allOf").index(i)))
    for i, b in enumerate(s.one_of):
        errs.extend(_nested(b, False, path.child("oneOf").index(i)))
    if s.not_ is not None:
        errs.extend(_nested(s.not_, False, path.child("not")))
    if s.pattern:
        tr = regex.translate(s.pattern)
        if tr.error is not None:
            errs.append(fields.invalid(
                path.child("pattern"), s.pattern,
                f"must be a valid regular expression, but isn't: {tr.error}"))
    return errs


def _nested(v: Node, skip_any_of: bool, path: FieldPath) -> list[FieldError]:
    errs = _value_validation(v, skip_any_of, False, path)
    if v.items is not None:
        errs.extend(_nested(v.items, False, path.child("items")))
    for k, f in (v.properties or {}).items():
        errs.extend(_nested(f, False, path.child("properties").key(k)))
    must = "must be empty to be structural"
    if v.type:
        errs.append(fields.forbidden(path.child("type"), must))
    ap = v.additional_properties
    if ap is True or isinstance(ap, Node):
        errs.append(fields.forbidden(path.child("additionalProperties"),
                                     "must be undefined to be structural"))
    if v.default is not MISSING:
        errs.append(fields.forbidden(path.child("default"), "must be undefined to be structural"))
    if v.title:
        errs.append(fields.forbidden(path.child("title"), must))
    if v.description:
        errs.append(fields.forbidden(path.child("description"), must))
    if v.nullable:
        errs.append(fields.forbidden(path.child("nullable"), "must be false to be structural"))
    for flag, key in ((v.preserve_unknown_fields, "x-kubernetes-preserve-unknown-fields"),
                      (v.embedded_resource, "x-kubernetes-embedded-resource"),
                      (v.int_or_string, "x-kubernetes-int-or-string")):
        if flag:
            errs.append(fields.forbidden(path.child(key), "must be false to be structural"))
    if v.list_map_keys:
        errs.append(fields.forbidden(path.child("x-kubernetes-list-map-keys"), must))
    if v.list_type is not None:
        errs.append(fields.forbidden(path.child("x-kubernetes-list-type"),
                                     "must be undefined to be structural"))
    if v.map_type is not None:
        errs.append(fields.forbidden(path.child("x-kubernetes-map-type"),
                                     "must be undefined to be structural"))
    if v.validations:
        errs.append(fields.forbidden(path.child("x-kubernetes-validations"), must))
    if v.properties and "metadata" in v.properties:
        errs.append(fields.forbidden(path.child("properties").key("metadata"),
                                     "must not be specified in a nested context"))
    return errs


def _completeness_vv(v: Node, s: Node | None, s_path: FieldPath,
                     v_path: FieldPath) -> list[FieldError]:
    """``validateValueValidationCompleteness`` (upstream checks root-level junctors only)."""
    if s is None:
        return [fields.required(s_path, f"because it is defined in {v_path}")]
    errs: list[FieldError] = []
    if v.not_ is not None:
        errs.extend(_completeness_nested(v.not_, s, s_path, v_path.child("not")))
    for name, branches in (("allOf", v.all_of), ("anyOf", v.any_of), ("oneOf", v.one_of)):
        for i, b in enumerate(branches):
            errs.extend(_completeness_nested(b, s, s_path, v_path.child(name).index(i)))
    return errs


def _completeness_nested(v: Node | None, s: Node | None, s_path: FieldPath,
                         v_path: FieldPath) -> list[FieldError]:
    if v is None:
        return []
    if s is None:
        return [fields.required(s_path, f"because it is defined in {v_path}")]
    errs = _completeness_vv(v, s, s_path, v_path)
    errs.extend(_completeness_nested(v.items, s.items, s_path.child("items"),
                                     v_path.child("items")))
    for k, vf in (v.properties or {}).items():
        sf = s.prop(k)
        if sf is None:
            errs.append(fields.required(
                s_path.child("properties").key(k),
                f"because it is defined in {v_path.child('properties').key(k)}"))
        else:
            errs.extend(_completeness_nested(vf, sf, s_path.child("properties").key(k),
                                             v_path.child("properties").key(k)))
    return errs


# --- ValidateDefaults -------------------------------------------------------------------------

Step = tuple[str, str]


def validate_defaults(root: Node, path: FieldPath) -> list[FieldError]:
    """``defaulting.ValidateDefaults`` with ``isResourceRoot`` and ``requirePrunedDefaults``."""
    return _defaults(root, path, root, [], False, True)


def _defaults(s: Node | None, pth: FieldPath, root: Node, steps: list[Step],
              inside_meta: bool, embedded: bool) -> list[FieldError]:
    if s is None:
        return []
    if embedded:
        inside_meta = False
        root = s
        steps = []
    errs: list[FieldError] = []
    if s.default is not MISSING:
        dpath = pth.child("default")
        validator = values.compile_validator(s, values.DEFAULTS)
        if inside_meta:
            errs.extend(_meta_default(s, dpath, root, steps, validator))
        else:
            pruned = govalues.deep_copy(s.default)
            pruning.compile_pruner(s, resource_root=embedded, coerce_metadata=False)(
                pruned, "", [])
            if not govalues.deep_equal(pruned, s.default):
                errs.append(fields.invalid(dpath, s.default, "must not have unknown fields"))
            coerce = _coerce_error(s.default, s, dpath, embedded)
            if coerce is not None:
                errs.append(coerce)
            else:
                meta_errs = _embedded_errors(s.default, s, dpath, embedded)
                if meta_errs:
                    errs.extend(meta_errs)
                else:
                    raw: values.Errs = []
                    validator.validate(s.default, "", raw)
                    errs.extend(values.to_field_errors(raw, str(dpath)))
    if s.items is not None:
        errs.extend(_defaults(s.items, pth.child("items"), root, [*steps, ("index", "")],
                              inside_meta, s.items.embedded_resource))
    for k, sub in (s.properties or {}).items():
        sub_meta = inside_meta or (embedded and k in META_FIELDS)
        errs.extend(_defaults(sub, pth.child("properties").key(k), root, [*steps, ("key", k)],
                              sub_meta, sub.embedded_resource))
    return errs


def _meta_default(s: Node, dpath: FieldPath, root: Node, steps: list[Step],
                  validator: values.CompiledNode) -> list[FieldError]:
    obj: Any = govalues.deep_copy(s.default)
    for kind, key in reversed(steps):
        obj = {key: obj} if kind == "key" else [obj]
    if not isinstance(obj, dict):
        return []
    obj.setdefault("kind", "Validation")
    obj.setdefault("apiVersion", "validation/v1")
    coerce = _coerce_error(obj, root, None, True)
    if coerce is not None:
        return [fields.invalid(dpath, s.default,
                               f"must result in valid metadata: {coerce.error()}")]
    meta_errs = _embedded_errors(obj, root, None, True)
    if meta_errs:
        return [fields.invalid(dpath, s.default,
                               f"must result in valid metadata: {_aggregate(meta_errs)}")]
    raw: values.Errs = []
    validator.validate(s.default, "", raw)
    return values.to_field_errors(raw, str(dpath))


def _aggregate(errs: list[FieldError]) -> str:
    msgs: list[str] = []
    for e in errs:
        if e.error() not in msgs:
            msgs.append(e.error())
    return msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"


def _child_path(path: FieldPath | None, name: str) -> FieldPath:
    return path.child(name) if path is not None else FieldPath.root(name)


def _coerce_error(value: Any, s: Node | None, path: FieldPath | None,
                  embedded: bool) -> FieldError | None:
    """``objectmeta.Coerce`` without dropping: the first TypeMeta/ObjectMeta decode error."""
    if s is None:
        return None
    if type(value) is dict:
        for k, v in value.items():
            if embedded:
                if k in ("apiVersion", "kind") and type(v) is not str:
                    return fields.invalid(_child_path(path, k), v, "must be a string")
                if k == "metadata":
                    problem = objectmeta.decode_error(v)
                    if problem is not None:
                        return fields.invalid(_child_path(path, "metadata"), v, problem)
            prop = s.prop(k)
            if prop is not None:
                err = _coerce_error(v, prop, _child_path(path, k), prop.embedded_resource)
            elif s.additional_schema is not None:
                ap = s.additional_schema
                kp = path.key(k) if path is not None else FieldPath((f"[{k}]",))
                err = _coerce_error(v, ap, kp, ap.embedded_resource)
            else:
                err = None
            if err is not None:
                return err
    elif type(value) is list and s.items is not None:
        for i, v in enumerate(value):
            ip = path.index(i) if path is not None else FieldPath((f"[{i}]",))
            err = _coerce_error(v, s.items, ip, s.items.embedded_resource)
            if err is not None:
                return err
    return None


def _embedded_errors(value: Any, s: Node, path: FieldPath | None,
                     embedded: bool) -> list[FieldError]:
    """``objectmeta.Validate(path, value, s, isResourceRoot=embedded)``."""
    node = replace(s, embedded_resource=True) if embedded and not s.embedded_resource else s
    checker = objectmeta.compile_embedded_checker(node)
    if checker is None:
        return []
    errs: list[FieldError] = []
    checker(value, path, errs)
    return errs


# --- per-node OpenAPI checks ------------------------------------------------------------------

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
                                       "must be non-empty if specified"))
        elif "\n" in trimmed_msg or "\r" in trimmed_msg:
            errs.append(fields.invalid(rpath.child("message"), message,
                                       "must not contain line breaks"))
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
                                       "must be non-empty if specified"))
        if "\n" in field_path or "\r" in field_path:
            errs.append(fields.invalid(rpath.child("fieldPath"), field_path,
                                       "must not contain line breaks"))
    return errs


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""
