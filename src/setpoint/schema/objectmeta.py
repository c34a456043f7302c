"""TypeMeta and ObjectMeta of ``x-kubernetes-embedded-resource`` values: apiextensions'
``objectmeta.Validate`` with ``isResourceRoot=false`` (the root's metadata is the caller's).

For every embedded object: ``apiVersion`` and ``kind`` are required strings (``kind`` a
DNS-1035 label up to case), and ``metadata`` must decode as ``ObjectMeta`` and pass
``ValidateObjectMeta`` with path-segment names (``name`` defaults to ``fakename`` so that only
what is given is judged; namespaced if a namespace is given). Name, label and key checks come
from :mod:`setpoint.apimachinery.validation`; messages and paths are apimachinery's
(``spec.template.metadata.labels: Invalid value: "-x": name part must consist of ...``).

Invariants: only subtrees whose schema contains an embedded resource are visited; nothing is
mutated; managedFields are not validated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from setpoint.apimachinery import fields, govalues, regexp, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.schema import paths
from setpoint.schema.paths import LazyPath
from setpoint.schema.structural import Node

CheckFn = Callable[[Any, LazyPath, list[FieldError]], None]

_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                      "start with an alphabetic character, and end with an alphanumeric character")
_DNS1035_LABEL_RE = regexp.Regexp(_DNS1035_LABEL_FMT)

TOTAL_ANNOTATION_SIZE_LIMIT = validation.TOTAL_ANNOTATION_SIZE_LIMIT
is_dns1123_label = validation.is_dns1123_label
is_qualified_name = validation.is_qualified_name
is_label_value = validation.is_valid_label_value


def _blen(s: str) -> int:
    return len(s.encode("utf-8", "surrogatepass"))


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if _blen(value) > 63:
        errs.append(validation.max_len_error(63))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(validation.regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name",
                                           "abc-123"))
    return errs


def is_path_segment_name(name: str) -> list[str]:
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return is_path_segment_prefix(name)


def is_path_segment_prefix(name: str) -> list[str]:
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


def parse_group_version(gv: str) -> str | None:
    """``schema.ParseGroupVersion``: the error text, or ``None``."""
    if not gv or gv == "/":
        return None
    if gv.count("/") > 1:
        return f"unexpected GroupVersion string: {gv}"
    return None


# --- decoding metadata the way json.Unmarshal into ObjectMeta would ---------------------------

_STRING_FIELDS = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion")
_INT_FIELDS = ("generation", "deletionGracePeriodSeconds")
_TIME_FIELDS = ("creationTimestamp", "deletionTimestamp")


def _json_type(value: Any) -> str:
    k = govalues.kind_of(value)
    return {govalues.STRING: "string", govalues.INT: "number", govalues.FLOAT: "number",
            govalues.BOOL: "bool", govalues.MAP: "object", govalues.SLICE: "array"}.get(k, "null")


def _unmarshal_error(value: Any, field: str, go_type: str) -> str:
    return (f"json: cannot unmarshal {_json_type(value)} into Go struct field "
            f"ObjectMeta.{field} of type {go_type}")


def decode_error(meta: Any) -> str | None:
    """Why ``meta`` would not decode into ``ObjectMeta``, or ``None``."""
    if meta is None:
        return None
    if type(meta) is not dict:
        return f"json: cannot unmarshal {_json_type(meta)} into Go value of type v1.ObjectMeta"
    for f in _STRING_FIELDS:
        v = meta.get(f)
        if v is not None and type(v) is not str:
            return _unmarshal_error(v, f, "string")
    for f in _INT_FIELDS:
        v = meta.get(f)
        if v is None:
            continue
        k = govalues.kind_of(v)
        if k == govalues.FLOAT and float(v).is_integer() and abs(float(v)) < 2**63:
            continue
        if k == govalues.FLOAT:
            return (f"json: cannot unmarshal number {govalues.format_float_json(float(v))} into "
                    f"Go struct field ObjectMeta.{f} of type int64")
        if k != govalues.INT:
            return _unmarshal_error(v, f, "int64")
    for f in _TIME_FIELDS:
        v = meta.get(f)
        if v is not None and type(v) is not str:
            return _unmarshal_error(v, f, "string")
    for f in ("labels", "annotations"):
        v = meta.get(f)
        if v is None:
            continue
        if type(v) is not dict:
            return _unmarshal_error(v, f, "map[string]string")
        for item in v.values():
            if item is not None and type(item) is not str:
                return _unmarshal_error(item, f, "string")
    v = meta.get("finalizers")
    if v is not None:
        if type(v) is not list:
            return _unmarshal_error(v, "finalizers", "[]string")
        for item in v:
            if item is not None and type(item) is not str:
                return _unmarshal_error(item, "finalizers", "string")
    v = meta.get("ownerReferences")
    if v is not None:
        if type(v) is not list:
            return _unmarshal_error(v, "ownerReferences", "[]v1.OwnerReference")
        for item in v:
            if item is not None and type(item) is not dict:
                return _unmarshal_error(item, "ownerReferences", "v1.OwnerReference")
    return None


def validate_object_meta(meta: dict[str, Any], path: FieldPath) -> list[FieldError]:
    """``ValidateObjectMeta`` for an embedded resource (path-segment names)."""
    errs: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    if generate_name:
        for msg in is_path_segment_prefix(generate_name):
            errs.append(fields.invalid(path.child("generateName"), generate_name, msg))
    name = meta.get("name") or "fakename"
    for msg in is_path_segment_name(name):
        errs.append(fields.invalid(path.child("name"), name, msg))
    namespace = meta.get("namespace") or ""
    if namespace:
        for msg in is_dns1123_label(namespace):
            errs.append(fields.invalid(path.child("namespace"), namespace, msg))
    generation = meta.get("generation")
    if generation is not None and generation < 0:
        errs.append(fields.invalid(path.child("generation"), int(generation),
                                   "must be greater than or equal to 0"))
    labels = meta.get("labels") or {}
    lpath = path.child("labels")
    for k, v in labels.items():
        for msg in is_qualified_name(k):
            errs.append(fields.invalid(lpath, k, msg))
        for msg in is_label_value(v or ""):
            errs.append(fields.invalid(lpath, v or "", msg))
    annotations = meta.get("annotations") or {}
    apath = path.child("annotations")
    total = 0
    for k, v in annotations.items():
        for msg in is_qualified_name(k.lower()):
            errs.append(fields.invalid(apath, k, msg))
        total += _blen(k) + _blen(v or "")
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(fields.too_long(apath, TOTAL_ANNOTATION_SIZE_LIMIT))
    errs.extend(validation.validate_owner_references(meta.get("ownerReferences") or [],
                                                     path.child("ownerReferences")))
    finalizers = [f or "" for f in meta.get("finalizers") or []]
    fpath = path.child("finalizers")
    for f in finalizers:
        for msg in is_qualified_name(f):
            errs.append(fields.invalid(fpath, f, msg))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(fields.invalid(fpath, finalizers,
                                   "finalizer orphan and foregroundDeletion cannot be both set"))
    return errs


def validate_embedded_resource(obj: dict[str, Any], path: FieldPath) -> list[FieldError]:
    """``validateEmbeddedResource``: TypeMeta present and well-formed, ObjectMeta valid."""
    errs: list[FieldError] = []
    if "apiVersion" not in obj:
        errs.append(fields.required(path.child("apiVersion")))
    if "kind" not in obj:
        errs.append(fields.required(path.child("kind")))
    if "apiVersion" in obj:
        v = obj["apiVersion"]
        p = path.child("apiVersion")
        if type(v) is not str:
            errs.append(fields.invalid(p, v, "must be a string"))
        elif not v:
            errs.append(fields.invalid(p, v, "must not be empty"))
        else:
            problem = parse_group_version(v)
            if problem is not None:
                errs.append(fields.invalid(p, v, problem))
    if "kind" in obj:
        v = obj["kind"]
        p = path.child("kind")
        if type(v) is not str:
            errs.append(fields.invalid(p, v, "must be a string"))
        elif not v:
            errs.append(fields.invalid(p, v, "must not be empty"))
        else:
            problems = is_dns1035_label(v.lower())
            if problems:
                errs.append(fields.invalid(
                    p, v, "may have mixed case, but should otherwise match: " + ",".join(problems)))
    if "metadata" in obj:
        meta = obj["metadata"]
        problem = decode_error(meta)
        if problem is not None:
            errs.append(fields.invalid(path.child("metadata"), meta, problem))
        elif type(meta) is dict:
            errs.extend(validate_object_meta(meta, path.child("metadata")))
        else:
            errs.extend(validate_object_meta({}, path.child("metadata")))
    return errs


def _has_embedded(node: Node | None) -> bool:
    if node is None:
        return False
    if node.embedded_resource:
        return True
    if node.properties and any(_has_embedded(c) for c in node.properties.values()):
        return True
    return _has_embedded(node.additional_schema) or _has_embedded(node.items)


def compile_embedded_checker(node: Node | None) -> CheckFn | None:
    """The checker for ``node``'s value, or ``None`` if no embedded resource is below it."""
    if node is None or not _has_embedded(node):
        return None
    return _build(node)


def _build(node: Node) -> CheckFn:
    props: dict[str, CheckFn] = {}
    if node.properties:
        props = {k: _build(c) for k, c in node.properties.items() if _has_embedded(c)}
    ap = node.additional_schema
    add = _build(ap) if ap is not None and _has_embedded(ap) else None
    items = _build(node.items) if node.items is not None and _has_embedded(node.items) else None
    embedded = node.embedded_resource

    def check(value: Any, path: LazyPath, errs: list[FieldError]) -> None:
        t = type(value)
        if t is dict:
            if embedded:
                errs.extend(validate_embedded_resource(value, paths.resolve(path)))
            for k, v in value.items():
                f = props.get(k)
                if f is not None:
                    f(v, (path, paths.CHILD, k), errs)
                elif add is not None and (node.properties is None or k not in node.properties):
                    add(v, (path, paths.KEY, k), errs)
        elif t is list and items is not None:
            for i, v in enumerate(value):
                items(v, (path, paths.INDEX, i), errs)

    return check
