"""setpoint.apimachinery.protobuf on every kind of the tables.

* ``kubectl-protobuf-bodies.json`` holds request bodies the real kubectl v1.32 sent (captured
  by a recording proxy in front of ``setpoint serve``), each with the same object in Go's JSON
  encoding (``kubectl ... --dry-run=client -o json`` where kubectl can print it): decoding the
  body must give that JSON, members in the same order.
* The forms whose JSON is not an object (times, IntOrString, Quantity, embedded JSON, the
  schema unions, named slices, inline members, packed and floating-point scalars) are checked
  on bodies written with the test encoder (:mod:`tests.protobuf_encoder`) or by hand.
* Property tests: any object of any kind in the decoder's JSON shape survives encoding and
  decoding; random bytes, random field streams and mutations of real bodies either decode
  into a JSON value within the limits or raise ``ProtobufError``, never anything else.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.protobuf_encoder import Encoder, key, ld, varint

from setpoint.apimachinery import decoding, protobuf, timeutil
from setpoint.apimachinery.protobuf import ProtobufError, ProtobufLimits
from setpoint.apimachinery.prototables import (
    BOOL,
    BYTES,
    DOUBLE,
    FLOAT,
    INT32,
    INT64,
    MAP,
    MESSAGE,
    STRING,
    UINT32,
    UINT64,
    Field,
    Tables,
)

BODIES = json.loads((Path(__file__).parent / "kubectl-protobuf-bodies.json").read_text())
CORE = "k8s.io.api.core.v1."
META = "k8s.io.apimachinery.pkg.apis.meta.v1."
EXT = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."


def without_nulls(value: Any) -> Any:
    """Go's JSON shows nil pointers and the zero time as null; the decoder leaves them out."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return protobuf.MAGIC + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)


def roundtrip(obj: dict[str, Any]) -> dict[str, Any]:
    return protobuf.decode(Encoder().body(obj))


# --- what the real kubectl sends -----------------------------------------------------------------


@pytest.mark.parametrize("case", BODIES["bodies"], ids=[c["name"] for c in BODIES["bodies"]])
def test_kubectl_bodies_decode_to_go_json(case: dict[str, Any]) -> None:
    got = protobuf.decode(bytes.fromhex(case["body"]))
    want = without_nulls(case["json"])
    assert got == want
    # apiVersion and kind first, then the members in the order Go writes them
    assert list(got)[:2] == ["apiVersion", "kind"]
    assert list(got)[2:] == [k for k in want if k not in ("apiVersion", "kind")]
    assert _orders(got) == _orders(want)


def _orders(value: Any) -> Any:
    if isinstance(value, dict):
        return [(k, _orders(v)) for k, v in value.items() if k not in ("apiVersion", "kind")]
    if isinstance(value, list):
        return [_orders(v) for v in value]
    return None


def test_the_kubectl_bodies_cover_the_everyday_generators() -> None:
    kinds = {protobuf.decode(bytes.fromhex(c["body"]))["kind"] for c in BODIES["bodies"]}
    assert {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
            "Deployment", "Job", "CronJob", "Service", "PriorityClass", "ResourceQuota",
            "PodDisruptionBudget", "Ingress", "Secret", "ConfigMap", "Namespace",
            "TokenRequest", "SelfSubjectAccessReview", "SelfSubjectReview"} <= kinds


# --- Go's JSON shape -----------------------------------------------------------------------------


def test_pointers_show_zero_values_and_omitempty_scalars_hide_them() -> None:
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
          "automountServiceAccountToken": False}  # *bool: present, so shown
    assert roundtrip(sa) == sa
    # PriorityClass.globalDefault is a plain bool with omitempty: false is not shown, value
    # (no omitempty) is shown even when 0
    body = envelope("scheduling.k8s.io/v1", "PriorityClass",
                    ld(1, ld(1, "p")) + key(2, 0) + varint(0) + key(3, 0) + varint(0))
    assert protobuf.decode(body) == {"apiVersion": "scheduling.k8s.io/v1",
                                     "kind": "PriorityClass", "metadata": {"name": "p"},
                                     "value": 0}


def test_members_follow_the_go_struct_not_the_field_numbers() -> None:
    container = {"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                 "envFrom": [{"prefix": "P_"}], "env": [{"name": "A", "value": "1"}],
                 "resources": {}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [container]}, "status": {}}
    got = roundtrip(pod)
    # field numbers: ports 6, env 7, resources 8, envFrom 19; the Go struct has envFrom first
    assert list(got["spec"]["containers"][0]) == ["name", "image", "ports", "envFrom", "env",
                                                  "resources"]


def test_absent_fields_stay_absent_and_empty_messages_are_shown() -> None:
    body = envelope("apps/v1", "Deployment", ld(1, b"") + ld(2, ld(4, b"")))
    assert protobuf.decode(body) == {"apiVersion": "apps/v1", "kind": "Deployment",
                                     "metadata": {}, "spec": {"strategy": {}}}


def test_inline_members_are_the_parents() -> None:
    probe = {"exec": {"command": ["true"]}, "periodSeconds": 5}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "resources": {}, "livenessProbe": probe}],
                    "ephemeralContainers": [{"name": "debug", "image": "busybox",
                                             "resources": {}, "targetContainerName": "c"}]},
           "status": {}}
    got = roundtrip(pod)
    assert got["spec"]["containers"][0]["livenessProbe"] == probe
    assert got["spec"]["ephemeralContainers"][0] == {
        "name": "debug", "image": "busybox", "resources": {}, "targetContainerName": "c"}


def test_inline_members_of_inline_members() -> None:
    """NamedRuleWithOperations inlines RuleWithOperations, which inlines Rule."""
    rule = {"resourceNames": ["one"], "operations": ["CREATE"], "apiGroups": ["apps"],
            "apiVersions": ["v1"], "resources": ["deployments"], "scope": "Namespaced"}
    policy = {"apiVersion": "admissionregistration.k8s.io/v1",
              "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "p"},
              "spec": {"matchConstraints": {"resourceRules": [rule]}}, "status": {}}
    got = roundtrip(policy)
    assert got == policy
    assert list(got["spec"]["matchConstraints"]["resourceRules"][0]) == list(rule)


def test_a_message_sent_twice_is_merged_and_a_scalar_sent_twice_is_the_last() -> None:
    raw = ld(1, ld(1, "first") + ld(3, "ns")) + key(4, 0) + varint(1) \
        + ld(1, ld(1, "second")) + key(4, 0) + varint(0)
    got = protobuf.decode(envelope("v1", "ServiceAccount", raw))
    assert got == {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": "second", "namespace": "ns"},
                   "automountServiceAccountToken": False}


def test_maps_with_message_values_and_missing_entries() -> None:
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
             "spec": {"hard": {"cpu": "500m", "memory": "1Gi"}}, "status": {}}
    assert roundtrip(quota) == quota
    # an entry without a value is the zero value: "" for a string, "0" for a Quantity
    raw = ld(1, ld(11, ld(1, "empty"))) + ld(2, ld(1, ld(1, "cpu")))
    got = protobuf.decode(envelope("v1", "ResourceQuota", raw))
    assert got["metadata"]["labels"] == {"empty": ""}
    assert got["spec"]["hard"] == {"cpu": "0"}


def test_packed_and_unpacked_repeated_scalars() -> None:
    def job(values: bytes) -> bytes:
        requirement = ld(2, b"In") + values
        rule = ld(1, b"FailJob") + ld(2, requirement)
        return envelope("batch/v1", "Job", ld(2, ld(11, ld(1, rule))))

    unpacked = job(key(3, 0) + varint(1) + key(3, 0) + varint(42))
    packed = job(ld(3, varint(1) + varint(42)) + key(3, 0) + varint(7))
    path = ["spec", "podFailurePolicy", "rules", 0, "onExitCodes", "values"]
    for body, want in ((unpacked, [1, 42]), (packed, [1, 42, 7])):
        value: Any = protobuf.decode(body)
        for step in path:
            value = value[step]
        assert value == want


def test_integers_are_twos_complement() -> None:
    body = envelope("v1", "Pod", ld(2, key(4, 0) + varint(-30)
                                    + ld(2, ld(1, "c") + ld(6, key(3, 0) + varint(-1)))))
    got = protobuf.decode(body)
    assert got["spec"]["terminationGracePeriodSeconds"] == -30
    assert got["spec"]["containers"][0]["ports"] == [{"containerPort": -1}]


# --- the forms -----------------------------------------------------------------------------------


def time_field(number: int, seconds: int, nanos: int = 0) -> bytes:
    return ld(number, key(1, 0) + varint(seconds) + key(2, 0) + varint(nanos))


@pytest.mark.parametrize(("raw", "want"), [
    (ld(9, b""), None),                                   # the zero time is written as nothing
    (time_field(9, 0), "1970-01-01T00:00:00Z"),           # the epoch is a time like any other
    (time_field(9, 1704164645, 999_999_999), "2024-01-02T03:04:05Z"),  # Time keeps seconds
    (time_field(9, -62135596800), None),                  # Go's zero time, spelt out
    (time_field(9, -62135596799), "0001-01-01T00:00:01Z"),
    (time_field(9, 253402300799), "9999-12-31T23:59:59Z"),
], ids=["empty", "epoch", "nanos-dropped", "zero-time", "year-one", "year-9999"])
def test_time(raw: bytes, want: str | None) -> None:
    got = protobuf.decode(envelope("v1", "ConfigMap", ld(1, raw)))
    assert got["metadata"].get("deletionTimestamp") == want


def test_micro_time_keeps_microseconds() -> None:
    spec = time_field(3, 1704164645, 123_456_789) + time_field(4, 1704164645)
    got = protobuf.decode(envelope("coordination.k8s.io/v1", "Lease", ld(1, b"") + ld(2, spec)))
    assert got["spec"] == {"acquireTime": "2024-01-02T03:04:05.123456Z",
                           "renewTime": "2024-01-02T03:04:05.000000Z"}


@pytest.mark.parametrize(("nanoseconds", "text"), [
    (0, "0s"), (1, "1ns"), (999, "999ns"), (1_500, "1.5µs"), (2_000_000, "2ms"),
    (1_234_567, "1.234567ms"), (1_000_000_000, "1s"), (1_500_000_000, "1.5s"),
    (90_000_000_000, "1m30s"), (3_600_000_000_000, "1h0m0s"),
    (3_723_004_000_000, "1h2m3.004s"), (-1, "-1ns"), (-90_000_000_000, "-1m30s"),
    ((1 << 63) - 1, "2562047h47m16.854775807s"), (-(1 << 63), "-2562047h47m16.854775808s"),
])
def test_go_duration(nanoseconds: int, text: str) -> None:
    assert protobuf.go_duration(nanoseconds) == text


def test_int_or_string() -> None:
    def service(target: bytes) -> bytes:
        return envelope("v1", "Service", ld(2, ld(1, key(3, 0) + varint(80) + ld(4, target))))

    def port(body: bytes) -> Any:
        return protobuf.decode(body)["spec"]["ports"][0]["targetPort"]

    assert port(service(key(1, 0) + varint(0) + key(2, 0) + varint(8080) + ld(3, ""))) == 8080
    assert port(service(key(1, 0) + varint(1) + key(2, 0) + varint(0) + ld(3, "http"))) \
        == "http"
    assert port(service(b"")) == 0  # the zero IntOrString is the integer 0, as in Go
    with pytest.raises(ProtobufError, match=r"^spec\.ports\[0\]\.targetPort: IntOrString type "
                                            r"2 is neither"):
        port(service(key(1, 0) + varint(2)))


def test_embedded_json_values() -> None:
    revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": "r", "managedFields": [{
                    "manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {}}}]},
                "data": {"spec": {"template": {"x": [1, 2.5, None, True]}}}, "revision": 3}
    assert roundtrip(revision) == revision
    bad = envelope("apps/v1", "ControllerRevision", ld(2, ld(1, b"{not json")))
    with pytest.raises(ProtobufError, match=r"^data: "):
        protobuf.decode(bad)


def schema_props(**members: Any) -> dict[str, Any]:
    return {"type": "object", **members}


def test_custom_resource_definition_schemas() -> None:
    schema = schema_props(
        properties={
            "spec": schema_props(
                required=["size"],
                properties={
                    "size": {"type": "integer", "minimum": 0, "maximum": 10,
                             "multipleOf": 0.5, "default": 1},
                    "color": {"type": "string", "enum": ["red", "blue", None]},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"},
                    "pair": {"type": "array", "items": [{"type": "string"},
                                                        {"type": "integer"}]},
                    "labels": {"type": "object",
                               "additionalProperties": {"type": "string"}},
                    "closed": {"type": "object", "additionalProperties": False},
                    "open": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "port": {"x-kubernetes-int-or-string": True,
                             "anyOf": [{"type": "integer"}, {"type": "string"}]}},
                dependencies={"a": ["b", "c"], "d": {"required": ["e"]}},
                **{"x-kubernetes-validations": [{"rule": "self.size >= 0",
                                                 "message": "non-negative"}]}),
            "status": schema_props(example={"phase": "Ready"})})
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com",
                    "names": {"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": schema},
                                  "subresources": {"status": {}}}]},
           "status": {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                      "storedVersions": []}}
    got = roundtrip(crd)
    crd["status"] = {"acceptedNames": {"plural": "", "kind": ""}}  # empty lists are not shown
    assert got == crd
    size = got["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["size"]
    assert type(size["maximum"]) is int
    assert type(size["multipleOf"]) is float


def test_a_schema_maximum_that_is_not_a_number_is_refused() -> None:
    props = key(9, 1) + struct.pack("<d", float("nan"))
    validation = ld(1, props)
    version = ld(1, "v1") + ld(4, validation)
    body = envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                    ld(2, ld(7, version)))
    with pytest.raises(ProtobufError, match=r"spec\.versions\[0\]\.schema\.openAPIV3Schema"
                                            r"\.maximum: nan is not a JSON number"):
        protobuf.decode(body)


def test_extra_values_are_lists() -> None:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "metadata": {}, "spec": {"user": "alice", "groups": ["devs"],
                                       "extra": {"scopes": ["a", "b"], "empty": []},
                                       "resourceAttributes": {"verb": "get"}},
              "status": {"allowed": False}}
    assert roundtrip(review) == review


@pytest.mark.parametrize("api_version", ["v1", "apps/v1", "meta.k8s.io/v1",
                                         "policy/v1"])
def test_delete_options_in_every_group_version(api_version: str) -> None:
    options = {"apiVersion": api_version, "kind": "DeleteOptions", "gracePeriodSeconds": 0,
               "preconditions": {"uid": "u-1"}, "propagationPolicy": "Foreground",
               "dryRun": ["All"]}
    assert roundtrip(options) == options


def test_eviction_carries_delete_options() -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "p", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 30}}
    assert roundtrip(eviction) == eviction


# --- errors and limits ---------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "message"), [
    (ld(2, ld(3, ld(2, ld(2, ld(1, b"\xff"))))),
     "spec.template.spec.containers[0].name is not valid UTF-8"),
    (ld(2, ld(3, ld(2, ld(2, ld(1, "a")) + ld(2, ld(1, "b") + ld(7, key(2, 0) + varint(1)))))),
     "spec.template.spec.containers[1].env[0].value: unexpected wire type 0"),
    (ld(1, ld(11, ld(1, b"\xc3"))), "metadata.labels key is not valid UTF-8"),
    (ld(1, ld(12, ld(1, "k") + ld(2, b"\xc3"))), "metadata.annotations[k] is not valid UTF-8"),
    (ld(2, key(1, 0) + b"\xff"), "truncated varint"),
    (ld(2, ld(3, ld(2, ld(2, ld(1, "a") + key(10, 2) + varint(50))))),
     "truncated message: field 10 needs 50 bytes, 0 left"),
], ids=["nested-utf8", "list-index", "map-key", "map-value", "truncated-varint",
        "truncated-length"])
def test_errors_name_the_field(raw: bytes, message: str) -> None:
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(envelope("apps/v1", "Deployment", raw))
    assert str(info.value) == message


def nested_schema(levels: int) -> bytes:
    """A JSONSchemaProps whose property ``p`` nests ``levels`` times."""
    props = b""
    for _ in range(levels):
        props = ld(29, ld(1, "p") + ld(2, props))
    return props


def crd_with(props: bytes) -> bytes:
    version = ld(1, "v1") + ld(4, ld(1, props))
    return envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                    ld(2, ld(7, version)))


def test_error_messages_quote_at_most_64_characters_of_the_body() -> None:
    long = "x" * 100_000
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(envelope(long, long, b""))
    assert str(info.value) == (f"no protobuf decoding for kind '{'x' * 64}...' in version "
                               f"'{'x' * 64}...'")
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(envelope("v1", "ConfigMap", ld(2, ld(1, long) + ld(2, b"\xff"))))
    assert str(info.value) == f"data[{'x' * 64}...] is not valid UTF-8"
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(envelope("v1", "ConfigMap", b"") + ld(3, long))
    assert len(str(info.value)) < 120


def test_nesting_is_bounded_like_json_bodies() -> None:
    # the schema object sits 6 levels down: object, spec, versions, [0], schema, openAPIV3Schema
    # and each property adds two (properties, p): 6 + 2 * 61 = 128 is the deepest allowed
    ok = protobuf.decode(crd_with(nested_schema(61)))
    assert decoding.depth(ok) == 128
    with pytest.raises(ProtobufError, match="nested deeper than the limit of 128 levels"):
        protobuf.decode(crd_with(nested_schema(62)))
    with pytest.raises(ProtobufError, match="nested deeper than the limit of 128 levels"):
        protobuf.decode(crd_with(nested_schema(5000)))  # no recursion error either
    shallow = ProtobufLimits(max_depth=10)
    with pytest.raises(ProtobufError, match="limit of 10 levels"):
        protobuf.decode(crd_with(nested_schema(3)), limits=shallow)
    assert decoding.depth(protobuf.decode(crd_with(nested_schema(2)), limits=shallow)) == 10


def items_chain(levels: int) -> bytes:
    """A JSONSchemaProps whose ``items`` nests ``levels`` times (one JSON level each)."""
    props = b""
    for _ in range(levels):
        props = ld(24, ld(1, props))
    return props


def test_paths_through_forms_and_long_paths() -> None:
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(crd_with(ld(24, ld(1, ld(24, ld(1, ld(24, ld(2, ld(4, b"\xff")))))))))
    assert str(info.value) == ("spec.versions[0].schema.openAPIV3Schema.items.items.items[0]"
                               ".description is not valid UTF-8")
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(envelope("v1", "ConfigMap", ld(1, ld(8, ld(1, b"")))))
    assert str(info.value) == "metadata.creationTimestamp: unexpected wire type 2"
    with pytest.raises(ProtobufError) as info:
        protobuf.decode(crd_with(items_chain(123)))
    message = str(info.value)
    assert message.startswith("spec.versions[0].schema.openAPIV3Schema.items.items.")
    assert message.endswith("items.items: the object is nested deeper than the limit of 128 "
                            "levels")
    assert len(message) < 300


def test_the_deepest_limit_decodes_without_reaching_pythons_recursion_limit() -> None:
    assert decoding.depth(protobuf.decode(crd_with(items_chain(122)))) == 128
    deepest = ProtobufLimits(max_depth=150)
    assert decoding.depth(protobuf.decode(crd_with(items_chain(144)), limits=deepest)) == 150
    with pytest.raises(ProtobufError, match="limit of 150 levels"):
        protobuf.decode(crd_with(items_chain(600)), limits=deepest)
    with pytest.raises(ValueError, match="between 1 and 150"):
        ProtobufLimits(max_depth=151)


def test_a_decode_with_little_stack_left_is_still_a_protobuf_error() -> None:
    def nested(levels: int) -> Any:
        if levels:
            return nested(levels - 1)
        return protobuf.decode(crd_with(items_chain(122)))

    with pytest.raises(ProtobufError, match="nested too deeply to decode"):
        nested(sys.getrecursionlimit() - 200)


def test_embedded_json_counts_towards_the_depth() -> None:
    deep = b"[" * 125 + b"]" * 125  # the data of a ControllerRevision is at depth 2
    revision = envelope("apps/v1", "ControllerRevision", ld(2, ld(1, deep)))
    assert decoding.depth(protobuf.decode(revision)) == 126
    deeper = b"[" * 128 + b"]" * 128
    with pytest.raises(ProtobufError, match=r"^data: .*limit of 128 levels"):
        protobuf.decode(envelope("apps/v1", "ControllerRevision", ld(2, ld(1, deeper))))


def test_number_of_fields_and_size_are_bounded() -> None:
    labels = b"".join(ld(11, ld(1, f"k{i}") + ld(2, "v")) for i in range(100))
    body = envelope("v1", "ConfigMap", ld(1, labels))
    assert len(protobuf.decode(body)["metadata"]["labels"]) == 100
    with pytest.raises(ProtobufError, match="more than 150 fields"):
        protobuf.decode(body, limits=ProtobufLimits(max_fields=150))
    # every field read counts, the envelope's and unknown ones too: 2 + 2 + 2 here
    unknown = envelope("v1", "ConfigMap", key(99, 0) + b"\x00" + key(98, 0) + b"\x00")
    assert protobuf.decode(unknown, limits=ProtobufLimits(max_fields=6))
    with pytest.raises(ProtobufError, match="more than 5 fields"):
        protobuf.decode(unknown, limits=ProtobufLimits(max_fields=5))
    with pytest.raises(ProtobufError, match="larger than the limit of 100 bytes"):
        protobuf.decode(body, limits=ProtobufLimits(max_size=100))


def test_merging_many_copies_of_a_message_is_linear() -> None:
    """metadata, or the envelope's typeMeta, sent 200,000 times: merged once, not copied
    once per occurrence (which would take minutes)."""
    body = envelope("v1", "ConfigMap", ld(1, ld(1, "a")) * 200_000)
    assert protobuf.decode(body)["metadata"] == {"name": "a"}
    type_meta = ld(1, ld(1, "v1")) * 200_000 + ld(1, ld(2, "ConfigMap"))
    assert protobuf.decode(protobuf.MAGIC + type_meta) == {"apiVersion": "v1",
                                                           "kind": "ConfigMap"}


def test_the_envelope_merges_type_meta_and_its_strings_are_the_last_sent() -> None:
    body = protobuf.MAGIC + ld(1, ld(1, "apps/v1") + ld(1, "v1")) + ld(1, ld(2, "ConfigMap")) \
        + ld(2, ld(1, ld(1, "a"))) + ld(3, "gzip") + ld(3, "")
    assert protobuf.decode(body) == {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "a"}}


# --- properties ----------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=6)
MAX_GENERATED_DEPTH = 3


def _scalar(kind: int, omit_zero: bool) -> st.SearchStrategy[Any]:
    strategy: st.SearchStrategy[Any] = {
        STRING: st.text(max_size=6),
        BYTES: st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
        BOOL: st.booleans(),
        INT32: st.integers(-(1 << 31), (1 << 31) - 1),
        INT64: st.integers(-(1 << 63), (1 << 63) - 1),
        UINT32: st.integers(0, (1 << 32) - 1),
        UINT64: st.integers(0, (1 << 64) - 1),
        DOUBLE: st.integers(-(1 << 53), 1 << 53) | st.floats(
            allow_nan=False, allow_infinity=False).filter(
            lambda x: not (x.is_integer() and abs(x) < 1e21)),
        FLOAT: st.integers(-(1 << 24), 1 << 24),
    }[kind]
    return strategy.filter(bool) if omit_zero else strategy


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _form(tables: Tables, name: str, depth: int) -> st.SearchStrategy[Any] | None:
    message = tables.messages[name]
    form = message.form
    if form == "time":
        return st.integers(-62135596799, 253402300799).map(
            lambda s: timeutil.format_time(EPOCH + timedelta(seconds=s)))
    if form == "microtime":
        return st.integers(-62135596799_000_000, 253402300799_999_999).map(
            lambda us: timeutil.format_micro_time(EPOCH + timedelta(microseconds=us)))
    if form == "duration":
        return st.integers(-(1 << 63), (1 << 63) - 1).map(protobuf.go_duration)
    if form == "intorstring":
        return st.integers(-(1 << 31), (1 << 31) - 1) | st.text(max_size=4)
    if form == "quantity":
        return st.text(max_size=5)
    if form == "json":
        return JSON_VALUES.filter(lambda v: v is not None)
    if form == "list":
        return st.lists(st.text(max_size=3), max_size=3)
    if depth >= MAX_GENERATED_DEPTH:
        return None
    schema = objects(EXT + "JSONSchemaProps", depth + 1)
    if form == "schemaorarray":
        return schema | st.lists(schema, min_size=1, max_size=2)
    if form == "schemaorbool":
        return schema | st.booleans()
    return schema | st.lists(st.text(max_size=3), min_size=1, max_size=2)


def _value(tables: Tables, f: Field, kind: int, depth: int) -> st.SearchStrategy[Any] | None:
    """The values of one element of ``f`` (the field itself, a list item or a map value)."""
    if kind != MESSAGE:
        return _scalar(kind, f.omit_zero and not f.repeated and f.kind != MAP)
    message = tables.messages[f.message]  # type: ignore[index]
    if message.form is not None:
        return _form(tables, message.name, depth)
    if depth >= MAX_GENERATED_DEPTH and (f.pointer or f.repeated or f.kind == MAP):
        return None
    return objects(message.name, depth + 1)


def _required(tables: Tables, f: Field) -> bool:
    """Whether the decoder always shows ``f`` for bodies gogo writes (it writes every
    non-pointer scalar and struct)."""
    if f.pointer or f.repeated or f.kind in (MAP, BYTES):
        return False
    if f.kind != MESSAGE:
        return not f.omit_zero
    return tables.messages[f.message].form not in (  # type: ignore[index]
        "time", "microtime", "json", "list")


@cache
def objects(name: str, depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of a message of the shipped tables in the shape the decoder returns."""
    tables = protobuf.tables()
    message = tables.messages[name]
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for f in message.fields.values():
        element = _value(tables, f, f.value if f.kind == MAP else f.kind, depth)
        if element is None:
            continue
        if f.kind == MAP:
            keys = st.text(max_size=4) if f.key == STRING else _scalar(f.key, False).map(str)
            strategy: st.SearchStrategy[Any] = st.dictionaries(keys, element, min_size=1,
                                                               max_size=2)
        elif f.repeated:
            strategy = st.lists(element, min_size=1, max_size=2)
        else:
            strategy = element
        if f.inline:
            required["\0" + f.json] = strategy
        elif _required(tables, f):
            required[f.json] = strategy
        else:
            optional[f.json] = strategy
    return st.fixed_dictionaries(required, optional=optional).map(_flatten)


def _flatten(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        if k.startswith("\0"):
            out.update(v)
        else:
            out[k] = v
    return out


ALL_KINDS = sorted(protobuf.tables().kinds)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_object_of_any_kind_survives_encoding_and_decoding(data: st.DataObject) -> None:
    tables = protobuf.tables()
    api_version, kind = data.draw(st.sampled_from(ALL_KINDS), label="kind")
    message = tables.kinds[(api_version, kind)]
    obj = {"apiVersion": api_version, "kind": kind,
           **data.draw(objects(message.name), label="object")}
    got = roundtrip(obj)
    assert got == obj
    ranks = [message.rank[_number(message, k)] for k in list(got)[2:]]
    assert ranks == sorted(ranks)


def _number(message: Any, json_name: str) -> int:
    for f in message.fields.values():
        if f.json == json_name:
            return int(f.number)
        if f.inline:
            inner = protobuf.tables().messages[f.message]
            if any(g.json == json_name for g in inner.fields.values()):
                return int(f.number)
    raise AssertionError(json_name)


def check_total(body: bytes) -> None:
    """Decoding either raises ProtobufError or returns a JSON value within the limits."""
    try:
        got = protobuf.decode(body)
    except ProtobufError:
        return
    assert decoding.depth(got) <= decoding.MAX_DEPTH
    orjson.dumps(got)


KIND_ENVELOPES = st.sampled_from(ALL_KINDS)


@settings(max_examples=500, deadline=None)
@given(KIND_ENVELOPES, st.binary(max_size=300))
def test_random_object_bytes_of_every_kind(kind: tuple[str, str], raw: bytes) -> None:
    check_total(envelope(*kind, raw))


def _field_streams() -> st.SearchStrategy[bytes]:
    """Random but well-framed fields: any number and wire type, nested streams as payloads."""
    leaf = st.one_of(
        st.tuples(st.integers(1, 45), st.integers(0, 1 << 64)).map(
            lambda t: key(t[0], 0) + varint(t[1])),
        st.tuples(st.integers(1, 45), st.binary(min_size=8, max_size=8)).map(
            lambda t: key(t[0], 1) + t[1]),
        st.tuples(st.integers(1, 45), st.binary(min_size=4, max_size=4)).map(
            lambda t: key(t[0], 5) + t[1]),
        st.tuples(st.integers(1, 45), st.binary(max_size=12)).map(lambda t: ld(*t)))
    return st.recursive(
        st.lists(leaf, max_size=4).map(b"".join),
        lambda inner: st.lists(
            st.tuples(st.integers(1, 45), inner).map(lambda t: ld(*t)) | leaf,
            max_size=4).map(b"".join),
        max_leaves=25)


@settings(max_examples=500, deadline=None)
@given(KIND_ENVELOPES, _field_streams())
def test_random_field_streams_of_every_kind(kind: tuple[str, str], raw: bytes) -> None:
    check_total(envelope(*kind, raw))


SAMPLES = [bytes.fromhex(c["body"]) for c in BODIES["bodies"]]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    body = bytearray(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(1, 4))):
        if not body:
            break
        at = draw(st.integers(0, len(body) - 1))
        how = draw(st.sampled_from(["flip", "set", "insert", "delete", "duplicate",
                                    "truncate"]))
        if how == "flip":
            body[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "set":
            body[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x08]))
        elif how == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif how == "delete":
            del body[at:at + draw(st.integers(1, 4))]
        elif how == "duplicate":
            end = min(len(body), at + draw(st.integers(1, 16)))
            body[at:at] = body[at:end]
        else:
            del body[at:]
    return bytes(body)


@settings(max_examples=1000, deadline=None)
@given(mutated())
def test_mutated_kubectl_bodies(body: bytes) -> None:
    check_total(body)


def test_the_forms_and_scalars_no_shipped_kind_uses_yet() -> None:
    """Duration, float, unsigned integers and integer map keys, on tables of their own."""
    d = "k8s.io.apimachinery.pkg.apis.meta.v1.Duration"
    tables = Tables.from_document({
        "groupVersions": {"example.com/v1": {"package": "ex", "kinds": ["Thing"]}},
        "messages": {
            "ex.Thing": {"fields": [
                [1, "timeout", d, ""], [2, "ratio", "float", "o"], [3, "small", "uint32", ""],
                [4, "big", "uint64", ""], [5, "names", "map<int32,string>", "o"],
                [6, "every", d, "rp"]]},
            d: {"form": "duration", "fields": [[1, "duration", "int64", ""]]}}})
    raw = (ld(1, key(1, 0) + varint(90_000_000_000)) + key(2, 5) + struct.pack("<f", 0.5)
           + key(3, 0) + varint((1 << 32) + 7) + key(4, 0) + varint((1 << 64) - 1)
           + ld(5, key(1, 0) + varint(-2) + ld(2, "minus two")) + ld(6, b""))
    body = envelope("example.com/v1", "Thing", raw)
    assert protobuf.decode(body, table=tables) == {
        "apiVersion": "example.com/v1", "kind": "Thing", "timeout": "1m30s", "ratio": 0.5,
        "small": 7, "big": (1 << 64) - 1, "names": {"-2": "minus two"}, "every": ["0s"]}
