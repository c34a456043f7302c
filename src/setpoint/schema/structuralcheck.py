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
4. only if (3) passes: every ``default`` validates, is already pruned, gives valid metadata
   inside embedded resources, and satisfies the CEL rules on and below its node
   (``ValidateDefaults``);
5. the per-node OpenAPI checks: ``uniqueItems: true``, properties together with
   ``additionalProperties``, forbidden defaults (top-level metadata, additionalProperties under
   metadata), ``type: null``, unknown types, list-type/map-type/list-map-keys misuse, and the
   shape of ``x-kubernetes-validations`` entries (including a ``fieldPath`` that names no
   field of the schema);
6. only if (3) and (4) pass: the rules compile (CEL type-checks them against the schema;
   ``Invalid value: apiextensions.ValidationRule{...}: compilation failed: ...`` at
   ``...x-kubernetes-validations[i].rule``), ``messageExpression`` compiles, ``oldSelf`` is not
   used below a list whose items cannot be correlated, ``optionalOldSelf`` is only set with
   ``oldSelf``. As upstream, a node with any error of (5) at or below it is not compiled.

Beyond upstream (where the API server would fail to decode the CRD at all, or where a schema
keyword has no effect in Kubernetes): a keyword with a value of the wrong JSON type is
``Invalid``, and ``deprecated``, ``discriminator``, ``readOnly``, ``writeOnly`` and ``xml`` are
``Forbidden``.

Invariants: the input is never mutated; the result is sorted with
:func:`~setpoint.apimachinery.fields.sort_errors`; the function never raises on any input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from setpoint.apimachinery import fields, goregexp
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.cel import normalize_field_path
from setpoint.schema import celrules, defaultcheck, openapicheck
from setpoint.schema.structural import MISSING, Node, parse

DEFAULT_PATH = FieldPath.root("spec", "validation", "openAPIV3Schema")

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
    node = parse(schema)
    compile_rules = False
    if init_error is None:
        structural = validate_structural(node, path)
        if structural:
            errs.extend(structural)
        else:
            defaults = defaultcheck.validate_defaults(node, path)
            errs.extend(defaults)
            compile_rules = not defaults
    schema_errs = openapicheck.check_openapi(schema, path)
    schema_errs.extend(_field_paths(node, path))
    errs.extend(schema_errs)
    if compile_rules:
        errs.extend(celrules.rule_errors(node, path, schema_errs))
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


# --- x-kubernetes-validations fieldPath ---------------------------------------------------------

def _field_paths(node: Node, path: FieldPath) -> list[FieldError]:
    """``fieldPath must be a valid path``: each rule's ``fieldPath`` names a field of the node
    it sits on (judged only where the node's subtree is structural, as ``pathValid``)."""
    errs: list[FieldError] = []
    if any(r.field_path for r in node.validations) and _new_structural_error(node.raw) is None:
        for i, rule in enumerate(node.validations):
            if rule.field_path and normalize_field_path(rule.field_path, node) is None:
                errs.append(fields.invalid(
                    path.child("x-kubernetes-validations").index(i).child("fieldPath"),
                    rule.field_path, "fieldPath must be a valid path"))
    for k, sub in (node.properties or {}).items():
        errs.extend(_field_paths(sub, path.child("properties").key(k)))
    ap = node.additional_schema
    if ap is not None:
        errs.extend(_field_paths(ap, path.child("additionalProperties")))
    if node.items is not None:
        errs.extend(_field_paths(node.items, path.child("items")))
    for name, branches in (("allOf", node.all_of), ("anyOf", node.any_of),
                           ("oneOf", node.one_of)):
        for i, b in enumerate(branches):
            errs.extend(_field_paths(b, path.child(name).index(i)))
    if node.not_ is not None:
        errs.extend(_field_paths(node.not_, path.child("not")))
    return errs


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
        problem = goregexp.error(s.pattern)
        if problem is not None:
            errs.append(fields.invalid(
                path.child("pattern"), s.pattern,
                f"must be a valid regular expression, but isn't: {problem}"))
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
