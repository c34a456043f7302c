"""Table tests for setpoint.apimachinery.protobuf.

Bodies are built with the small encoder below, which writes fields the way Kubernetes' gogo
generated marshallers do: ascending field numbers, and every non-pointer scalar written even
when empty. ``KUBECTL_CONFIGMAP`` is the exact body of
``kubectl create configmap x --from-literal=a=b``, assembled by hand from that wire format.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import protobuf
from setpoint.apimachinery.protobuf import ProtobufError

# --- a tiny encoder ----------------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64s are sent as ten-byte two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field: string, bytes or embedded message."""
    data = payload.encode() if isinstance(payload, str) else payload
    return key(number, 2) + varint(len(data)) + data


def num(number: int, value: int) -> bytes:
    return key(number, 0) + varint(value)


def entry(number: int, k: str, v: bytes | str) -> bytes:
    """One map entry ``{1 key, 2 value}``."""
    return ld(number, ld(1, k) + ld(2, v))


def object_meta(name: str = "", namespace: str = "", *, extra: bytes = b"") -> bytes:
    """ObjectMeta as gogo writes it: the strings, generation and creationTimestamp always."""
    return (ld(1, name) + ld(2, "") + ld(3, namespace) + ld(4, "") + ld(5, "") + ld(6, "")
            + num(7, 0) + ld(8, b"") + extra)


def envelope(api_version: str, kind: str, raw: bytes, encoding: str = "") -> bytes:
    return (protobuf.MAGIC + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)
            + ld(3, encoding) + ld(4, ""))


KUBECTL_CONFIGMAP = bytes.fromhex(
    "6b387300"                                   # k8s\0
    "0a0f" "0a027631" "1209436f6e6669674d6170"   # typeMeta {apiVersion v1, kind ConfigMap}
    "121b"                                       # raw, 27 bytes: ConfigMap
    "0a11" "0a0178" "1200" "1a00" "2200" "2a00" "3200" "3800" "4200"  # metadata {name x, ...}
    "1206" "0a0161" "120162"                     # data {a: b}
    "1a00" "2200"                                # contentEncoding "", contentType ""
)

# --- decoding ----------------------------------------------------------------------------------

TIME_2024 = 1704164645  # 2024-01-02T03:04:05Z

FULL_META = object_meta("full", "default", extra=(
    ld(9, num(1, TIME_2024) + num(2, 500)) + num(10, 30)
    + entry(11, "app", "web") + entry(11, "tier", "db")
    + entry(12, "example.com/note", "hi")
    + ld(13, ld(1, "ConfigMap") + ld(3, "owner") + ld(4, "uid-1") + ld(5, "v1") + num(6, 1)
         + num(7, 0))
    + ld(14, "example.com/f1") + ld(14, "example.com/f2")
    + ld(17, ld(1, "kubectl-create"))  # managedFields
))

# (id, body, expected object)
DECODE: list[tuple[str, bytes, dict[str, Any]]] = [
    ("kubectl-configmap", KUBECTL_CONFIGMAP,
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}),
    ("kubectl-namespace",
     envelope("v1", "Namespace", ld(1, object_meta("foo")) + ld(2, b"") + ld(3, ld(1, ""))),
     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "foo"}, "spec": {},
      "status": {}}),
    ("kubectl-secret-generic",
     envelope("v1", "Secret", ld(1, object_meta("s")) + entry(2, "k", b"v") + ld(3, "Opaque")),
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="},
      "type": "Opaque"}),
    ("secret-binary-and-string-data",
     envelope("v1", "Secret", ld(1, object_meta("s", "ns")) + entry(2, "bin", b"\x00\xff")
              + ld(3, "kubernetes.io/tls") + entry(4, "plain", "text") + num(5, 1)),
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns"},
      "data": {"bin": base64.b64encode(b"\x00\xff").decode()}, "type": "kubernetes.io/tls",
      "stringData": {"plain": "text"}, "immutable": True}),
    ("secret-empty-type-omitted",
     envelope("v1", "Secret", ld(1, object_meta("s")) + ld(3, "") + num(5, 0)),
     {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "immutable": False}),
    ("configmap-binary-data",
     envelope("v1", "ConfigMap", ld(1, object_meta("c")) + entry(2, "a", "1")
              + entry(3, "blob", b"\x01\x02") + num(4, 1)),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"},
      "binaryData": {"blob": "AQI="}, "immutable": True}),
    ("configmap-empty-value",
     envelope("v1", "ConfigMap", ld(1, object_meta("c")) + ld(2, ld(1, "empty"))),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
      "data": {"empty": ""}}),
    ("configmap-repeated-key-last-wins",
     envelope("v1", "ConfigMap", ld(1, object_meta("c")) + entry(2, "a", "1")
              + entry(2, "a", "2")),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}}),
    ("full-object-meta", envelope("v1", "ConfigMap", ld(1, FULL_META)),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
         "name": "full", "namespace": "default",
         "deletionTimestamp": "2024-01-02T03:04:05Z", "deletionGracePeriodSeconds": 30,
         "labels": {"app": "web", "tier": "db"}, "annotations": {"example.com/note": "hi"},
         "ownerReferences": [{"kind": "ConfigMap", "name": "owner", "uid": "uid-1",
                              "apiVersion": "v1", "controller": True,
                              "blockOwnerDeletion": False}],
         "finalizers": ["example.com/f1", "example.com/f2"],
         "managedFields": [{"manager": "kubectl-create"}]}}),
    ("metadata-scalars",
     envelope("v1", "ConfigMap", ld(1, ld(1, "m") + ld(2, "gen-") + ld(4, "/self")
                                   + ld(5, "u-1") + ld(6, "42") + num(7, 3)
                                   + ld(8, num(1, TIME_2024)))),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
         "name": "m", "generateName": "gen-", "selfLink": "/self", "uid": "u-1",
         "resourceVersion": "42", "generation": 3,
         "creationTimestamp": "2024-01-02T03:04:05Z"}}),
    ("negative-int64", envelope("v1", "ConfigMap", ld(1, num(7, -1))),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generation": -1}}),
    ("owner-reference-empty-strings-kept",
     envelope("v1", "ConfigMap", ld(1, ld(13, ld(1, "") + ld(3, "") + ld(4, "") + ld(5, "")))),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"ownerReferences": [
         {"kind": "", "name": "", "uid": "", "apiVersion": ""}]}}),
    ("metadata-merged-across-occurrences",
     envelope("v1", "ConfigMap", ld(1, ld(1, "a")) + ld(1, ld(3, "ns"))),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}),
    ("unknown-fields-skipped",
     envelope("v1", "ConfigMap", ld(1, ld(1, "a")) + num(99, 5)
              + key(98, 5) + b"\x01\x02\x03\x04" + key(97, 1) + b"\x00" * 8 + ld(96, "x")),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
    ("namespace-status",
     envelope("v1", "Namespace", ld(1, object_meta("ns"))
              + ld(2, ld(1, "kubernetes") + ld(1, "example.com/x"))
              + ld(3, ld(1, "Terminating")
                   + ld(2, ld(1, "NamespaceDeletionContentFailure") + ld(2, "False")
                        + ld(4, num(1, TIME_2024)) + ld(5, "ContentDeleted")
                        + ld(6, "All content successfully deleted")))),
     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"},
      "spec": {"finalizers": ["kubernetes", "example.com/x"]},
      "status": {"phase": "Terminating", "conditions": [{
          "type": "NamespaceDeletionContentFailure", "status": "False",
          "lastTransitionTime": "2024-01-02T03:04:05Z", "reason": "ContentDeleted",
          "message": "All content successfully deleted"}]}}),
    ("no-raw", protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "ConfigMap")),
     {"apiVersion": "v1", "kind": "ConfigMap"}),
    ("unicode-strings",
     envelope("v1", "ConfigMap", ld(1, ld(1, "x")) + entry(2, "k", "h\u00e9llo \u4e16\u754c")),
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
      "data": {"k": "h\u00e9llo \u4e16\u754c"}}),
]


@pytest.mark.parametrize(("body", "want"), [c[1:] for c in DECODE], ids=[c[0] for c in DECODE])
def test_decode(body: bytes, want: dict[str, Any]) -> None:
    got = protobuf.decode(body)
    assert got == want
    assert list(got)[:2] == ["apiVersion", "kind"]


def test_member_order_follows_field_numbers() -> None:
    body = envelope("v1", "Secret", ld(3, "Opaque") + entry(2, "k", b"v") + ld(1, ld(1, "s")))
    assert list(protobuf.decode(body)) == ["apiVersion", "kind", "metadata", "data", "type"]


ERRORS: list[tuple[str, Any, str]] = [
    ("empty", b"", "missing the k8s protobuf prefix"),
    ("json-body", b'{"kind":"ConfigMap"}', "missing the k8s protobuf prefix"),
    ("not-bytes", "k8s\x00", "must be bytes"),
    ("magic-only", protobuf.MAGIC, "no protobuf decoding for kind '' in version ''"),
    ("unknown-kind", envelope("v1", "Deployment", b""), "no protobuf decoding for kind "
     "'Deployment' in version 'v1'"),
    ("unknown-version", envelope("apps/v1", "ConfigMap", b""),
     "no protobuf decoding for kind 'ConfigMap' in version 'apps/v1'"),
    ("custom-resource", envelope("example.com/v1", "Widget", b""),
     "no protobuf decoding for kind 'Widget' in version 'example.com/v1'"),
    ("group-version-not-in-the-tables", envelope("storage.k8s.io/v1", "StorageClass", b""),
     "no protobuf decoding for kind 'StorageClass'"),
    ("options-of-an-unknown-group", envelope("example.com/v1", "DeleteOptions", b""),
     "no protobuf decoding for kind 'DeleteOptions' in version 'example.com/v1'"),
    ("content-encoding", envelope("v1", "ConfigMap", b"", encoding="gzip"),
     "content encoding 'gzip' is not supported"),
    ("truncated-key-varint", protobuf.MAGIC + b"\x80", "truncated varint"),
    ("truncated-length-varint", protobuf.MAGIC + b"\x0a\xff", "truncated varint"),
    ("truncated-value-varint", envelope("v1", "ConfigMap", ld(1, key(7, 0) + b"\xff\xff")),
     "truncated varint"),
    ("truncated-message", KUBECTL_CONFIGMAP[:30], "truncated message: field 2 needs 27 bytes"),
    ("truncated-fixed32", protobuf.MAGIC + key(9, 5) + b"\x00", "truncated message: field 9"),
    ("overlong-varint", protobuf.MAGIC + key(9, 0) + b"\xff" * 10 + b"\x01",
     "varint longer than 10 bytes"),
    ("varint-overflow", protobuf.MAGIC + key(9, 0) + b"\xff" * 9 + b"\x7f",
     "varint overflows 64 bits"),
    ("group-wire-type", protobuf.MAGIC + key(9, 3), "unsupported wire type 3 for field 9"),
    ("field-zero", protobuf.MAGIC + b"\x00\x00", "field number 0 is invalid"),
    ("wrong-wire-type", envelope("v1", "ConfigMap", ld(1, num(1, 5))),
     "metadata.name: unexpected wire type 0"),
    ("message-as-varint", envelope("v1", "ConfigMap", num(1, 5)),
     "metadata: unexpected wire type 0"),
    ("bad-utf8-name", envelope("v1", "ConfigMap", ld(1, ld(1, b"\xff\xfe"))),
     "metadata.name is not valid UTF-8"),
    ("bad-utf8-data", envelope("v1", "ConfigMap", entry(2, "k", b"\xc3")),
     "data[k] is not valid UTF-8"),
    ("bad-map-entry", envelope("v1", "ConfigMap", ld(2, num(1, 1))),
     "data: map entry field 1 has wire type 0"),
    ("timestamp-out-of-range",
     envelope("v1", "ConfigMap", ld(1, ld(8, num(1, 10**15)))),
     "metadata.creationTimestamp: timestamp 1000000000000000 is out of range"),
]


@pytest.mark.parametrize(("body", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_decode_rejects(body: Any, message: str) -> None:
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(body)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("cut", range(len(KUBECTL_CONFIGMAP)))
def test_every_truncation_is_rejected_or_decoded(cut: int) -> None:
    try:
        got = protobuf.decode(KUBECTL_CONFIGMAP[:cut])
    except ProtobufError:
        return
    assert got["kind"] == "ConfigMap"  # only cuts after the raw object can decode


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_else(tail: bytes) -> None:
    try:
        protobuf.decode(protobuf.MAGIC + tail)
    except ProtobufError:
        pass


@given(st.binary(max_size=120))
def test_arbitrary_object_bytes_never_raise_anything_else(raw: bytes) -> None:
    for kind in ("Namespace", "ConfigMap", "Secret"):
        try:
            protobuf.decode(envelope("v1", kind, raw))
        except ProtobufError:
            pass
