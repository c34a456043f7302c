"""Name, label and ObjectMeta validation with Kubernetes' exact messages.

The ``is_*`` checks mirror ``k8s.io/apimachinery/pkg/util/validation``: each returns a list of
error strings, empty when the value is valid, worded exactly as Kubernetes words them so that
clients (and people) see the same text as from a real API server. Lengths are counted in UTF-8
bytes, as Go's ``len`` does.

:func:`validate_object_meta` and :func:`validate_object_meta_update` mirror
``k8s.io/apimachinery/pkg/api/validation`` (Kubernetes 1.32) and return
:class:`~setpoint.apimachinery.fields.FieldError` lists for an ``Invalid`` (422) response.
Because metadata arrives as untyped JSON here, they also report members of the wrong JSON type,
which Kubernetes would have refused while decoding.

Invariants: every function here is pure and deterministic (the random source of
:func:`generate_name` is injected); none raises on bad input, all report it.

>>> is_dns1123_label("my-name")
[]
>>> is_dns1123_label("my.name")
['must not contain dots']
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import orjson

from setpoint.apimachinery import fields, regexp, timeutil
from setpoint.apimachinery.fields import FieldError, FieldPath

__all__ = [
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "QUALIFIED_NAME_MAX_LENGTH",
    "FIELD_IMMUTABLE",
    "MAX_GENERATED_PREFIX_LENGTH",
    "TOTAL_ANNOTATION_SIZE_LIMIT",
    "empty_error",
    "generate_name",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_object_meta",
    "validate_object_meta_update",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63

_QNAME_CHAR = "[A-Za-z0-9]"
_QNAME_EXT_CHAR = "[-A-Za-z0-9_.]"
_QUALIFIED_NAME_FMT = f"({_QNAME_CHAR}{_QNAME_EXT_CHAR}*)?{_QNAME_CHAR}"
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', "
                       "and must start and end with an alphanumeric character")
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + r"(\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                          "characters, '-' or '.', and must start and end with an alphanumeric "
                          "character")

# RE2, as Go's: the same classes byte for byte, and linear time whatever the input
_QUALIFIED_NAME_RE = regexp.Regexp(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = regexp.Regexp(_LABEL_VALUE_FMT)
_DNS1123_LABEL_RE = regexp.Regexp(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = regexp.Regexp(_DNS1123_SUBDOMAIN_FMT)

# The common case without a call into RE2 (most of a create's validation time went into those
# calls): a value these accept is one the expression matches; anything else is matched by the
# expression, which also says what is wrong.
_DNS1123_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_DNS1123_CHARS = _DNS1123_ALNUM | {"-"}
_QNAME_ALNUM = _DNS1123_ALNUM | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_QNAME_CHARS = _QNAME_ALNUM | frozenset("-_.")


def _plainly_dns1123_label(value: str) -> bool:
    return bool(value) and value[0] in _DNS1123_ALNUM and value[-1] in _DNS1123_ALNUM and \
        _DNS1123_CHARS.issuperset(value)


def _plainly_dns1123_subdomain(value: str) -> bool:
    return all(_plainly_dns1123_label(part) for part in value.split("."))


def _plainly_qualified_name(value: str) -> bool:
    return bool(value) and value[0] in _QNAME_ALNUM and value[-1] in _QNAME_ALNUM and \
        _QNAME_CHARS.issuperset(value)


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def empty_error() -> str:
    return "must be non-empty"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``<msg> (e.g. 'a' or 'b', regex used for validation is '<fmt>')``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _byte_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def is_dns1123_label(value: str) -> list[str]:
    """An RFC 1123 label: lowercase alphanumerics and '-', at most 63 bytes (namespace names)."""
    errs: list[str] = []
    if _byte_len(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _plainly_dns1123_label(value) and not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            # A valid subdomain that is not a label can only differ by its dots.
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """An RFC 1123 subdomain: dot-separated labels, at most 253 bytes (most object names)."""
    errs: list[str] = []
    if _byte_len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _plainly_dns1123_subdomain(value) and not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``[prefix/]name``: label and annotation keys, finalizers. The prefix is a subdomain."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif _byte_len(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not _plainly_qualified_name(name) and not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT,
                                               "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """A label value: empty, or a qualified name without prefix, at most 63 bytes."""
    errs: list[str] = []
    if _byte_len(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if value and not _plainly_qualified_name(value) and \
            not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# --- ObjectMeta ----------------------------------------------------------------------------------

FIELD_IMMUTABLE = "field is immutable"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
MAX_GENERATED_PREFIX_LENGTH = 63 - 5
_GENERATED_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_ORPHAN = "orphan"
_FOREGROUND = "foregroundDeletion"
_BANNED_OWNERS = frozenset({("", "v1", "Event")})
_METADATA = FieldPath.root("metadata")


def generate_name(prefix: str, rng: random.Random) -> str:
    """``generateName``: the prefix cut to 58 characters plus 5 random ones (never vowels)."""
    base = prefix[:MAX_GENERATED_PREFIX_LENGTH]
    return base + "".join(rng.choice(_GENERATED_ALPHABET) for _ in range(5))


def _mask_trailing_dash(name: str) -> str:
    # Kubernetes replaces the last two characters of a dash-terminated prefix with "a" so that
    # the prefix validates as the start of a name; we reproduce it, quirk included.
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def _go_strings(values: list[str]) -> str:
    """``%#v`` of a Go ``[]string``."""
    return "[]string{" + ", ".join(orjson.dumps(v).decode() for v in values) + "}"


def _string_map(meta: Mapping[str, Any], key: str, path: FieldPath,
                errs: list[FieldError]) -> dict[str, str]:
    value = meta.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        errs.append(fields.type_invalid(path.child(key), value, "must be a map of strings"))
        return {}
    return dict(value)


def _string(meta: Mapping[str, Any], key: str, path: FieldPath, errs: list[FieldError]) -> str:
    value = meta.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.append(fields.type_invalid(path.child(key), value, "must be a string"))
        return ""
    return value


def _list(meta: Mapping[str, Any], key: str, path: FieldPath,
          errs: list[FieldError]) -> list[Any]:
    value = meta.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        errs.append(fields.type_invalid(path.child(key), value, "must be a list"))
        return []
    return value


def _validate_labels(labels: dict[str, str], path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in sorted(labels):
        errs.extend(fields.invalid(path, key, msg) for msg in is_qualified_name(key))
        errs.extend(fields.invalid(path, labels[key], msg)
                    for msg in is_valid_label_value(labels[key]))
    return errs


def _validate_annotations(annotations: dict[str, str], path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    for key in sorted(annotations):
        # Annotation keys may use upper case in their prefix, hence the lower-casing.
        errs.extend(fields.invalid(path, key, msg) for msg in is_qualified_name(key.lower()))
    size = sum(_byte_len(k) + _byte_len(v) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(fields.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def validate_labels(labels: dict[str, str], path: FieldPath) -> list[FieldError]:
    """Kubernetes' ``ValidateLabels``: qualified-name keys, label values."""
    return _validate_labels(labels, path)


def validate_annotations(annotations: dict[str, str], path: FieldPath) -> list[FieldError]:
    """Kubernetes' ``ValidateAnnotations``: qualified-name keys, a bound on the total size."""
    return _validate_annotations(annotations, path)


def _group_version(api_version: str) -> tuple[str, str]:
    """(group, version) as ``schema.FromAPIVersionAndKind`` reads an apiVersion."""
    if api_version in ("", "/"):
        return "", ""
    if api_version.count("/") == 0:
        return "", api_version
    if api_version.count("/") == 1:
        group, _, version = api_version.partition("/")
        return group, version
    return "", ""


def validate_owner_references(refs: list[Any], path: FieldPath) -> list[FieldError]:
    """Kubernetes' ``ValidateOwnerReferences``: each reference judged at ``path`` itself (its
    errors name ``path.apiVersion``, not an index), at most one controller."""
    errs: list[FieldError] = []
    first_controller = ""
    for ref in refs:
        if not isinstance(ref, Mapping):
            errs.append(fields.type_invalid(path, ref, "must be an object"))
            continue
        values: dict[str, str] = {}
        for key in ("apiVersion", "kind", "name", "uid"):
            values[key] = _string(ref, key, path, errs)
        group, version = _group_version(values["apiVersion"])
        if not version:
            errs.append(fields.invalid(path.child("apiVersion"), values["apiVersion"],
                                       "version must not be empty"))
        if not values["kind"]:
            errs.append(fields.invalid(path.child("kind"), values["kind"],
                                       "kind must not be empty"))
        if not values["name"]:
            errs.append(fields.invalid(path.child("name"), values["name"],
                                       "name must not be empty"))
        if not values["uid"]:
            errs.append(fields.invalid(path.child("uid"), values["uid"],
                                       "uid must not be empty"))
        if (group, version, values["kind"]) in _BANNED_OWNERS:
            errs.append(fields.invalid(path, dict(ref), f"{group}/{version}, Kind="
                                       f"{values['kind']} is disallowed from being an owner"))
        for flag in ("controller", "blockOwnerDeletion"):
            if ref.get(flag) is not None and not isinstance(ref.get(flag), bool):
                errs.append(fields.type_invalid(path.child(flag), ref.get(flag),
                                                "must be a boolean"))
        if ref.get("controller") is True:
            current = f"{values['kind']}/{values['name']}"
            if first_controller:
                errs.append(fields.invalid(
                    path, refs, "Only one reference can have Controller set to true. Found "
                    f'"true" in references for {first_controller} and {current}'))
            else:
                first_controller = current
    return errs


def _validate_finalizers(finalizers: list[Any], path: FieldPath) -> list[FieldError]:
    errs: list[FieldError] = []
    for finalizer in finalizers:
        if not isinstance(finalizer, str):
            errs.append(fields.type_invalid(path, finalizer, "must be a string"))
            continue
        errs.extend(fields.invalid(path, finalizer, msg) for msg in is_qualified_name(finalizer))
    if _ORPHAN in finalizers and _FOREGROUND in finalizers:
        errs.append(fields.invalid(path, finalizers,
                                   f"finalizer {_ORPHAN} and {_FOREGROUND} cannot be both set"))
    return errs


def _validate_generation(meta: Mapping[str, Any], path: FieldPath,
                         errs: list[FieldError]) -> int:
    value = meta.get("generation")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        errs.append(fields.type_invalid(path.child("generation"), value, "must be an integer"))
        return 0
    if value < 0:
        errs.append(fields.invalid(path.child("generation"), value,
                                   "must be greater than or equal to 0"))
    return value


def is_path_segment_name(value: str) -> list[str]:
    """Kubernetes' ``ValidatePathSegmentName``: what RBAC objects' names must be (anything
    that is one URL path segment: ``system:discovery`` is a valid role name)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{ch}'" for ch in ("/", "%") if ch in value]


# --- the common case, answered without building anything ------------------------------------
#
# Most objects have a plain name, a plain namespace, a few plain labels and nothing else that
# validation looks at. These say so (True) only when the full checks below would find nothing;
# anything else (False) goes through the full checks, which also say what is wrong.

def _plain_key(key: Any) -> bool:
    """A label or annotation key (lower-case prefix) that :func:`is_qualified_name` accepts."""
    if type(key) is not str:
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > DNS1123_SUBDOMAIN_MAX_LENGTH
                  or not _plainly_dns1123_subdomain(prefix)):
        return False
    return len(name) <= QUALIFIED_NAME_MAX_LENGTH and _plainly_qualified_name(name)


def _plain_labels(labels: Any) -> bool:
    if labels is None:
        return True
    if type(labels) is not dict:
        return False
    for key, value in labels.items():
        if not _plain_key(key) or type(value) is not str or len(value) > LABEL_VALUE_MAX_LENGTH \
                or (value and not _plainly_qualified_name(value)):
            return False
    return True


def _plain_annotations(annotations: Any) -> bool:
    if annotations is None:
        return True
    if type(annotations) is not dict:
        return False
    size = 0
    for key, value in annotations.items():
        if type(value) is not str or not _plain_key(key):
            return False
        size += len(key) + len(value)  # characters: at most the bytes, so a bound below it
    # bytes are at most 4 per character: beyond a quarter of the limit, count them exactly
    return size * 4 <= TOTAL_ANNOTATION_SIZE_LIMIT


def _plain_common(meta: dict[str, Any]) -> bool:
    """Labels, annotations, owner references: nothing :func:`_validate_common` would flag."""
    return _plain_labels(meta.get("labels")) and _plain_annotations(meta.get("annotations")) \
        and _absent_or_empty_list(meta.get("ownerReferences"))


def _absent_or_empty_list(value: Any) -> bool:
    return value is None or (type(value) is list and not value)


def _plain_object_meta(meta: Any, namespaced: bool) -> bool:
    """Nothing :func:`validate_object_meta` would flag, with its default name rule."""
    if type(meta) is not dict or "generateName" in meta \
            or not _absent_or_empty_list(meta.get("finalizers")):
        return False
    name = meta.get("name")
    if type(name) is not str or len(name) > DNS1123_SUBDOMAIN_MAX_LENGTH \
            or not _plainly_dns1123_subdomain(name):
        return False
    namespace = meta.get("namespace")
    if namespaced:
        if type(namespace) is not str or len(namespace) > DNS1123_LABEL_MAX_LENGTH \
                or not _plainly_dns1123_label(namespace):
            return False
    elif namespace is not None and namespace != "":
        return False
    generation = meta.get("generation")
    if generation is not None and (type(generation) is not int or generation < 0):
        return False
    return _plain_common(meta)


def validate_object_meta(meta: Mapping[str, Any], *, namespaced: bool,
                         name_is_label: bool = False,
                         path: FieldPath = _METADATA,
                         name_check: Callable[[str], list[str]] | None = None
                         ) -> list[FieldError]:
    """Kubernetes' ``ValidateObjectMetaAccessor``.

    Names are DNS-1123 subdomains, or labels with ``name_is_label`` (namespaces), or whatever
    ``name_check`` accepts (RBAC objects: :func:`is_path_segment_name`). A namespaced object
    needs a namespace; a cluster-scoped one must not have one.
    """
    if name_check is None and not name_is_label and _plain_object_meta(meta, namespaced):
        return []
    return _validate_object_meta(meta, namespaced=namespaced, name_is_label=name_is_label,
                                 path=path, name_check=name_check)


def _validate_object_meta(meta: Mapping[str, Any], *, namespaced: bool, name_is_label: bool,
                          path: FieldPath, name_check: Callable[[str], list[str]] | None
                          ) -> list[FieldError]:
    if not isinstance(meta, Mapping):
        return [fields.type_invalid(path, meta, "must be an object")]
    errs: list[FieldError] = []
    if name_check is None:
        name_check = is_dns1123_label if name_is_label else is_dns1123_subdomain
    generate = _string(meta, "generateName", path, errs)
    if generate:
        errs.extend(fields.invalid(path.child("generateName"), generate, msg)
                    for msg in name_check(_mask_trailing_dash(generate)))
    name = _string(meta, "name", path, errs)
    if not name:
        if not any(e.field == str(path.child("name")) for e in errs):
            errs.append(fields.required(path.child("name"), "name or generateName is required"))
    else:
        errs.extend(fields.invalid(path.child("name"), name, msg) for msg in name_check(name))
    namespace = _string(meta, "namespace", path, errs)
    if namespaced:
        if not namespace:
            errs.append(fields.required(path.child("namespace")))
        else:
            errs.extend(fields.invalid(path.child("namespace"), namespace, msg)
                        for msg in is_dns1123_label(namespace))
    elif namespace:
        errs.append(fields.forbidden(path.child("namespace"), "not allowed on this type"))
    _validate_generation(meta, path, errs)
    _validate_common(meta, path, errs)
    errs.extend(_validate_finalizers(_list(meta, "finalizers", path, errs),
                                     path.child("finalizers")))
    return errs


def _validate_common(meta: Mapping[str, Any], path: FieldPath, errs: list[FieldError]) -> None:
    """Labels, annotations and owner references: checked on create and on update."""
    if type(meta) is dict and _plain_common(meta):
        return
    labels = _string_map(meta, "labels", path, errs)
    errs.extend(_validate_labels(labels, path.child("labels")))
    annotations = _string_map(meta, "annotations", path, errs)
    errs.extend(_validate_annotations(annotations, path.child("annotations")))
    refs = _list(meta, "ownerReferences", path, errs)
    errs.extend(validate_owner_references(refs, path.child("ownerReferences")))


def _same_time(new: Any, old: Any) -> bool:
    """Semantic equality of two timestamps: equal instants are equal however written."""
    if new == old:  # the same text is the same instant (or the same non-timestamp)
        return True
    if isinstance(new, str) and isinstance(old, str):
        try:
            parsed_new: datetime = timeutil.parse_time(new)
            parsed_old: datetime = timeutil.parse_time(old)
        except ValueError:
            return new == old
        return parsed_new == parsed_old
    return bool(new == old)


def validate_object_meta_update(new: Mapping[str, Any], old: Mapping[str, Any], *,
                                path: FieldPath = _METADATA) -> list[FieldError]:
    """Kubernetes' ``ValidateObjectMetaAccessorUpdate``.

    ``name``, ``namespace``, ``uid``, ``creationTimestamp``, ``deletionTimestamp`` and
    ``deletionGracePeriodSeconds`` may not change; ``generation`` may not go down; an update
    needs a ``resourceVersion``; and once deletion has started no finalizer may be added.
    Labels, annotations and owner references are validated as on create.
    """
    if not isinstance(new, Mapping):
        return [fields.type_invalid(path, new, "must be an object")]
    if not isinstance(old, Mapping):
        old = {}
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        old_finalizers = old.get("finalizers") or []
        added = sorted({f for f in _list(new, "finalizers", path, errs)
                        if isinstance(f, str) and f not in old_finalizers})
        if added:
            errs.append(fields.forbidden(
                path.child("finalizers"),
                "no new finalizers can be added if the object is being deleted, found new "
                f"finalizers {_go_strings(added)}"))
    _string(new, "resourceVersion", path, errs)
    if new.get("resourceVersion") in (None, ""):
        errs.append(fields.invalid(path.child("resourceVersion"), "",
                                   "must be specified for an update"))
    new_generation = _validate_generation(new, path, [])
    old_generation = _validate_generation(old, path, [])
    if new_generation < old_generation:
        errs.append(fields.invalid(path.child("generation"), new_generation,
                                   "must not be decremented"))
    for key in ("name", "namespace", "uid"):
        if (new.get(key) or "") != (old.get(key) or ""):
            errs.append(fields.invalid(path.child(key), new.get(key) or "", FIELD_IMMUTABLE))
    for key in ("creationTimestamp", "deletionTimestamp"):
        if not _same_time(new.get(key), old.get(key)):
            errs.append(fields.invalid(path.child(key), new.get(key), FIELD_IMMUTABLE))
    if new.get("deletionGracePeriodSeconds") != old.get("deletionGracePeriodSeconds"):
        errs.append(fields.invalid(path.child("deletionGracePeriodSeconds"),
                                   new.get("deletionGracePeriodSeconds"), FIELD_IMMUTABLE))
    _validate_common(new, path, errs)
    return errs
