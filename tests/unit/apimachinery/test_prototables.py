"""setpoint.apimachinery.prototables: the shipped tables, and what a table must be to load."""

from __future__ import annotations

import copy
import importlib.resources
from typing import Any

import orjson
import pytest
from tests.protobuf_encoder import ld

from setpoint.apimachinery import protobuf
from setpoint.apimachinery.prototables import MAP, MESSAGE, STRING, TableError, Tables

META = "k8s.io.apimachinery.pkg.apis.meta.v1."


def test_the_shipped_tables_say_where_they_come_from() -> None:
    raw = importlib.resources.files("setpoint.apimachinery").joinpath(
        "kubernetes-protobuf.json").read_bytes()
    document = orjson.loads(raw)
    assert document["kubernetesVersion"].startswith("v1.32.")
    assert document["copyright"] == "The Kubernetes Authors"
    assert document["license"].startswith("Apache-2.0")
    assert document["generatedBy"] == "scripts/extract_protobuf.py"
    assert len(document["sourceSha256"]) == 64
    assert "k8s.io/api/core/v1/generated.proto" in document["inputs"]


@pytest.mark.parametrize(("api_version", "kind"), [
    ("v1", "Pod"), ("v1", "Service"), ("v1", "Endpoints"), ("v1", "Node"),
    ("v1", "ServiceAccount"), ("v1", "Event"), ("v1", "Binding"), ("v1", "Namespace"),
    ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "ResourceQuota"), ("v1", "LimitRange"),
    ("v1", "PersistentVolumeClaim"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"),
    ("batch/v1", "CronJob"), ("policy/v1", "Eviction"), ("policy/v1", "PodDisruptionBudget"),
    ("discovery.k8s.io/v1", "EndpointSlice"), ("coordination.k8s.io/v1", "Lease"),
    ("events.k8s.io/v1", "Event"), ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("authentication.k8s.io/v1", "TokenRequest"), ("authentication.k8s.io/v1", "TokenReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"), ("autoscaling/v1", "Scale"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("networking.k8s.io/v1", "Ingress"), ("networking.k8s.io/v1", "NetworkPolicy"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("v1", "DeleteOptions"), ("apps/v1", "DeleteOptions"), ("meta.k8s.io/v1", "DeleteOptions"),
])
def test_the_kinds_setpoint_serves_or_will_serve_are_known(api_version: str,
                                                           kind: str) -> None:
    assert (api_version, kind) in protobuf.tables().kinds


def test_fields_carry_what_the_json_shape_needs() -> None:
    tables = protobuf.tables()
    meta = tables.messages[META + "ObjectMeta"]
    name, grace, labels, owners = (meta.fields[n] for n in (1, 10, 11, 13))
    assert (name.json, name.kind, name.omitempty, name.pointer) == ("name", STRING, True, False)
    assert name.omit_zero
    assert not grace.omit_zero
    assert labels.kind == MAP
    assert labels.key == STRING
    assert labels.value == STRING
    assert owners.kind == MESSAGE
    assert owners.repeated
    assert owners.message == META + "OwnerReference"
    probe = tables.messages["k8s.io.api.core.v1.Probe"]
    assert probe.fields[1].inline
    assert tables.messages[META + "Time"].form == "time"


def minimal() -> dict[str, Any]:
    return {"groupVersions": {"v1": {"package": "p", "kinds": ["Thing"]}},
            "optionKinds": {"Options": "p.Options"},
            "messages": {
                "p.Thing": {"fields": [[1, "metadata", "p.Meta", "o"],
                                       [2, "labels", "map<string,string>", "o"]]},
                "p.Meta": {"fields": [[1, "name", "string", "o"]]},
                "p.Options": {"fields": []}}}


def test_a_minimal_table_loads() -> None:
    tables = Tables.from_document(minimal())
    assert tables.kinds[("v1", "Thing")].name == "p.Thing"
    assert tables.kinds[("v1", "Options")].name == "p.Options"
    assert tables.kinds[("meta.k8s.io/v1", "Options")].name == "p.Options"


def broken(change: str) -> dict[str, Any]:
    doc = copy.deepcopy(minimal())
    thing = doc["messages"]["p.Thing"]["fields"]
    if change == "unknown-message":
        thing[0][2] = "p.Missing"
    elif change == "bad-flags":
        thing[0][3] = "oz"
    elif change == "bad-row":
        thing[0] = [1, "metadata"]
    elif change == "field-zero":
        thing[0][0] = 0
    elif change == "duplicate-number":
        thing[1][0] = 1
    elif change == "unknown-form":
        doc["messages"]["p.Meta"]["form"] = "mystery"
    elif change == "inline-scalar":
        thing[1] = [2, "x", "string", "i"]
    elif change == "map-key-bytes":
        thing[1][2] = "map<bytes,string>"
    elif change == "kind-without-message":
        doc["groupVersions"]["v1"]["kinds"].append("Other")
    elif change == "option-without-message":
        doc["optionKinds"]["Gone"] = "p.Gone"
    elif change == "no-messages":
        del doc["messages"]
    elif change == "inline-form":
        doc["messages"]["p.Meta"]["form"] = "time"
        thing[0][3] = "i"
    return doc


@pytest.mark.parametrize(("change", "message"), [
    ("unknown-message", "message 'p.Missing' is not in the tables"),
    ("bad-flags", "invalid number or flags"),
    ("bad-row", "a field is [number, json name, type, flags]"),
    ("field-zero", "field 0 has an invalid number"),
    ("duplicate-number", "field 1 is defined twice"),
    ("unknown-form", "unknown form 'mystery'"),
    ("inline-scalar", "only a single message can be inline"),
    ("map-key-bytes", "map key type 'bytes' is not allowed"),
    ("kind-without-message", "v1 Other: no message 'p.Other'"),
    ("option-without-message", "option kind Gone: no message 'p.Gone'"),
    ("no-messages", "the tables need messages, groupVersions and optionKinds"),
    ("inline-form", "an inline field must be an object"),
])
def test_malformed_tables_are_refused(change: str, message: str) -> None:
    with pytest.raises(TableError) as info:
        Tables.from_document(broken(change))
    assert message in str(info.value)


def test_decoding_with_other_tables() -> None:
    tables = Tables.from_document(minimal())
    body = protobuf.MAGIC + ld(1, ld(1, "v1") + ld(2, "Thing")) + ld(2, ld(1, ld(1, "x")))
    assert protobuf.decode(body, table=tables) == {"apiVersion": "v1", "kind": "Thing",
                                                   "metadata": {"name": "x"}}
    with pytest.raises(protobuf.ProtobufError, match="no protobuf decoding for kind 'Thing'"):
        protobuf.decode(body)  # not a kind of the shipped tables
