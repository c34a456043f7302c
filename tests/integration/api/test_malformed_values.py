"""Malformed values get a 4xx Status, never a 500, and the server keeps serving.

Bodies of built-in kinds decode into Kubernetes' Go types first: a value of the wrong JSON
type is a 400 with Go's message (422 ``patch`` for the object a patch made, 400 ``failed to
create typed patch object`` for an applied configuration). DeleteOptions, continue tokens
and query parameters are checked the same way.
"""

from __future__ import annotations

import base64
import copy
import itertools
from typing import Any

import aiohttp
import orjson
import pytest

from tests.integration.api.helpers import CRD_V1, install_widgets, request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SECRETS = "/api/v1/namespaces/default/secrets"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def cannot(kind: str, detail: str) -> str:
    return f'{kind} in version "v1" cannot be handled as a {kind}: {detail}'


async def test_wrong_types_are_400_with_go_messages(http: aiohttp.ClientSession) -> None:
    cases = [
        (CONFIGMAPS, {"metadata": {"name": "c"}, "data": "x"},
         cannot("ConfigMap", "json: cannot unmarshal string into Go struct field ConfigMap.data "
                             "of type map[string]string")),
        (CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"k": 1}},
         cannot("ConfigMap", "json: cannot unmarshal number into Go struct field ConfigMap.data "
                             "of type string")),
        (LEASES, {"metadata": {"name": "l"}, "spec": "x"},
         cannot("Lease", "json: cannot unmarshal string into Go struct field Lease.spec of type "
                         "v1.LeaseSpec")),
        (LEASES, {"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 1.5}},
         cannot("Lease", "json: cannot unmarshal number 1.5 into Go struct field "
                         "LeaseSpec.spec.leaseDurationSeconds of type int32")),
        (CRDS, {"metadata": {"name": "a.example.com"}, "spec": "x"},
         cannot("CustomResourceDefinition", "json: cannot unmarshal string into Go struct field "
                "CustomResourceDefinition.spec of type v1.CustomResourceDefinitionSpec")),
        ("/api/v1/namespaces", {"metadata": {"name": "n", "labels": ["x"]}},
         cannot("Namespace", "json: cannot unmarshal array into Go struct field "
                             "ObjectMeta.metadata.labels of type map[string]string")),
        (SECRETS, {"metadata": {"name": "s"}, "data": {"k": "not base64!"}},
         cannot("Secret", "illegal base64 data at input byte 3")),
    ]
    for path, body, message in cases:
        status, reply, _ = await request(http, "POST", path, body)
        assert (status, reply["reason"], reply["message"]) == (400, "BadRequest", message)


async def test_patches_to_wrong_types_are_422_and_applies_400(
        http: aiohttp.ClientSession) -> None:
    status, _, _ = await request(http, "POST", CONFIGMAPS, {"metadata": {"name": "c"}})
    assert status == 201
    for content_type in (MERGE, STRATEGIC):
        status, reply, _ = await request(http, "PATCH", f"{CONFIGMAPS}/c", {"data": "x"},
                                         content_type=content_type)
        assert status == 422, reply
        [cause] = reply["details"]["causes"]
        assert cause["field"] == "patch"
        assert cause["message"].endswith(
            "json: cannot unmarshal string into Go struct field ConfigMap.data of type "
            "map[string]string")
    status, reply, _ = await request(
        http, "PATCH", f"{CONFIGMAPS}/c?fieldManager=m",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
         "binaryData": {"k": 5}}, content_type=APPLY)
    assert status == 400
    assert reply["message"] == (
        "failed to create typed patch object (default/c; /v1, Kind=ConfigMap): json: cannot "
        "unmarshal number into Go struct field ConfigMap.binaryData of type []uint8")


# --- the sweep: every built-in kind, wrong-typed fields, every way of writing ------------------

WRONG: list[Any] = ["x", 7, 1.5, True, [], ["x"], [{}], {}, {"a": 1}, -1, 2**40]

META_FIELDS = ["metadata", "metadata.labels", "metadata.annotations", "metadata.finalizers",
               "metadata.ownerReferences", "metadata.ownerReferences.0",
               "metadata.managedFields", "metadata.managedFields.0", "metadata.generateName",
               "metadata.labels.a", "metadata.uid", "metadata.deletionGracePeriodSeconds",
               "metadata.creationTimestamp", "metadata.generation"]


def _crd(name: str) -> dict[str, Any]:
    body = copy.deepcopy(CRD_V1)
    body["metadata"]["name"] = f"{name}s.example.org"
    body["spec"]["group"] = "example.org"
    body["spec"]["names"] = {"plural": f"{name}s", "kind": name.capitalize()}
    return body


KINDS: dict[str, tuple[str, Any, list[str]]] = {
    "namespaces": ("/api/v1/namespaces", lambda n: {"metadata": {"name": n}},
                   ["spec", "status", "spec.finalizers", "status.phase",
                    "status.conditions.0"]),
    "configmaps": (CONFIGMAPS, lambda n: {"metadata": {"name": n}, "data": {"k": "v"}},
                   ["data", "binaryData", "immutable", "data.k", "binaryData.k"]),
    "secrets": (SECRETS, lambda n: {"metadata": {"name": n}, "data": {"k": "dg=="}},
                ["data", "stringData", "type", "immutable", "data.k", "stringData.k"]),
    "events": ("/api/v1/namespaces/default/events",
               lambda n: {"metadata": {"name": n}, "involvedObject": {"name": "x"}},
               ["involvedObject", "reason", "source", "count", "series", "related",
                "firstTimestamp", "eventTime", "involvedObject.name", "series.count"]),
    "events.k8s.io": ("/apis/events.k8s.io/v1/namespaces/default/events",
                      lambda n: {"metadata": {"name": n}, "eventTime":
                                 "2024-01-02T03:04:05.000000Z"},
                      ["regarding", "note", "series", "deprecatedSource",
                       "deprecatedCount", "regarding.name", "eventTime"]),
    "leases": (LEASES, lambda n: {"metadata": {"name": n}, "spec": {"holderIdentity": "a"}},
               ["spec", "spec.holderIdentity", "spec.leaseDurationSeconds", "spec.renewTime",
                "spec.leaseTransitions"]),
    "customresourcedefinitions": (
        CRDS, _crd,
        ["spec", "status", "spec.names", "spec.versions", "spec.group",
         "spec.names.shortNames", "spec.versions.0", "spec.versions.0.schema",
         "spec.versions.0.subresources", "spec.versions.0.subresources.scale",
         "spec.versions.0.additionalPrinterColumns",
         "spec.versions.0.additionalPrinterColumns.0", "spec.versions.0.selectableFields",
         "spec.conversion", "spec.versions.0.schema.openAPIV3Schema",
         "spec.versions.0.schema.openAPIV3Schema.properties",
         "spec.versions.0.schema.openAPIV3Schema.properties.spec.items",
         "spec.versions.0.schema.openAPIV3Schema.properties.spec.additionalProperties",
         "spec.versions.0.schema.openAPIV3Schema.properties.spec.type"]),
    "widgets": ("/apis/example.com/v1/namespaces/default/widgets",
                lambda n: {"apiVersion": "example.com/v1", "kind": "Widget",
                           "metadata": {"name": n}, "spec": {"size": 1}},
                ["spec", "status", "spec.size"]),
}


def set_path(obj: Any, path: str, value: Any) -> Any:
    """``obj`` with ``value`` at the dotted ``path`` (numbers index lists); made on the way."""
    parts = path.split(".")
    node = obj
    for part, after in itertools.pairwise(parts):
        key: Any = int(part) if isinstance(node, list) else part
        if isinstance(node, list):
            while len(node) <= key:
                node.append({})
        child = node[key] if isinstance(node, list) else node.get(key)
        if not isinstance(child, dict | list):
            child = [] if after.isdigit() else {}
            node[key] = child
        node = child
    last: Any = parts[-1]
    if isinstance(node, list):
        last = int(last)
        while len(node) <= last:
            node.append({})
    node[last] = value
    return obj


@pytest.mark.parametrize("kind", list(KINDS))
async def test_wrong_types_in_every_field_never_answer_5xx(
        http: aiohttp.ClientSession, kind: str) -> None:
    path, make, kind_fields = KINDS[kind]
    if kind == "widgets":
        await install_widgets(http)
    existing = make("existing")
    status, created, _ = await request(http, "POST", path, existing)
    assert status == 201, created
    name = created["metadata"]["name"]
    header = {k: existing[k] for k in ("apiVersion", "kind") if k in existing}
    failures = []
    n = 0
    for field in kind_fields + META_FIELDS:
        for value in WRONG:
            n += 1
            new = set_path(make(f"p{n}"), field, value)
            replaced = set_path(copy.deepcopy(existing), field, value)
            if isinstance(replaced.get("metadata"), dict):
                replaced["metadata"]["name"] = name
            writes = [("POST", path, new, "application/json"),
                      ("PUT", f"{path}/{name}", replaced, "application/json"),
                      ("PUT", f"{path}/{name}/status", replaced, "application/json"),
                      ("PATCH", f"{path}/{name}", set_path({}, field, value), MERGE),
                      ("PATCH", f"{path}/{name}?fieldManager=f", set_path(
                          {**copy.deepcopy(header), "metadata": {"name": name}}, field, value),
                       APPLY)]
            if kind != "widgets" and kind != "customresourcedefinitions":
                writes.append(("PATCH", f"{path}/{name}", set_path({}, field, value),
                               STRATEGIC))
            for method, target, body, content_type in writes:
                status, reply, _ = await request(http, method, target, body,
                                                 content_type=content_type)
                if status >= 500 or (status >= 400 and reply.get("kind") != "Status"):
                    failures.append((method, content_type, field, value, status, reply))
                elif method == "POST" and status == 201:
                    await request(http, "DELETE", f"{path}/{reply['metadata']['name']}")
    assert not failures, failures[:3]
    status, _, _ = await request(http, "GET", "/readyz")
    assert status == 200
    status, _, _ = await request(http, "GET", f"{path}/{name}")
    assert status == 200


# --- secrets and binary data: Go's base64 ------------------------------------------------------

async def test_base64_with_line_breaks_is_accepted_and_answered_canonically(
        http: aiohttp.ClientSession) -> None:
    payload = bytes(range(256)) * 3
    wrapped = base64.encodebytes(payload).decode()  # 76 columns, a newline after each line
    assert "\n" in wrapped
    canonical = base64.b64encode(payload).decode()
    status, secret, _ = await request(http, "POST", SECRETS, {
        "metadata": {"name": "wrapped"}, "data": {"blob": wrapped, "crlf": "aGVs\r\nbG8=\r\n"}})
    assert status == 201, secret
    assert secret["data"] == {"blob": canonical, "crlf": "aGVsbG8="}
    status, config_map, _ = await request(http, "POST", CONFIGMAPS, {
        "metadata": {"name": "wrapped"}, "binaryData": {"blob": wrapped}})
    assert status == 201, config_map
    assert config_map["binaryData"] == {"blob": canonical}
    status, patched, _ = await request(http, "PATCH", f"{SECRETS}/wrapped",
                                       {"data": {"more": "aGk\n=\n"}}, content_type=MERGE)
    assert status == 200, patched
    assert patched["data"]["more"] == "aGk="
    _, stored, _ = await request(http, "GET", f"{SECRETS}/wrapped")
    assert stored["data"] == {"blob": canonical, "crlf": "aGVsbG8=", "more": "aGk="}


async def test_a_yaml_block_secret_is_accepted(http: aiohttp.ClientSession) -> None:
    text = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: block\ndata:\n  key: |\n"
            "    aGVsbG8gd29y\n    bGQ=\n")
    status, secret, _ = await request(http, "POST", SECRETS, raw=text.encode(),
                                      content_type="application/yaml")
    assert status == 201, secret
    assert secret["data"]["key"] == base64.b64encode(b"hello world").decode()


# --- DeleteOptions, continue tokens, query parameters ------------------------------------------

async def test_malformed_delete_options_are_400(http: aiohttp.ClientSession) -> None:
    status, _, _ = await request(http, "POST", CONFIGMAPS, {"metadata": {"name": "kept"}})
    assert status == 201
    cases = [
        ({"preconditions": "x"}, "json: cannot unmarshal string into Go struct field "
                                 "DeleteOptions.preconditions of type v1.Preconditions"),
        ({"preconditions": {"uid": 5}}, "json: cannot unmarshal number into Go struct field "
                                        "Preconditions.preconditions.uid of type types.UID"),
        ({"gracePeriodSeconds": 1.5}, "json: cannot unmarshal number 1.5 into Go struct field "
                                      "DeleteOptions.gracePeriodSeconds of type int64"),
        ({"propagationPolicy": 5}, "json: cannot unmarshal number into Go struct field "
                                   "DeleteOptions.propagationPolicy of type "
                                   "v1.DeletionPropagation"),
        ({"dryRun": "All"}, "json: cannot unmarshal string into Go struct field "
                            "DeleteOptions.dryRun of type []string"),
        ({"orphanDependents": "yes"}, "json: cannot unmarshal string into Go struct field "
                                      "DeleteOptions.orphanDependents of type bool"),
    ]
    for body, message in cases:
        for path in (f"{CONFIGMAPS}/kept", CONFIGMAPS):
            status, reply, _ = await request(http, "DELETE", path, body)
            assert (status, reply["message"]) == (400, message)
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/kept")
    assert status == 200


def token(data: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(data)).decode().rstrip("=")


async def test_forged_continue_tokens_are_400(http: aiohttp.ClientSession) -> None:
    for i in range(3):
        await request(http, "POST", CONFIGMAPS, {"metadata": {"name": f"c{i}"}})
    status, page, _ = await request(http, "GET", f"{CONFIGMAPS}?limit=1")
    assert status == 200
    genuine = page["metadata"]["continue"]
    start = orjson.loads(base64.urlsafe_b64decode(genuine + "=="))["start"]
    forged = [
        token({"v": "meta.k8s.io/v1", "rv": -5, "start": start}),
        token({"v": "meta.k8s.io/v1", "rv": 0, "start": start}),
        token({"v": "meta.k8s.io/v1", "rv": 1.5, "start": start}),
        token({"v": "meta.k8s.io/v1", "rv": True, "start": start}),
        token({"v": "meta.k8s.io/v1", "rv": "7", "start": start}),
        token({"v": "meta.k8s.io/v2", "rv": 5, "start": start}),
        token({"v": "meta.k8s.io/v1", "rv": 5, "start": 5}),
        token({"v": "meta.k8s.io/v1", "rv": 5, "start": "/registry/core/secrets/default/s"}),
        token({"v": "meta.k8s.io/v1", "rv": 5}),
        token([1, 2]), token("x"), "!!!", "a" * 3000,
    ]
    for value in forged:
        status, reply, _ = await request(http, "GET", f"{CONFIGMAPS}?limit=1&continue={value}")
        assert (status, reply["reason"]) == (400, "BadRequest"), (value, reply)
        assert reply["message"].startswith("continue key is not valid")
    status, page, _ = await request(http, "GET", f"{CONFIGMAPS}?limit=1&continue={genuine}")
    assert status == 200
    assert page["items"][0]["metadata"]["name"] == "c1"


@pytest.mark.parametrize("query", [
    "timeoutSeconds=1e400", "timeoutSeconds=99999999999999999999", "timeoutSeconds=1_0",
    "timeoutSeconds=%201", "limit=1e400", "limit=99999999999999999999", "limit=-1e3",
    "limit=" + "9" * 5000, "resourceVersion=%201", "resourceVersion=+1",
    "resourceVersion=-1", "resourceVersion=1e3", "resourceVersion=99999999999999999999999",
    "watch=maybe", "allowWatchBookmarks=2", "gracePeriodSeconds=NaN",
])
async def test_absurd_query_parameters_are_400(http: aiohttp.ClientSession, query: str) -> None:
    status, _, _ = await request(http, "POST", CONFIGMAPS, {"metadata": {"name": "q"}})
    assert status == 201
    method = "DELETE" if query.startswith("gracePeriodSeconds") else "GET"
    path = f"{CONFIGMAPS}/q" if method == "DELETE" else CONFIGMAPS
    watches = ("", "watch=1&") if method == "GET" and not query.startswith("watch") else ("",)
    for watch in watches:
        status, reply, _ = await request(http, method, f"{path}?{watch}{query}")
        assert (status, reply["reason"]) == (400, "BadRequest"), reply


async def test_a_write_that_does_not_name_its_object_is_400(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", CONFIGMAPS, {
        "metadata": {"name": "named"}, "data": {"k": "v"}})
    assert status == 201
    undeterminable = ("the name of the object (named based on URL) was undeterminable: name "
                      "must be provided")
    writes = [
        ("PUT", {"metadata": {}, "data": {"k": "replaced"}}, "application/json"),
        ("PUT", {"data": {"k": "replaced"}}, "application/json"),
        ("PUT", {"metadata": {"name": ""}, "data": {"k": "replaced"}}, "application/json"),
        ("PATCH", [{"op": "remove", "path": "/metadata/name"}], "application/json-patch+json"),
        ("PATCH", {"metadata": {"name": None}}, MERGE),
    ]
    for method, body, content_type in writes:
        status, reply, _ = await request(http, method, f"{CONFIGMAPS}/named", body,
                                         content_type=content_type)
        assert (status, reply["message"]) == (400, undeterminable), body
    status, reply, _ = await request(http, "PUT", f"{CONFIGMAPS}/named", {
        "metadata": {"name": "other"}, "data": {}})
    assert (status, reply["message"]) == (400, "the name of the object (other) does not "
                                               "match the name on the URL (named)")
    _, current, _ = await request(http, "GET", f"{CONFIGMAPS}/named")
    assert current["data"] == {"k": "v"}
    assert current["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_a_scale_put_without_a_name_is_400(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    widgets = "/apis/example.com/v1/namespaces/default/widgets"
    status, _, _ = await request(http, "POST", widgets, {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 1, "replicas": 2}})
    assert status == 201
    status, reply, _ = await request(http, "PUT", f"{widgets}/w/scale", {
        "apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": 5}})
    assert status == 400, reply
    _, current, _ = await request(http, "GET", f"{widgets}/w")
    assert current["spec"]["replicas"] == 2


async def test_unquoted_yaml_timestamps_decode_as_times(http: aiohttp.ClientSession) -> None:
    text = ("apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: yaml-times\n"
            "spec:\n  holderIdentity: me\n  acquireTime: 2024-01-02T03:04:05.123456Z\n"
            "  renewTime: 2024-01-02T05:04:05+02:00\n")
    status, lease, _ = await request(http, "POST", LEASES, raw=text.encode(),
                                     content_type="application/yaml")
    assert status == 201, lease
    assert lease["spec"]["acquireTime"] == "2024-01-02T03:04:05.123456Z"
    assert lease["spec"]["renewTime"] == "2024-01-02T05:04:05+02:00"
