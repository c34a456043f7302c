"""Admission webhooks over the API, called over real HTTPS: configurations stored and
validated, mutation by JSONPatch, denial, failure policies with Kubernetes' messages, match
conditions, Services as targets, warnings, reinvocation."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget
from tests.webhookserver import Hang, WebhookServer, allow, patch_response, webhook_server

VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def hook(name: str, client: dict[str, Any], *, resources: tuple[str, ...] = ("configmaps",),
         group: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": client, "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "rules": [{"apiGroups": [group], "apiVersions": ["*"],
                       "operations": ["CREATE", "UPDATE"], "resources": list(resources)}],
            **extra}


def configuration(name: str, *hooks: dict[str, Any], mutating: bool = False
                  ) -> dict[str, Any]:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name}, "webhooks": list(hooks)}


def url_client(server: WebhookServer, path: str) -> dict[str, Any]:
    return {"url": server.url(path), "caBundle": server.ca_bundle}


async def install(http: aiohttp.ClientSession, config: dict[str, Any]) -> dict[str, Any]:
    path = MUTATING if config["kind"].startswith("Mutating") else VALIDATING
    status, body, _ = await request(http, "POST", path, config)
    assert status == 201, body
    return dict(body)


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with webhook_server({"/allow": allow}, hosts=("hooks.default.svc",)) as server:
        yield server


async def test_a_configuration_is_defaulted(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    body = await install(http, configuration(
        "defaults", hook("a.example.com", url_client(webhook, "/allow")), mutating=True))
    got = body["webhooks"][0]
    assert got["failurePolicy"] == "Fail"
    assert got["matchPolicy"] == "Equivalent"
    assert got["timeoutSeconds"] == 10
    assert got["reinvocationPolicy"] == "Never"
    assert got["namespaceSelector"] == {}
    assert got["objectSelector"] == {}
    assert got["rules"][0]["scope"] == "*"
    body = await install(http, configuration("svc", hook(
        "b.example.com", {"service": {"namespace": "default", "name": "hooks"}})))
    assert body["webhooks"][0]["clientConfig"]["service"]["port"] == 443
    assert "reinvocationPolicy" not in body["webhooks"][0]


async def test_null_members_of_a_webhook_are_defaulted_as_if_absent(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    # Go decodes ``null`` to a zero value: kopf writes ``objectSelector: null`` for a
    # handler without label filters, with a POST and again with a merge patch
    body = await install(http, configuration("nulls", hook(
        "a.example.com", url_client(webhook, "/allow"), objectSelector=None,
        namespaceSelector=None, matchPolicy=None, timeoutSeconds=None)))
    got = body["webhooks"][0]
    assert (got["objectSelector"], got["namespaceSelector"]) == ({}, {})
    assert (got["matchPolicy"], got["timeoutSeconds"]) == ("Equivalent", 10)
    status, body, _ = await request(
        http, "PATCH", f"{VALIDATING}/nulls",
        {"webhooks": [hook("b.example.com", url_client(webhook, "/allow"),
                           objectSelector=None, failurePolicy=None)]},
        content_type="application/merge-patch+json")
    assert status == 200, body
    got = body["webhooks"][0]
    assert (got["name"], got["objectSelector"], got["failurePolicy"]) == (
        "b.example.com", {}, "Fail")


async def test_a_review_leaves_out_empty_members_as_kubernetes_does(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    await install(http, configuration("all", hook(
        "all.example.com", url_client(webhook, "/allow"), resources=("widgets", "widgets/status"),
        group="example.com")))
    status, body, _ = await request(http, "POST", WIDGETS, widget("w"))
    assert status == 201, body
    status, body, _ = await request(http, "PATCH", f"{WIDGETS}/w/status",
                                    {"status": {"phase": "Up"}},
                                    content_type="application/merge-patch+json")
    assert status == 200, body
    create, status_update = (r["request"] for r in webhook.received)
    # ``subResource`` is ``json:",omitempty"``: a write to the object itself has none
    assert "subResource" not in create
    assert "requestSubResource" not in create
    assert (create["operation"], create["name"], create["namespace"]) == (
        "CREATE", "w", "default")
    assert (status_update["subResource"], status_update["requestSubResource"]) == (
        "status", "status")
    assert webhook.user_agents == ["kube-apiserver-admission"] * 2


async def test_an_invalid_configuration_is_refused_with_kubernetes_messages(
        http: aiohttp.ClientSession) -> None:
    bad = configuration("bad", {
        "name": "short", "clientConfig": {"url": "http://u:p@example.com/x?q=1#f"},
        "admissionReviewVersions": ["v1beta1"], "sideEffects": "Some",
        "timeoutSeconds": 31, "failurePolicy": "Maybe",
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                   "resources": ["pods"]}],
        "matchConditions": [{"name": "c", "expression": "object.x +"}]})
    status, body, _ = await request(http, "POST", VALIDATING, bad)
    assert status == 422, body
    causes = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    fields = {f for f, _ in causes}
    assert ("webhooks[0].name", 'Invalid value: "short": should be a domain with at least '
            "three segments separated by dots") in causes
    assert ("webhooks[0].timeoutSeconds", "Invalid value: 31: the timeout value must be "
            "between 1 and 30 seconds") in causes
    assert ("webhooks[0].sideEffects", 'Unsupported value: "Some": supported values: '
            '"None", "NoneOnDryRun"') in causes
    assert ("webhooks[0].clientConfig.url", "Invalid value: \"http\": 'https' is the only "
            "allowed URL scheme") in causes
    assert {"webhooks[0].admissionReviewVersions", "webhooks[0].failurePolicy",
            "webhooks[0].matchConditions[0].expression"} <= fields
    both = configuration("both", hook("a.b.c", {"url": "https://x.example.com",
                                                "service": {"namespace": "n", "name": "s"}}))
    status, body, _ = await request(http, "POST", VALIDATING, both)
    assert status == 422
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueRequired", "field": "webhooks[0].clientConfig",
        "message": "Required value: exactly one of url or service is required"}


async def test_a_mutating_webhook_adds_a_label(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/label"] = lambda review: patch_response(
        [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}],
        warnings=["labelled by the webhook"], auditAnnotations={"why": "test"})
    await install(http, configuration("labeller", hook(
        "label.example.com", url_client(webhook, "/label")), mutating=True))
    status, body, headers = await request(http, "POST", CONFIGMAPS, configmap("m", a="1"))
    assert status == 201, body
    assert body["metadata"]["labels"] == {"mutated": "yes"}
    assert headers.getall("Warning") == ['299 - "labelled by the webhook"']
    status, body, _ = await request(http, "GET", f"{CONFIGMAPS}/m")
    assert body["metadata"]["labels"] == {"mutated": "yes"}
    review = webhook.received[-1]
    assert review["apiVersion"] == "admission.k8s.io/v1"
    req = review["request"]
    assert req["operation"] == "CREATE"
    assert req["name"] == "m"
    assert req["namespace"] == "default"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert req["object"]["data"] == {"a": "1"}
    assert req["oldObject"] is None
    assert req["dryRun"] is False


async def test_a_validating_webhook_denies_with_its_message(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/deny"] = lambda review: {
        "allowed": "forbidden" not in review["request"]["object"].get("data", {}),
        "status": {"code": 403, "message": "no forbidden keys here", "reason": "Forbidden"}}
    await install(http, configuration("denier", hook(
        "deny.example.com", url_client(webhook, "/deny"))))
    status, body, _ = await request(http, "POST", CONFIGMAPS,
                                    configmap("bad", forbidden="1"))
    assert status == 403, body
    assert body["message"] == ('admission webhook "deny.example.com" denied the request: '
                               "no forbidden keys here")
    assert body["reason"] == "Forbidden"
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("good", fine="1"))
    assert status == 201, body
    # a dry run is sent too, marked as such
    status, body, _ = await request(http, "POST", CONFIGMAPS + "?dryRun=All",
                                    configmap("dry", fine="1"))
    assert status == 201
    assert webhook.received[-1]["request"]["dryRun"] is True


async def test_a_denial_without_code_is_400_without_explanation(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/no"] = lambda review: {"allowed": False}
    await install(http, configuration("no", hook("no.example.com", url_client(webhook, "/no"))))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("x"))
    assert status == 400
    assert body["message"] == 'admission webhook "no.example.com" denied the request ' \
                              "without explanation"


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
async def test_a_webhook_that_times_out_follows_its_failure_policy(
        webhook: WebhookServer, http: aiohttp.ClientSession, policy: str) -> None:
    webhook.handlers["/slow"] = lambda review: Hang()
    await install(http, configuration("slow", hook(
        "slow.example.com", url_client(webhook, "/slow"), timeoutSeconds=1,
        failurePolicy=policy)))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("t"))
    if policy == "Ignore":
        assert status == 201, body
        return
    assert status == 500, body
    text = (f'failed calling webhook "slow.example.com": failed to call webhook: Post '
            f'"{webhook.url("/slow")}?timeout=1s": context deadline exceeded')
    assert body["message"] == f"Internal error occurred: {text}"
    assert body["reason"] == "InternalError"
    assert body["details"]["causes"] == [{"message": text}]


async def test_an_unknown_certificate_authority_fails_the_call(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    other = base64.b64encode(WebhookServer({}).ca_bundle.encode()).decode()
    client = {"url": webhook.url("/allow"), "caBundle": base64.b64decode(other).decode()}
    await install(http, configuration("tls", hook("tls.example.com", client)))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("t"))
    assert status == 500
    assert body["message"].startswith(
        'Internal error occurred: failed calling webhook "tls.example.com": failed to call '
        f'webhook: Post "{webhook.url("/allow")}?timeout=10s": tls: failed to verify '
        "certificate")
    assert webhook.received == []


async def test_match_conditions_and_selectors_skip_the_webhook(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/no"] = lambda review: {"allowed": False}
    await install(http, configuration("skip", hook(
        "skip.example.com", url_client(webhook, "/no"),
        matchConditions=[{"name": "not-exempt",
                          "expression": "!('exempt' in object.data)"}],
        objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]})))
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("e", exempt="1"))
    assert status == 201
    labelled = configmap("l")
    labelled["metadata"]["labels"] = {"skip": "1"}
    status, _, _ = await request(http, "POST", CONFIGMAPS, labelled)
    assert status == 201
    assert webhook.received == []
    status, _, _ = await request(http, "POST", CONFIGMAPS, configmap("n"))
    assert status == 400
    assert len(webhook.received) == 1


async def test_a_service_backed_by_local_endpoints_is_called(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hooks"},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}}
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/services",
                                    service)
    assert status == 201, body
    endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hooks"},
                 "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                              "ports": [{"name": "https", "port": webhook.port}]}]}
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/endpoints",
                                    endpoints)
    assert status == 201, body
    webhook.handlers["/svc"] = lambda review: {"allowed": False,
                                               "status": {"message": "via the service"}}
    await install(http, configuration("svc", hook(
        "svc.example.com", {"service": {"namespace": "default", "name": "hooks",
                                        "path": "/svc"}, "caBundle": webhook.ca_bundle})))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("s"))
    assert status == 400, body
    assert body["message"].endswith("denied the request: via the service")
    await request(http, "DELETE", "/api/v1/namespaces/default/endpoints/hooks")
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("s2"))
    assert status == 500
    assert body["message"].endswith('failed to call webhook: no endpoints available for '
                                    'service "hooks"')


async def test_a_patch_the_schema_refuses_is_422(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    webhook.handlers["/size"] = lambda review: patch_response(
        [{"op": "replace", "path": "/spec/size", "value": "huge"}])
    await install(http, configuration("size", hook(
        "size.example.com", url_client(webhook, "/size"), resources=("widgets",),
        group="example.com"), mutating=True))
    status, body, _ = await request(http, "POST", WIDGETS, widget("w"))
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "spec.size"


async def test_if_needed_webhooks_are_called_again_after_a_later_change(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    def first(review: dict[str, Any]) -> dict[str, Any]:
        data = review["request"]["object"].get("data") or {}
        if "second" in data and "seen-second" not in data:
            return patch_response([{"op": "add", "path": "/data/seen-second", "value": "1"}])
        return {"allowed": True}

    webhook.handlers["/first"] = first
    webhook.handlers["/second"] = lambda review: patch_response(
        [{"op": "add", "path": "/data/second", "value": "1"}])
    await install(http, configuration("a-first", hook(
        "first.example.com", url_client(webhook, "/first"), reinvocationPolicy="IfNeeded"),
        mutating=True))
    await install(http, configuration("b-second", hook(
        "second.example.com", url_client(webhook, "/second")), mutating=True))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("r", a="1"))
    assert status == 201, body
    assert body["data"] == {"a": "1", "second": "1", "seen-second": "1"}
    paths = [r["request"]["object"]["data"] for r in webhook.received]
    assert len(paths) == 3


HOSTILE: dict[str, Any] = {
    "/huge": b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
             b'"response": {"allowed": true, "x": "' + b"a" * (4 * 1024 * 1024) + b'"}}',
    "/malformed": b'{"apiVersion": "admission.k8s.io/v1", "kind": ',
    "/wrong-uid": {"uid": "not-the-request", "allowed": True},
    "/not-a-review": b'{"kind": "Status", "apiVersion": "v1"}',
    "/bad-base64": {"allowed": True, "patchType": "JSONPatch", "patch": "%%%"},
}
BAD_PATCHES: dict[str, list[dict[str, Any]]] = {
    "/bad-path": [{"op": "replace", "path": "/no/such/place", "value": 1}],
    "/bad-op": [{"op": "explode", "path": "/data"}],
    "/failed-test": [{"op": "test", "path": "/data/a", "value": "other"}],
}


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_hostile_answers_are_internal_errors_or_ignored(
        webhook: WebhookServer, http: aiohttp.ClientSession, policy: str) -> None:
    for path, answer in HOSTILE.items():
        webhook.handlers[path] = lambda review, answer=answer: answer
    for path, operations in BAD_PATCHES.items():
        webhook.handlers[path] = lambda review, ops=operations: patch_response(ops)
    paths = [*HOSTILE, *BAD_PATCHES]
    for i, path in enumerate(paths):
        name = f"h{i}-{policy.lower()}"
        await install(http, configuration(name, hook(
            f"{path.strip('/')}.example.com", url_client(webhook, path),
            failurePolicy=policy, objectSelector={"matchLabels": {"hostile": path.strip("/")}}),
            mutating=True))
    for path in paths:
        cm = configmap(f"{path.strip('/')}-{policy.lower()}", a="1")
        cm["metadata"]["labels"] = {"hostile": path.strip("/")}
        status, body, _ = await request(http, "POST", CONFIGMAPS, cm)
        if path in BAD_PATCHES:
            # a patch that does not apply is an internal error whatever the policy
            assert status == 500, (path, body)
            assert body["reason"] == "InternalError"
            assert body["message"].startswith("Internal error occurred: "), body
        elif policy == "Ignore":
            assert status == 201, (path, body)
        else:
            assert status == 500, (path, body)
            assert body["reason"] == "InternalError"
            assert body["message"].startswith(
                f'Internal error occurred: failed calling webhook "{path.strip("/")}'
                '.example.com": '), body
    # the server still serves
    status, _, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200


async def test_a_patch_cannot_rename_the_object(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/rename"] = lambda review: patch_response([
        {"op": "replace", "path": "/metadata/name", "value": "renamed"},
        {"op": "add", "path": "/data/b", "value": "2"}])
    await install(http, configuration("rename", hook(
        "rename.example.com", url_client(webhook, "/rename")), mutating=True))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("original", a="1"))
    assert status == 201, body
    assert body["metadata"]["name"] == "original"
    assert body["data"] == {"a": "1", "b": "2"}
    status, body, _ = await request(http, "GET", f"{CONFIGMAPS}/original")
    assert status == 200
    assert body["data"] == {"a": "1", "b": "2"}
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/renamed")
    assert status == 404


async def test_a_patch_nesting_too_deep_is_invalid(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install_widgets(http)

    def nested(levels: int) -> Any:
        value: Any = "end"
        for _ in range(levels):
            value = {"x": value}
        return value

    webhook.handlers["/deep"] = lambda review: patch_response(
        [{"op": "add", "path": "/spec/deep", "value": nested(
            int(review["request"]["object"]["spec"]["size"]))}])
    await install(http, configuration("deep", hook(
        "deep.example.com", url_client(webhook, "/deep"), resources=("widgets",),
        group="example.com"), mutating=True))
    # deeper than an object may be once applied: refused as any such object is
    status, body, _ = await request(http, "POST", WIDGETS, widget("w", size=127))
    assert status == 422, body
    assert body["reason"] == "Invalid"
    # a patch deeper than any object may be is not a valid answer
    status, body, _ = await request(http, "POST", WIDGETS, widget("w", size=600))
    assert status == 500, body
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "deep.example.com": received '
        "invalid webhook response: response.patch nests deeper than 128 levels")
    status, body, _ = await request(http, "POST", WIDGETS, widget("w", size=3))
    assert status == 201, body
    # what the patch added is pruned as the schema says (the widgets' spec keeps no unknown
    # fields), as any write's would be
    assert "deep" not in body["spec"]


async def test_a_url_without_a_path_is_called_at_the_root(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/"] = lambda review: {"allowed": False,
                                            "status": {"message": "from the root"}}
    client = {"url": f"https://127.0.0.1:{webhook.port}", "caBundle": webhook.ca_bundle}
    await install(http, configuration("root", hook("root.example.com", client)))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("r"))
    assert status == 400, body
    assert body["message"] == ('admission webhook "root.example.com" denied the request: '
                               "from the root")
