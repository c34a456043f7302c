"""MutatingAdmissionPolicies over the API: storage and validation of both kinds and both
versions, JSON patches and apply configurations on ConfigMaps, Deployments and custom
resources, params, match conditions, failure policies, reinvocation, and hostile policies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget
from tests.webhookserver import WebhookServer, patch_response, webhook_server

GROUP = "/apis/admissionregistration.k8s.io"
POLICIES = f"{GROUP}/v1beta1/mutatingadmissionpolicies"
BINDINGS = f"{GROUP}/v1beta1/mutatingadmissionpolicybindings"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def mutation(expression: str, patch_type: str = "ApplyConfiguration") -> dict[str, Any]:
    holder = "applyConfiguration" if patch_type == "ApplyConfiguration" else "jsonPatch"
    return {"patchType": patch_type, holder: {"expression": expression}}


def policy(name: str, *mutations: dict[str, Any], resources: tuple[str, ...] = ("configmaps",),
           group: str = "", version: str = "v1beta1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"admissionregistration.k8s.io/{version}",
            "kind": "MutatingAdmissionPolicy", "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{
                "apiGroups": [group], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": list(resources)}]},
                "reinvocationPolicy": "Never", "mutations": list(mutations), **spec}}


def binding(name: str, policy_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1beta1",
            "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": name},
            "spec": {"policyName": policy_name, **spec}}


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": data}


async def install(http: aiohttp.ClientSession, *objects: dict[str, Any]) -> None:
    for obj in objects:
        version = obj["apiVersion"].rpartition("/")[2]
        path = f"{GROUP}/{version}/" + ("mutatingadmissionpolicies"
                                        if obj["kind"] == "MutatingAdmissionPolicy"
                                        else "mutatingadmissionpolicybindings")
        status, body, _ = await request(http, "POST", path, obj)
        assert status == 201, body


LABEL = mutation('Object{metadata: Object.metadata{labels: {"stamped": "yes"}}}')


async def test_both_versions_serve_one_stored_policy(http: aiohttp.ClientSession) -> None:
    await install(http, policy("p", LABEL, version="v1alpha1"))
    status, body, _ = await request(http, "GET", f"{POLICIES}/p")
    assert status == 200, body
    assert body["apiVersion"] == "admissionregistration.k8s.io/v1beta1"
    assert body["spec"]["failurePolicy"] == "Fail"
    assert body["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert body["spec"]["mutations"] == [LABEL]
    status, listed, _ = await request(
        http, "GET", f"{GROUP}/v1alpha1/mutatingadmissionpolicies")
    assert status == 200
    assert [i["metadata"]["name"] for i in listed["items"]] == ["p"]
    status, discovery, _ = await request(http, "GET", f"{GROUP}/v1alpha1")
    assert {r["name"] for r in discovery["resources"]} >= {
        "mutatingadmissionpolicies", "mutatingadmissionpolicybindings"}
    status, group, _ = await request(http, "GET", GROUP)
    assert group["preferredVersion"]["version"] == "v1"


async def test_validation_with_kubernetes_fields_and_messages(http: aiohttp.ClientSession
                                                             ) -> None:
    bad = policy("bad", mutation("object.data"), mutation("[1]", "JSONPatch"),
                 {"patchType": "Strategic"},
                 {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"},
                  "applyConfiguration": {"expression": "Object{}"}},
                 mutation('Object{spec: 1 +}'),
                 reinvocationPolicy="Sometimes", failurePolicy="Maybe")
    bad["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["DELETE"]
    status, body, _ = await request(http, "POST", POLICIES, bad)
    assert status == 422, body
    causes = {c["field"]: c["message"] for c in body["details"]["causes"]}
    assert causes["spec.mutations[0].applyConfiguration.expression"] == \
        'Invalid value: "object.data": must evaluate to Object'
    assert causes["spec.mutations[1].jsonPatch.expression"] == \
        'Invalid value: "[1]": must evaluate to list(JSONPatch)'
    assert causes["spec.mutations[2].patchType"].startswith('Unsupported value: "Strategic"')
    assert causes["spec.mutations[3].applyConfiguration"] == \
        "Forbidden: must not be specified when patchType is JSONPatch"
    assert "compilation failed" in causes["spec.mutations[4].applyConfiguration.expression"]
    assert causes["spec.reinvocationPolicy"].startswith('Unsupported value: "Sometimes"')
    assert causes["spec.failurePolicy"].startswith('Unsupported value: "Maybe"')
    assert causes["spec.matchConstraints.resourceRules[0].operations[0]"].startswith(
        'Unsupported value: "DELETE"')
    status, body, _ = await request(http, "POST", POLICIES, policy("none"))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.mutations"
    status, body, _ = await request(http, "POST", BINDINGS, binding("b", ""))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.policyName"


async def test_apply_configuration_and_json_patch_on_a_configmap(http: aiohttp.ClientSession
                                                                ) -> None:
    await install(http, policy(
        "defaults", LABEL,
        mutation('[JSONPatch{op: "add", path: "/metadata/labels/" + '
                 'jsonpatch.escapeKey("example.com/hue"), value: "blue"}]', "JSONPatch"),
        # a failed test leaves the object alone
        mutation('[JSONPatch{op: "test", path: "/data/a", value: "nope"}, '
                 'JSONPatch{op: "remove", path: "/data/a"}]', "JSONPatch")),
        binding("defaults", "defaults"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("one", a="1"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"stamped": "yes", "example.com/hue": "blue"}
    assert body["data"] == {"a": "1"}
    # an update is mutated too, and what the client sets elsewhere stays
    body["metadata"]["labels"] = {"other": "x"}
    body["data"] = {"b": "2"}
    status, body, _ = await request(http, "PUT", f"{CONFIGMAPS}/one", body)
    assert status == 200, body
    assert body["metadata"]["labels"] == {"other": "x", "stamped": "yes",
                                          "example.com/hue": "blue"}
    assert body["data"] == {"b": "2"}


async def test_apply_configuration_merges_containers_by_name(http: aiohttp.ClientSession
                                                            ) -> None:
    await install(http, policy(
        "sidecar", mutation(
            "Object{spec: Object.spec{replicas: 3, template: Object.spec.template{"
            "spec: Object.spec.template.spec{containers: [Object.spec.template.spec."
            "containers{name: 'sidecar', image: 'side:1'}]}}}}"),
        resources=("deployments",), group="apps"),
        binding("sidecar", "sidecar"))
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}}
    status, body, _ = await request(http, "POST", DEPLOYMENTS, deployment)
    assert status == 201, body
    assert body["spec"]["replicas"] == 3
    containers = body["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("app", "app:1"),
                                                             ("sidecar", "side:1")]
    # the store defaulted what the policy added, as it does what a client sends
    assert containers[1]["imagePullPolicy"] == "IfNotPresent"


async def test_custom_resource_with_params_and_match_conditions(http: aiohttp.ClientSession
                                                               ) -> None:
    await install_widgets(http)
    await request(http, "POST", CONFIGMAPS, configmap("sizes", default="4"))
    await install(http, policy(
        "widget-size", mutation(
            '[JSONPatch{op: "replace", path: "/spec/size", value: int(params.data["default"])}]',
            "JSONPatch"),
        resources=("widgets",), group="example.com",
        paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
        matchConditions=[{"name": "zero-only", "expression": "object.spec.size == 0"}]),
        binding("widget-size", "widget-size",
                paramRef={"name": "sizes", "namespace": "default",
                          "parameterNotFoundAction": "Deny"}))
    status, body, _ = await request(http, "POST", WIDGETS, widget("zero", size=0))
    assert status == 201, body
    assert body["spec"]["size"] == 4
    status, body, _ = await request(http, "POST", WIDGETS, widget("two", size=2))
    assert status == 201, body
    assert body["spec"]["size"] == 2
    # a param that is not there, with parameterNotFoundAction: Deny, refuses the write
    await request(http, "DELETE", f"{CONFIGMAPS}/sizes")
    status, body, _ = await request(http, "POST", WIDGETS, widget("other", size=0))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        "policy 'widget-size' with binding 'widget-size' denied request: no params found "
        "for policy binding with `Deny` parameterNotFoundAction")


async def test_failure_policy_governs_runtime_errors(http: aiohttp.ClientSession) -> None:
    failing = mutation('[JSONPatch{op: "add", path: "/data/x", value: object.data.missing}]',
                       "JSONPatch")
    await install(http, policy("strict", failing, LABEL, failurePolicy="Fail",
                               matchConditions=[{"name": "strict", "expression":
                                                 "object.metadata.name.startsWith('s')"}]),
                  binding("strict", "strict"),
                  policy("lenient", failing, LABEL, failurePolicy="Ignore",
                         matchConditions=[{"name": "lenient", "expression":
                                           "object.metadata.name.startsWith('l')"}]),
                  binding("lenient", "lenient"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("strong", a="1"))
    assert status == 403, body
    assert body["reason"] == "Invalid"
    assert body["message"].startswith(
        "policy 'strict' with binding 'strict' denied request: expression '")
    assert "no such key: missing" in body["message"]
    assert body["details"]["kind"] == "configmaps"
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/strong")
    assert status == 404
    # Ignore: the failing mutation is skipped, the others apply
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("loose", a="1"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"stamped": "yes"}
    assert "x" not in body["data"]


async def test_a_mutation_the_schema_refuses_is_refused(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await install(http, policy(
        "stringly", mutation('[JSONPatch{op: "replace", path: "/spec/size", value: "big"}]',
                             "JSONPatch"), resources=("widgets",), group="example.com"),
        binding("stringly", "stringly"))
    status, body, _ = await request(http, "POST", WIDGETS, widget("w", size=1))
    assert status == 422, body
    assert "spec.size" in body["message"]


async def test_reinvocation_if_needed(http: aiohttp.ClientSession) -> None:
    # "a-copy" runs first and copies label "b" when present; "b-set" runs after it and sets
    # label "b": only with IfNeeded does "a-copy" see it
    copy = mutation("has(object.metadata.labels) && 'b' in object.metadata.labels ? "
                    "Object{metadata: Object.metadata{labels: {'copy': "
                    "object.metadata.labels['b']}}} : Object{}")
    await install(http, policy("a-copy", copy, reinvocationPolicy="IfNeeded"),
                  binding("a-copy", "a-copy"),
                  policy("b-set", mutation(
                      "Object{metadata: Object.metadata{labels: {'b': 'seen'}}}")),
                  binding("b-set", "b-set"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("r"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"b": "seen", "copy": "seen"}


async def test_identity_and_atomic_structs_are_kept(http: aiohttp.ClientSession) -> None:
    await install(http, policy(
        "rename", mutation('[JSONPatch{op: "replace", path: "/metadata/name", '
                           'value: "other"}]', "JSONPatch")),
        binding("rename", "rename"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("named"))
    assert status == 201, body
    assert body["metadata"]["name"] == "named"


async def test_hostile_policies_get_4xx_or_their_failure_policy(http: aiohttp.ClientSession
                                                               ) -> None:
    # an expression costing more than the per-call limit
    costly = mutation("[JSONPatch{op: 'add', path: '/data/n', value: string("
                      "[1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, "
                      "[1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, "
                      "[1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, "
                      "a+b+c+d+e+f)))))).size())}]", "JSONPatch")
    # copies that would double the object 60 times
    doubling = mutation("[JSONPatch{op: 'add', path: '/data/x', value: 'abcdefgh'}] + "
                        "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,"
                        "26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,"
                        "48,49,50,51,52,53,54,55,56,57,58,59,60].map(i, JSONPatch{op: 'copy', "
                        "from: '/data', path: '/data/d' + string(i)})", "JSONPatch")
    deep = "Object{metadata: Object.metadata{labels: " + "{'a': " * 90 + "1" + "}" * 90 + "}}"
    await install(http, policy("costly", costly, matchConditions=[
        {"name": "c", "expression": "object.metadata.name == 'costly'"}]),
        binding("costly", "costly"),
        policy("doubling", doubling, matchConditions=[
            {"name": "d", "expression": "object.metadata.name == 'doubling'"}]),
        binding("doubling", "doubling"),
        policy("deep", mutation(deep), matchConditions=[
            {"name": "d", "expression": "object.metadata.name == 'deep'"}]),
        binding("deep", "deep"))
    for name, text in (("costly", "cost limit exceeded"), ("doubling", "bytes"),
                       ("deep", "must be a map of strings")):
        status, body, _ = await request(http, "POST", CONFIGMAPS, configmap(name, a="1"))
        assert 400 <= status < 500, (name, status, body)
        assert text in body["message"], body
    # the server keeps serving everyone else
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("fine"))
    assert status == 201
    # a struct of a type that is not declared, a huge construction: refused at creation
    status, body, _ = await request(http, "POST", POLICIES, policy(
        "unknown", mutation("Other{}")))
    assert status == 422
    assert "undeclared reference to 'Other'" in body["message"]
    huge = "Object{metadata: Object.metadata{labels: {" + ", ".join(
        f"'k{i}': 'v'" for i in range(20000)) + "}}}"
    status, body, _ = await request(http, "POST", POLICIES, policy("huge", mutation(huge)))
    assert status == 422
    assert "expression code point size exceeds limit" in body["message"]
    # a cheap expression that repeats a large value of the object is bounded by its size
    await install(http, policy("amplify", mutation(
        "[JSONPatch{op: 'add', path: '/data/copies', value: [" +
        ", ".join(["object.data.big"] * 8) + "]}]", "JSONPatch"), matchConditions=[
            {"name": "a", "expression": "object.metadata.name == 'amplify'"}]),
        binding("amplify", "amplify"))
    status, body, _ = await request(http, "POST", CONFIGMAPS,
                                    configmap("amplify", big="x" * 500_000))
    assert status == 403, body
    assert "larger than 3145728 bytes" in body["message"]


async def test_openapi_describes_both_versions_like_the_validating_kinds(
        http: aiohttp.ClientSession) -> None:
    documents = {}
    for version in ("v1", "v1alpha1", "v1beta1"):
        status, doc, _ = await request(
            http, "GET", f"/openapi/v3/apis/admissionregistration.k8s.io/{version}")
        assert status == 200, doc
        documents[version] = doc
    validating = documents["v1"]["components"]["schemas"]
    reference = next(v for n, v in validating.items()
                     if n.endswith("v1.ValidatingAdmissionPolicy"))
    for version in ("v1alpha1", "v1beta1"):
        schemas = documents[version]["components"]["schemas"]
        for kind in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"):
            name = next(n for n in schemas if n.endswith(f"{version}.{kind}"))
            assert schemas[name]["x-kubernetes-group-version-kind"] == [
                {"group": "admissionregistration.k8s.io", "version": version, "kind": kind}]
            assert set(schemas[name]) == set(reference)
        paths = documents[version]["paths"]
        assert f"/apis/admissionregistration.k8s.io/{version}/mutatingadmissionpolicies" \
            in paths


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    # requested before the server, so that it outlives the server's pooled connections
    with webhook_server({}) as server:
        yield server


async def test_policies_run_before_mutating_webhooks_and_again_if_needed(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    def label(review: dict[str, Any]) -> dict[str, Any]:
        labels = review["request"]["object"]["metadata"].get("labels") or {}
        # the webhook sees what the policy did, and adds a label of its own
        assert labels.get("stamped") == "yes", labels
        return patch_response([{"op": "add", "path": "/metadata/labels/hooked",
                                "value": "yes"}])

    copy = mutation("has(object.metadata.labels) && 'hooked' in object.metadata.labels ? "
                    "Object{metadata: Object.metadata{labels: {'copied': "
                    "object.metadata.labels['hooked']}}} : Object{}")
    webhook.handlers["/label"] = label
    await install(http, policy("stamp", LABEL, copy, reinvocationPolicy="IfNeeded"),
                  binding("stamp", "stamp"))
    status, body, _ = await request(
        http, "POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "MutatingWebhookConfiguration", "metadata": {"name": "hooked"},
         "webhooks": [{"name": "label.example.com", "sideEffects": "None",
                       "admissionReviewVersions": ["v1"],
                       "clientConfig": {"url": webhook.url("/label"),
                                        "caBundle": webhook.ca_bundle},
                       "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                  "operations": ["CREATE"],
                                  "resources": ["configmaps"]}]}]})
    assert status == 201, body
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("ordered"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"stamped": "yes", "hooked": "yes",
                                          "copied": "yes"}
    assert len(webhook.received) == 1


async def test_mutations_together_cannot_grow_an_object_past_the_stored_limit(
        http: aiohttp.ClientSession) -> None:
    # each mutation adds about 2.5 MB, within its own 3 MiB bound; three of them would make
    # a 7.5 MB object out of a 0.8 MB request
    grow = [mutation(f"[JSONPatch{{op: 'add', path: '/data/copy{i}', value: "
                     "object.data.big + object.data.big + object.data.big}]", "JSONPatch")
            for i in range(3)]
    await install(http, policy("grow", *grow, matchConditions=[
        {"name": "g", "expression": "object.metadata.name.startsWith('grow')"}]),
        binding("grow", "grow"))
    status, body, _ = await request(http, "POST", CONFIGMAPS,
                                    configmap("grow", big="x" * 800_000))
    assert status == 413, body
    assert body["reason"] == "RequestEntityTooLarge"
    assert "after admission; limit is 6291456" in body["message"]
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/grow")
    assert status == 404
    # within the limit the same policy applies
    status, body, _ = await request(http, "POST", CONFIGMAPS,
                                    configmap("grow-small", big="x" * 100_000))
    assert status == 201, body
    assert [len(body["data"][f"copy{i}"]) for i in range(3)] == [300_000] * 3


def doubling_copies(times: int) -> str:
    """A JSONPatch expression whose copies put the whole of ``/x`` at its own deepest point,
    doubling its depth each time."""
    ops = ['JSONPatch{op: "add", path: "/x", value: {"a": {}}}']
    ops += [f'JSONPatch{{op: "copy", from: "/x", path: "/x{"/a" * (2 ** k)}"}}'
            for k in range(times)]
    return "[" + ", ".join(ops) + "]"


async def test_copies_that_nest_the_object_too_deep_are_a_failed_mutation(
        http: aiohttp.ClientSession) -> None:
    await install(http, policy("doubling", mutation(doubling_copies(11), "JSONPatch"),
                               failurePolicy="Fail"),
                  binding("doubling", "doubling"))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("deep", a="1"))
    assert status == 403, body
    assert body["message"] == ("policy 'doubling' with binding 'doubling' denied request: "
                               "JSON Patch: the patched object nests deeper than 128 levels")
    status, _, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200
