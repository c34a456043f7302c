"""Decoding the protobuf bodies kubectl sends: ``create namespace|configmap|secret``,
``create token``, ``auth whoami`` and ``auth can-i``.

kubectl POSTs these three with ``Content-Type: application/vnd.kubernetes.protobuf`` and does
not retry as JSON after a 415, so the server must read them. A body is:

* the magic ``k8s\\x00``, then a ``runtime.Unknown`` message
  ``{1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}``;
* ``raw`` is the object's own message (``Namespace``, ``ConfigMap`` or ``Secret`` of ``v1``).

:func:`decode` returns the object in its JSON shape, as Go's JSON encoding of the same typed
object would read: empty strings, zero numbers and empty maps or lists of ``omitempty`` fields
are left out, byte maps become base64 strings, and timestamps become RFC 3339 strings.

Invariants: decoding is total over bytes — any input either decodes or raises
:class:`ProtobufError` (never another exception); unknown fields are skipped, as protobuf
requires. Non-guarantees: only the kinds above are known; anything else is an error.

>>> body = bytes.fromhex(  # kubectl create configmap x --from-literal=a=b
...     "6b3873000a0f0a0276311209436f6e6669674d6170121b0a110a017812001a0022002a003200"
...     "3800420012060a01611201621a002200")
>>> decode(body)
{'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'x'}, 'data': {'a': 'b'}}
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from setpoint.apimachinery import timeutil

__all__ = ["MAGIC", "ProtobufError", "decode"]

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """A body that is not a well-formed protobuf envelope of a known kind."""


# --- wire format -------------------------------------------------------------------------------

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A base-128 varint at ``pos``: (value, position after it)."""
    value = shift = 0
    for i in range(10):
        if pos + i >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= 1 << 64:
                raise ProtobufError("varint overflows 64 bits")
            return value, pos + i + 1
        shift += 7
    raise ProtobufError("varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field; values are ints or byte strings."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0 is invalid")
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
            yield number, wire, value
        elif wire == _BYTES:
            length, pos = _varint(buf, pos)
            if length > len(buf) - pos:
                raise ProtobufError(f"truncated message: field {number} needs {length} bytes, "
                                    f"{len(buf) - pos} left")
            yield number, wire, buf[pos:pos + length]
            pos += length
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if size > len(buf) - pos:
                raise ProtobufError(f"truncated message: field {number} needs {size} bytes")
            yield number, wire, int.from_bytes(buf[pos:pos + size], "little")
            pos += size
        else:
            raise ProtobufError(f"unsupported wire type {wire} for field {number}")


def _signed(value: int, bits: int) -> int:
    """A varint as a two's-complement ``int64``/``int32`` (negatives are sign-extended)."""
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    if bits == 32:
        value &= (1 << 32) - 1
        if value >= 1 << 31:
            value -= 1 << 32
    return value


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtobufError(f"{where} is not valid UTF-8") from e


# --- schemas -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _F:
    """One field of a message: JSON name, type, and how Go's JSON encoding would show it.

    ``type`` is ``string``, ``int64``, ``int32``, ``bool``, ``bytes``, ``time``,
    ``map_string``, ``map_bytes`` or the name of a message in :data:`_MESSAGES`.
    ``keep_empty`` marks fields without ``omitempty`` (or behind a pointer, where presence
    matters), which are shown even when empty.
    """

    name: str
    type: str
    repeated: bool = False
    keep_empty: bool = False


_MESSAGES: Mapping[str, Mapping[int, _F]] = {
    "TypeMeta": {1: _F("apiVersion", "string"), 2: _F("kind", "string")},
    "Unknown": {1: _F("typeMeta", "TypeMeta", keep_empty=True), 2: _F("raw", "raw"),
                3: _F("contentEncoding", "string"), 4: _F("contentType", "string")},
    "ObjectMeta": {
        1: _F("name", "string"), 2: _F("generateName", "string"), 3: _F("namespace", "string"),
        4: _F("selfLink", "string"), 5: _F("uid", "string"), 6: _F("resourceVersion", "string"),
        7: _F("generation", "int64"), 8: _F("creationTimestamp", "time"),
        9: _F("deletionTimestamp", "time"),
        10: _F("deletionGracePeriodSeconds", "int64", keep_empty=True),
        11: _F("labels", "map_string"), 12: _F("annotations", "map_string"),
        13: _F("ownerReferences", "OwnerReference", repeated=True),
        14: _F("finalizers", "string", repeated=True),
    },
    "OwnerReference": {
        5: _F("apiVersion", "string", keep_empty=True), 1: _F("kind", "string", keep_empty=True),
        3: _F("name", "string", keep_empty=True), 4: _F("uid", "string", keep_empty=True),
        6: _F("controller", "bool", keep_empty=True),
        7: _F("blockOwnerDeletion", "bool", keep_empty=True),
    },
    "Time": {1: _F("seconds", "int64", keep_empty=True), 2: _F("nanos", "int32", keep_empty=True)},
    "Namespace": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                  2: _F("spec", "NamespaceSpec", keep_empty=True),
                  3: _F("status", "NamespaceStatus", keep_empty=True)},
    "NamespaceSpec": {1: _F("finalizers", "string", repeated=True)},
    "NamespaceStatus": {1: _F("phase", "string"),
                        2: _F("conditions", "NamespaceCondition", repeated=True)},
    "NamespaceCondition": {1: _F("type", "string", keep_empty=True),
                           2: _F("status", "string", keep_empty=True),
                           4: _F("lastTransitionTime", "time"), 5: _F("reason", "string"),
                           6: _F("message", "string")},
    "ConfigMap": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                  2: _F("data", "map_string"), 3: _F("binaryData", "map_bytes"),
                  4: _F("immutable", "bool", keep_empty=True)},
    "Secret": {1: _F("metadata", "ObjectMeta", keep_empty=True), 2: _F("data", "map_bytes"),
               3: _F("type", "string"), 4: _F("stringData", "map_string"),
               5: _F("immutable", "bool", keep_empty=True)},
    "ServiceAccount": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                       2: _F("secrets", "ObjectReference", repeated=True),
                       3: _F("imagePullSecrets", "LocalObjectReference", repeated=True),
                       4: _F("automountServiceAccountToken", "bool")},
    "ObjectReference": {1: _F("kind", "string"), 2: _F("namespace", "string"),
                        3: _F("name", "string"), 4: _F("uid", "string"),
                        5: _F("apiVersion", "string"), 6: _F("resourceVersion", "string"),
                        7: _F("fieldPath", "string")},
    "LocalObjectReference": {1: _F("name", "string")},
    # rbac.authorization.k8s.io/v1: kubectl create role|clusterrole|(cluster)rolebinding
    "Role": {1: _F("metadata", "ObjectMeta", keep_empty=True),
             2: _F("rules", "PolicyRule", repeated=True, keep_empty=True)},
    "ClusterRole": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                    2: _F("rules", "PolicyRule", repeated=True, keep_empty=True),
                    3: _F("aggregationRule", "AggregationRule")},
    "PolicyRule": {1: _F("verbs", "string", repeated=True, keep_empty=True),
                   2: _F("apiGroups", "string", repeated=True),
                   3: _F("resources", "string", repeated=True),
                   4: _F("resourceNames", "string", repeated=True),
                   5: _F("nonResourceURLs", "string", repeated=True)},
    "AggregationRule": {1: _F("clusterRoleSelectors", "LabelSelector", repeated=True)},
    "LabelSelector": {1: _F("matchLabels", "map_string")},
    "RoleBinding": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                    2: _F("subjects", "Subject", repeated=True),
                    3: _F("roleRef", "RoleRef", keep_empty=True)},
    "Subject": {1: _F("kind", "string", keep_empty=True), 2: _F("apiGroup", "string"),
                3: _F("name", "string", keep_empty=True), 4: _F("namespace", "string")},
    "RoleRef": {1: _F("apiGroup", "string", keep_empty=True),
                2: _F("kind", "string", keep_empty=True),
                3: _F("name", "string", keep_empty=True)},
    # authentication.k8s.io/v1 and authorization.k8s.io/v1: what kubectl auth whoami,
    # can-i and create token send
    "SelfSubjectReview": {1: _F("metadata", "ObjectMeta", keep_empty=True)},
    "TokenRequest": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                     2: _F("spec", "TokenRequestSpec", keep_empty=True)},
    "TokenRequestSpec": {1: _F("audiences", "string", repeated=True, keep_empty=True),
                         4: _F("expirationSeconds", "int64", keep_empty=True),
                         3: _F("boundObjectRef", "BoundObjectReference", keep_empty=True)},
    "BoundObjectReference": {1: _F("kind", "string"), 2: _F("apiVersion", "string"),
                             3: _F("name", "string"), 4: _F("uid", "string")},
    "TokenReview": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                    2: _F("spec", "TokenReviewSpec", keep_empty=True)},
    "TokenReviewSpec": {1: _F("token", "string"),
                        2: _F("audiences", "string", repeated=True)},
    "SubjectAccessReview": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                            2: _F("spec", "SubjectAccessReviewSpec", keep_empty=True)},
    "SubjectAccessReviewSpec": {
        1: _F("resourceAttributes", "ResourceAttributes"),
        2: _F("nonResourceAttributes", "NonResourceAttributes"), 3: _F("user", "string"),
        4: _F("groups", "string", repeated=True), 6: _F("uid", "string")},
    "SelfSubjectAccessReview": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                                2: _F("spec", "SelfSubjectAccessReviewSpec", keep_empty=True)},
    "SelfSubjectAccessReviewSpec": {1: _F("resourceAttributes", "ResourceAttributes"),
                                    2: _F("nonResourceAttributes", "NonResourceAttributes")},
    "ResourceAttributes": {1: _F("namespace", "string"), 2: _F("verb", "string"),
                           3: _F("group", "string"), 4: _F("version", "string"),
                           5: _F("resource", "string"), 6: _F("subresource", "string"),
                           7: _F("name", "string")},
    "NonResourceAttributes": {1: _F("path", "string"), 2: _F("verb", "string")},
    "SelfSubjectRulesReview": {1: _F("metadata", "ObjectMeta", keep_empty=True),
                               2: _F("spec", "SelfSubjectRulesReviewSpec", keep_empty=True)},
    "SelfSubjectRulesReviewSpec": {1: _F("namespace", "string")},
}

# (apiVersion, kind) -> message; the kinds kubectl's generators send as protobuf.
_KINDS: Mapping[tuple[str, str], str] = {
    ("v1", "Namespace"): "Namespace",
    ("v1", "ConfigMap"): "ConfigMap",
    ("v1", "Secret"): "Secret",
    ("v1", "ServiceAccount"): "ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "Role",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "ClusterRole",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "RoleBinding",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "RoleBinding",
    ("authentication.k8s.io/v1", "SelfSubjectReview"): "SelfSubjectReview",
    ("authentication.k8s.io/v1", "TokenRequest"): "TokenRequest",
    ("authentication.k8s.io/v1", "TokenReview"): "TokenReview",
    ("authorization.k8s.io/v1", "SubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): "SubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): "SelfSubjectAccessReview",
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): "SelfSubjectRulesReview",
}

_WIRE_TYPES = {"string": _BYTES, "bytes": _BYTES, "raw": _BYTES, "map_string": _BYTES,
               "map_bytes": _BYTES, "time": _BYTES, "int64": _VARINT, "int32": _VARINT,
               "bool": _VARINT}


def _map_entry(raw: bytes, where: str, binary: bool) -> tuple[str, str]:
    key, value = "", b""
    for number, wire, field in _fields(raw):
        if wire != _BYTES or not isinstance(field, bytes):
            raise ProtobufError(f"{where}: map entry field {number} has wire type {wire}")
        if number == 1:
            key = _text(field, f"{where} key")
        elif number == 2:
            value = field
    shown = base64.b64encode(value).decode("ascii") if binary else _text(value, f"{where}[{key}]")
    return key, shown


def _time(raw: bytes, where: str) -> str | None:
    fields = _message(raw, "Time", where)
    seconds, nanos = fields.get("seconds", 0), fields.get("nanos", 0)
    if seconds == 0 and nanos == 0:
        return None  # Go's zero time; its JSON form is null, left out here
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as e:
        raise ProtobufError(f"{where}: timestamp {seconds} is out of range") from e
    return timeutil.format_time(moment)


def _message(raw: bytes, name: str, where: str) -> dict[str, Any]:
    """Decode one message into its JSON shape, members in field-number order."""
    schema = _MESSAGES[name]
    found: dict[int, Any] = {}
    nested: dict[int, bytes] = {}  # non-repeated messages merge across occurrences
    for number, wire, value in _fields(raw):
        field = schema.get(number)
        if field is None:
            continue  # unknown fields are skipped
        path = f"{where}.{field.name}" if where else field.name
        if wire != _WIRE_TYPES.get(field.type, _BYTES):
            raise ProtobufError(f"{path}: unexpected wire type {wire}")
        if field.type in _MESSAGES and not field.repeated:
            if not isinstance(value, bytes):  # excluded by the wire type check above
                raise ProtobufError(f"{path}: expected a message")
            nested[number] = nested.get(number, b"") + value
            continue
        decoded = _value(field, value, path)
        if field.type in ("map_string", "map_bytes"):
            key, entry = decoded
            found.setdefault(number, {})[key] = entry
        elif field.repeated:
            found.setdefault(number, []).append(decoded)
        else:
            found[number] = decoded
    for number, value in nested.items():
        field = schema[number]
        found[number] = _message(value, field.type,
                                 f"{where}.{field.name}" if where else field.name)
    return {schema[n].name: found[n] for n in sorted(found) if _shown(schema[n], found[n])}


def _value(field: _F, value: int | bytes, path: str) -> Any:
    if isinstance(value, int):
        if field.type == "bool":
            return value != 0
        return _signed(value, 32 if field.type == "int32" else 64)
    if field.type == "string":
        return _text(value, path)
    if field.type == "raw":
        return value
    if field.type == "bytes":
        return base64.b64encode(value).decode("ascii")
    if field.type == "time":
        return _time(value, path)
    if field.type in ("map_string", "map_bytes"):
        return _map_entry(value, path, field.type == "map_bytes")
    return _message(value, field.type, path)


def _shown(field: _F, value: Any) -> bool:
    """Whether Go's JSON encoding would show this value (``omitempty`` drops empty ones)."""
    if value is None:
        return False
    if field.keep_empty or isinstance(value, bool):
        return True
    return value not in ("", 0, {}, [])


def decode(body: bytes) -> dict[str, Any]:
    """Decode a Kubernetes protobuf request body into the JSON-shaped object it carries.

    The result has ``apiVersion`` and ``kind`` from the envelope first, then the object's
    fields. Raises :class:`ProtobufError` for a missing magic prefix, malformed or truncated
    data, a content encoding, or a kind this decoder does not know.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ProtobufError("a protobuf body must be bytes")
    data = bytes(body)
    if not data.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf prefix (k8s\\x00)")
    envelope = _message(data[len(MAGIC):], "Unknown", "")
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"content encoding {envelope['contentEncoding']!r} is not supported")
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    message = _KINDS.get((api_version, kind))
    if message is None:
        raise ProtobufError(f"no protobuf decoding for kind {kind!r} in version "
                            f"{api_version!r}")
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
    obj.update(_message(envelope.get("raw", b""), message, ""))
    return obj
