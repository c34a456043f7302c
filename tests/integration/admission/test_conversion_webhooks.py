"""CRD conversion webhooks over real HTTPS: a Gadget kind whose v1 says ``spec.size: "3"``
and whose v2 (the storage version) says ``spec.replicas: 3``, converted both ways by a
webhook in the test; reads, lists, writes and watches in either version; failures and
malformed answers reported with Kubernetes' messages, without harm to other requests."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from setpoint.registry.conversion import ConversionConfig
from setpoint.server.server import Server
from tests.integration.api.helpers import request
from tests.webhookserver import (
    Hang,
    WebhookServer,
    allow,
    conversion_answer,
    gadget_conversion,
    patch_response,
    webhook_server,
)

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUP = "conv.example.com"


def _spec(**properties: Any) -> dict[str, Any]:
    return {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": properties}}}}


def gadget_crd(client: dict[str, Any], *, review_versions: tuple[str, ...] = ("v1",)
               ) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "conversion": {"strategy": "Webhook", "webhook": {
                "clientConfig": client, "conversionReviewVersions": list(review_versions)}},
            "versions": [
                {"name": "v1", "served": True, "storage": False,
                 "schema": _spec(size={"type": "string"})},
                {"name": "v2", "served": True, "storage": True,
                 "schema": _spec(replicas={"type": "integer"})},
            ]},
    }


def path(version: str, name: str = "") -> str:
    base = f"/apis/{GROUP}/{version}/namespaces/default/gadgets"
    return f"{base}/{name}" if name else base


def gadget(version: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{version}", "kind": "Gadget",
            "metadata": {"name": name}, "spec": spec}


async def install(http: aiohttp.ClientSession, crd: dict[str, Any]) -> None:
    status, body, _ = await request(http, "POST", CRDS, crd)
    assert status == 201, body
    for _ in range(200):
        if (await request(http, "GET", path("v2")))[0] == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("gadgets were not served")


def _labelled(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    out = gadget_conversion(obj, desired)
    out["metadata"]["labels"] = {**(out["metadata"].get("labels") or {}), "converted": "yes"}
    out["metadata"]["generation"] = 99  # not the webhook's to change: restored
    return out


def _with_extra(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    out = gadget_conversion(obj, desired)
    out["spec"]["extra"] = "unknown to both versions"
    out["undeclared"] = True
    return out


def _answer(review: dict[str, Any], **response: Any) -> bytes:
    return json.dumps({"apiVersion": review["apiVersion"], "kind": "ConversionReview",
                       "response": {"uid": review["request"]["uid"],
                                    "result": {"status": "Success"}, **response}}).encode()


def _renamed(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    out = gadget_conversion(obj, desired)
    out["metadata"]["name"] = "other"
    return out


def _bad_label(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    out = gadget_conversion(obj, desired)
    out["metadata"]["labels"] = {"bad key": "x"}
    return out


HANDLERS = {
    "/convert": conversion_answer,
    "/labels": lambda review: conversion_answer(review, _labelled),
    "/extra": lambda review: conversion_answer(review, _with_extra),
    "/hang": lambda review: Hang(),
    "/wrong-uid": lambda review: json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": "nope", "result": {"status": "Success"},
                     "convertedObjects": []}}).encode(),
    "/none": lambda review: _answer(review, convertedObjects=[]),
    "/rename": lambda review: conversion_answer(review, _renamed),
    "/unconverted": lambda review: _answer(
        review, convertedObjects=review["request"]["objects"]),
    "/refuse": lambda review: _answer(review, result={"status": "Failure",
                                                      "message": "cannot convert this"}),
    "/bad-label": lambda review: conversion_answer(review, _bad_label),
    "/not-a-review": lambda review: b'{"kind": "AdmissionReview"}',
    "/admit": allow,
    "/four": lambda review: patch_response(
        [{"op": "replace", "path": "/spec/replicas", "value": 4}]),
}


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with webhook_server(HANDLERS) as server:
        yield server


def client(webhook: WebhookServer, hook_path: str) -> dict[str, Any]:
    return {"url": webhook.url(hook_path), "caBundle": webhook.ca_bundle}


def reviews(webhook: WebhookServer, since: int, desired: str) -> list[dict[str, Any]]:
    return [r["request"] for r in webhook.received[since:]
            if r["request"]["desiredAPIVersion"] == f"{GROUP}/{desired}"]


async def test_create_in_v1_read_in_v2_and_back(webhook: WebhookServer,
                                                http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/convert")))
    status, created, _ = await request(http, "POST", path("v1"), gadget("v1", "g1", size="3"))
    assert status == 201, created
    assert created["apiVersion"] == f"{GROUP}/v1"
    assert created["spec"] == {"size": "3"}
    # stored in v2: the create went to the webhook on its way to storage
    assert any(r["objects"][0]["metadata"]["name"] == "g1"
               for r in reviews(webhook, 0, "v2"))
    status, as_v2, _ = await request(http, "GET", path("v2", "g1"))
    assert status == 200, as_v2
    assert as_v2["spec"] == {"replicas": 3}
    assert as_v2["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert as_v2["metadata"]["uid"] == created["metadata"]["uid"]

    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "g2", replicas=5))
    assert status == 201, body
    status, as_v1, _ = await request(http, "GET", path("v1", "g2"))
    assert status == 200, as_v1
    assert as_v1["apiVersion"] == f"{GROUP}/v1"
    assert as_v1["spec"] == {"size": "5"}

    # a list in v1: every object converted, in one review
    before = len(webhook.received)
    status, listed, _ = await request(http, "GET", path("v1"))
    assert status == 200, listed
    assert [(i["metadata"]["name"], i["spec"]) for i in listed["items"]] == [
        ("g1", {"size": "3"}), ("g2", {"size": "5"})]
    assert [len(r["objects"]) for r in reviews(webhook, before, "v1")] == [2]

    # writes through v1: a merge patch and an update, stored in v2
    status, patched, _ = await request(http, "PATCH", path("v1", "g1"),
                                       {"spec": {"size": "7"}},
                                       content_type="application/merge-patch+json")
    assert status == 200, patched
    assert patched["spec"] == {"size": "7"}
    patched["spec"]["size"] = "8"
    status, updated, _ = await request(http, "PUT", path("v1", "g1"), patched)
    assert status == 200, updated
    assert updated["spec"] == {"size": "8"}
    status, as_v2, _ = await request(http, "GET", path("v2", "g1"))
    assert as_v2["spec"] == {"replicas": 8}
    assert as_v2["metadata"]["generation"] == 3


async def test_metadata_comes_back_as_it_was_but_labels_from_the_webhook(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/labels")))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "g", replicas=2))
    assert status == 201, body
    status, as_v1, _ = await request(http, "GET", path("v1", "g"))
    assert status == 200, as_v1
    assert as_v1["metadata"]["labels"] == {"converted": "yes"}
    assert as_v1["metadata"]["generation"] == 1
    assert as_v1["spec"] == {"size": "2"}


async def test_a_v1beta1_review_when_the_crd_lists_only_it(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/convert"), review_versions=("v1beta1",)))
    status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "g", size="4"))
    assert status == 201, body
    assert body["spec"] == {"size": "4"}
    assert {r["apiVersion"] for r in webhook.received} == {"apiextensions.k8s.io/v1beta1"}


async def _watch_lines(http: aiohttp.ClientSession, version: str, resource_version: str,
                       count: int) -> list[dict[str, Any]]:
    """The first ``count`` lines of a watch (fewer when the stream ends first)."""
    lines: list[dict[str, Any]] = []
    async with http.get(path(version), params={
            "watch": "1", "resourceVersion": resource_version,
            "timeoutSeconds": "30"}) as resp:
        assert resp.status == 200
        while len(lines) < count:
            line = await resp.content.readline()
            if not line:
                break
            lines.append(json.loads(line))
    return lines


async def test_watches_in_the_non_storage_version_get_converted_events_once(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/convert")))
    status, listed, _ = await request(http, "GET", path("v1"))
    assert status == 200
    since = listed["metadata"]["resourceVersion"]
    watchers = [asyncio.create_task(_watch_lines(http, "v1", since, 2)) for _ in range(3)]
    v2_watch = asyncio.create_task(_watch_lines(http, "v2", since, 2))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "w", replicas=4))
    assert status == 201, body
    status, body, _ = await request(http, "PATCH", path("v2", "w"),
                                    {"spec": {"replicas": 6}},
                                    content_type="application/merge-patch+json")
    assert status == 200, body
    for events in await asyncio.gather(*watchers):
        assert [(e["type"], e["object"]["apiVersion"], e["object"]["spec"])
                for e in events] == [("ADDED", f"{GROUP}/v1", {"size": "4"}),
                                     ("MODIFIED", f"{GROUP}/v1", {"size": "6"})]
    assert [(e["type"], e["object"]["spec"]) for e in await v2_watch] == [
        ("ADDED", {"replicas": 4}), ("MODIFIED", {"replicas": 6})]
    # every watcher has both events: each (event, version) was converted once, for all
    to_v1 = reviews(webhook, 0, "v1")
    assert [len(r["objects"]) for r in to_v1] == [1, 1], to_v1


async def test_a_failing_webhook_ends_a_watch_with_an_error_event(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/refuse")))
    status, listed, _ = await request(http, "GET", path("v1"))
    since = listed["metadata"]["resourceVersion"]
    watcher = asyncio.create_task(_watch_lines(http, "v1", since, 5))
    v2_watch = asyncio.create_task(_watch_lines(http, "v2", since, 1))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "w", replicas=4))
    assert status == 201, body
    events = await watcher
    assert [e["type"] for e in events] == ["ERROR"]
    assert events[0]["object"]["code"] == 500
    assert events[0]["object"]["reason"] == "InternalError"
    assert events[0]["object"]["message"] == (
        f"Internal error occurred: conversion webhook for {GROUP}/v2, Kind=Gadget failed: "
        "cannot convert this")
    assert [e["type"] for e in await v2_watch] == ["ADDED"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_a_webhook_that_is_down_fails_only_what_needs_it(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    port = _closed_port()
    url = f"https://127.0.0.1:{port}/convert"
    await install(http, gadget_crd({"url": url, "caBundle": webhook.ca_bundle}))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "g", replicas=1))
    assert status == 201, body
    refused = (f'Post "{url}?timeout=30s": dial tcp 127.0.0.1:{port}: connect: '
               "connection refused")
    for target in (path("v1", "g"), path("v1")):
        status, err, _ = await request(http, "GET", target)
        assert status == 500, err
        assert err["reason"] == "InternalError"
        assert err["message"] == (f"Internal error occurred: conversion webhook for "
                                  f"{GROUP}/v2, Kind=Gadget failed: {refused}")
    status, err, _ = await request(http, "POST", path("v1"), gadget("v1", "h", size="1"))
    assert status == 500, err
    assert err["message"] == (f"Internal error occurred: conversion webhook for "
                              f"{GROUP}/v1, Kind=Gadget failed: {refused}")
    # the storage version needs no webhook; other resources are untouched
    status, body, _ = await request(http, "GET", path("v2", "g"))
    assert status == 200, body
    assert body["spec"] == {"replicas": 1}
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    assert status == 201, body


async def test_a_webhook_that_hangs_times_out_and_others_are_served(
        webhook: WebhookServer, server: Server, http: aiohttp.ClientSession) -> None:
    assert server.catalog is not None
    server.catalog.conversion_config = ConversionConfig(timeout=1.0)
    await install(http, gadget_crd(client(webhook, "/hang")))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "g", replicas=1))
    assert status == 201, body
    slow = asyncio.create_task(request(http, "GET", path("v1", "g")))
    # while the conversion waits, the storage version and other resources answer
    status, body, _ = await request(http, "GET", path("v2", "g"))
    assert status == 200, body
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/default/configmaps")
    assert status == 200
    status, err, _ = await slow
    assert status == 500, err
    assert err["message"] == (
        f"Internal error occurred: conversion webhook for {GROUP}/v2, Kind=Gadget failed: "
        f'Post "{webhook.url("/hang")}?timeout=1s": context deadline exceeded')


@pytest.mark.parametrize(("hook_path", "problem"), [
    ("/wrong-uid", 'failed: expected response.uid="{uid}", got "nope"'),
    ("/none", "returned 0 objects, expected 1"),
    ("/rename", "returned invalid converted object: must have the same name: g != other"),
    ("/unconverted", f"returned invalid converted object at index 0: invalid groupVersion "
                     f"(expected {GROUP}/v1, received {GROUP}/v2)"),
    ("/refuse", "failed: cannot convert this"),
    ("/bad-label", "returned invalid metadata in object at index 0: metadata.labels: "
                   'Invalid value: "bad key": name part must consist of alphanumeric '
                   "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                   "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                   "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
    ("/not-a-review", "failed: expected webhook response of apiextensions.k8s.io/v1, "
                      "Kind=ConversionReview, got , Kind=AdmissionReview"),
])
async def test_malformed_answers_are_refused_with_kubernetes_messages(
        webhook: WebhookServer, http: aiohttp.ClientSession, hook_path: str,
        problem: str) -> None:
    await install(http, gadget_crd(client(webhook, hook_path)))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "g", replicas=1))
    assert status == 201, body
    status, err, _ = await request(http, "GET", path("v1", "g"))
    assert status == 500, err
    uid = webhook.received[-1]["request"]["uid"]
    assert err["message"] == (f"Internal error occurred: conversion webhook for {GROUP}/v2, "
                              f"Kind=Gadget {problem.format(uid=uid)}")
    assert err["reason"] == "InternalError"


async def test_a_crd_conversion_is_validated_with_kubernetes_messages(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    crd = gadget_crd(client(webhook, "/convert"), review_versions=("v9",))
    status, err, _ = await request(http, "POST", CRDS, crd)
    assert status == 422, err
    assert err["message"] == (
        f'CustomResourceDefinition.apiextensions.k8s.io "gadgets.{GROUP}" is invalid: '
        'spec.conversion.conversionReviewVersions: Invalid value: "array": must '
        "include at least one of v1, v1beta1")
    crd["spec"]["conversion"] = {"strategy": "Webhook"}
    status, err, _ = await request(http, "POST", CRDS, crd)
    assert status == 422, err
    assert sorted((c["field"], c["message"]) for c in err["details"]["causes"]) == [
        ("spec.conversion.conversionReviewVersions", "Required value"),
        ("spec.conversion.webhookClientConfig",
         "Required value: required when strategy is set to Webhook")]
    crd["spec"]["conversion"] = {"strategy": "Magic"}
    status, err, _ = await request(http, "POST", CRDS, crd)
    assert status == 422, err
    assert err["details"]["causes"][0]["message"] == (
        'Unsupported value: "Magic": supported values: "None", "Webhook"')


async def test_objects_migrate_to_a_new_storage_version_when_written_again(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    crd = gadget_crd(client(webhook, "/convert"))
    crd["spec"]["versions"][0]["storage"] = True
    crd["spec"]["versions"][1]["storage"] = False
    status, body, _ = await request(http, "POST", CRDS, crd)
    assert status == 201, body
    for _ in range(200):
        if (await request(http, "GET", path("v1")))[0] == 200:
            break
        await asyncio.sleep(0.02)
    status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "m", size="2"))
    assert status == 201, body
    # v2 becomes the storage version
    status, current, _ = await request(http, "GET", f"{CRDS}/gadgets.{GROUP}")
    current["spec"]["versions"][0]["storage"] = False
    current["spec"]["versions"][1]["storage"] = True
    status, body, _ = await request(http, "PUT", f"{CRDS}/gadgets.{GROUP}", current)
    assert status == 200, body
    for _ in range(200):
        status, body, _ = await request(http, "GET", f"{CRDS}/gadgets.{GROUP}")
        if "v2" in body["status"]["storedVersions"]:
            break
        await asyncio.sleep(0.02)
    assert body["status"]["storedVersions"] == ["v1", "v2"]
    status, as_v2, _ = await request(http, "GET", path("v2", "m"))
    assert status == 200, as_v2
    # written back unchanged: stored again, now in v2 (a new resourceVersion)
    status, written, _ = await request(http, "PUT", path("v2", "m"), as_v2)
    assert status == 200, written
    assert written["metadata"]["resourceVersion"] != as_v2["metadata"]["resourceVersion"]
    assert written["spec"] == {"replicas": 2}
    before = len(webhook.received)
    status, again, _ = await request(http, "GET", path("v2", "m"))
    assert again["spec"] == {"replicas": 2}
    assert len(webhook.received) == before  # stored in v2: nothing to convert
    # and a second unchanged write is no write at all
    status, same, _ = await request(http, "PUT", path("v2", "m"), again)
    assert status == 200, same
    assert same["metadata"]["resourceVersion"] == again["metadata"]["resourceVersion"]


async def test_what_the_webhook_adds_outside_the_schema_is_pruned(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/extra")))
    status, created, _ = await request(http, "POST", path("v1"), gadget("v1", "g", size="3"))
    assert status == 201, created
    assert created["spec"] == {"size": "3"}
    assert "undeclared" not in created
    status, as_v2, _ = await request(http, "GET", path("v2", "g"))
    assert as_v2["spec"] == {"replicas": 3}  # stored pruned too


async def test_a_long_list_is_sent_in_bounded_reviews(
        webhook: WebhookServer, server: Server, http: aiohttp.ClientSession) -> None:
    assert server.catalog is not None
    server.catalog.conversion_config = ConversionConfig(max_objects_per_review=2)
    await install(http, gadget_crd(client(webhook, "/convert")))
    for i in range(5):
        status, body, _ = await request(http, "POST", path("v2"),
                                        gadget("v2", f"g{i}", replicas=i))
        assert status == 201, body
    before = len(webhook.received)
    status, listed, _ = await request(http, "GET", path("v1"))
    assert status == 200, listed
    assert [i["spec"] for i in listed["items"]] == [{"size": str(i)} for i in range(5)]
    assert [len(r["objects"]) for r in reviews(webhook, before, "v1")] == [2, 2, 1]


@pytest.fixture
def service_webhook() -> Iterator[WebhookServer]:
    """A webhook whose certificate names the Service ``converter`` (torn down after the
    server, whose client keeps connections to it)."""
    with webhook_server({"/convert": conversion_answer},
                        hosts=("converter.default.svc",)) as server:
        yield server


async def test_a_service_backed_by_local_endpoints_converts(
        service_webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    hook = service_webhook
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "converter"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 8443}]}})
    assert status == 201, body
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/endpoints", {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "converter"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                     "ports": [{"name": "https", "port": hook.port}]}]})
    assert status == 201, body
    await install(http, gadget_crd({
        "service": {"namespace": "default", "name": "converter", "path": "/convert"},
        "caBundle": hook.ca_bundle}))
    status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "g", size="6"))
    assert status == 201, body
    status, as_v2, _ = await request(http, "GET", path("v2", "g"))
    assert as_v2["spec"] == {"replicas": 6}
    await request(http, "DELETE", "/api/v1/namespaces/default/endpoints/converter")
    status, err, _ = await request(http, "GET", path("v1", "g"))
    assert status == 500, err
    assert err["message"] == (
        f"Internal error occurred: conversion webhook for {GROUP}/v2, Kind=Gadget failed: "
        'no endpoints available for service "converter"')


ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def _v2_rule(**extra: Any) -> dict[str, Any]:
    return {"apiGroups": [GROUP], "apiVersions": ["v2"], "operations": ["CREATE", "UPDATE"],
            "resources": ["gadgets"], **extra}


async def test_a_policy_matching_another_version_sees_the_object_the_webhook_converted(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    # v1 writes, a policy written against v2 (matchPolicy Equivalent): it sees spec.replicas
    await install(http, gadget_crd(client(webhook, "/convert")))
    for kind, plural, body in (
            ("ValidatingAdmissionPolicy", "validatingadmissionpolicies", {
                "matchConstraints": {"resourceRules": [_v2_rule()]},
                "validations": [{"expression": "has(object.spec.replicas) && "
                                               "object.spec.replicas <= 10",
                                 "message": "at most 10 replicas"}]}),
            ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", {
                "policyName": "few", "validationActions": ["Deny"]})):
        status, created, _ = await request(http, "POST", f"{ADMISSION}/{plural}", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "few"}, "spec": body})
        assert status == 201, created
    for _ in range(200):  # the policy is active once it refuses what it should
        status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "big", size="20"))
        if status == 422:
            break
        assert status == 201, body
        assert (await request(http, "DELETE", path("v1", "big")))[0] == 200
        await asyncio.sleep(0.05)
    assert status == 422, body
    assert body["message"].endswith("denied request: at most 10 replicas"), body
    status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "small", size="3"))
    assert status == 201, body


async def test_webhooks_matching_another_version_get_it_converted_and_patches_come_back(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/convert")))
    for plural, kind, hook_path in (
            ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", "/four"),
            ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", "/admit")):
        status, created, _ = await request(http, "POST", f"{ADMISSION}/{plural}", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "on-v2"}, "webhooks": [{
                "name": f"{hook_path[1:]}.conv.example.com",
                "clientConfig": client(webhook, hook_path), "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "rules": [_v2_rule()]}]})
        assert status == 201, created
    before = len(webhook.received)
    status, body, _ = await request(http, "POST", path("v1"), gadget("v1", "g", size="2"))
    assert status == 201, body
    # the mutating webhook's patch of the v2 object, converted back to v1 by the webhook
    assert body["spec"] == {"size": "4"}
    admitted = [r["request"] for r in webhook.received[before:] if r["kind"] == "AdmissionReview"]
    assert [(r["kind"]["version"], r["object"]["apiVersion"], r["object"]["spec"])
            for r in admitted] == [("v2", f"{GROUP}/v2", {"replicas": 2}),
                                   ("v2", f"{GROUP}/v2", {"replicas": 4})]
    assert all(r["requestKind"]["version"] == "v1" for r in admitted)
    status, as_v2, _ = await request(http, "GET", path("v2", "g"))
    assert as_v2["spec"] == {"replicas": 4}


async def test_a_policys_params_of_a_webhook_converted_kind_are_read_in_the_version_named(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    await install(http, gadget_crd(client(webhook, "/convert")))
    status, body, _ = await request(http, "POST", path("v2"), gadget("v2", "limits", replicas=2))
    assert status == 201, body
    for kind, plural, spec in (
            ("ValidatingAdmissionPolicy", "validatingadmissionpolicies", {
                "paramKind": {"apiVersion": f"{GROUP}/v1", "kind": "Gadget"},
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps"]}]},
                "validations": [{"expression": "size(object.data) <= int(params.spec.size)",
                                 "messageExpression": "'at most ' + params.spec.size"}]}),
            ("ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", {
                "policyName": "sized", "validationActions": ["Deny"],
                "paramRef": {"name": "limits", "namespace": "default",
                             "parameterNotFoundAction": "Deny"}})):
        status, created, _ = await request(http, "POST", f"{ADMISSION}/{plural}", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "sized"}, "spec": spec})
        assert status == 201, created
    configmaps = "/api/v1/namespaces/default/configmaps"
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
           "data": {"a": "1", "b": "2", "c": "3"}}
    for _ in range(200):
        status, body, _ = await request(http, "POST", configmaps, big)
        if status == 422:
            break
        assert status == 201, body
        assert (await request(http, "DELETE", f"{configmaps}/big"))[0] == 200
        await asyncio.sleep(0.05)
    assert status == 422, body
    assert body["message"].endswith("denied request: at most 2"), body
    status, body, _ = await request(http, "POST", configmaps, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok"}, "data": {"a": "1"}})
    assert status == 201, body
