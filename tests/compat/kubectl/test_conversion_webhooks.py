"""A CRD with a conversion webhook through kubectl: a Gadget written as v1 (``spec.size: "3"``)
is read as v2 (``spec.replicas: 3``, the storage version) and back, tables included, by a
real HTTPS webhook on this machine; a webhook that is down fails the v1 read with Kubernetes'
message while v2 is still served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.webhookserver import WebhookServer, conversion_answer, webhook_server

pytestmark = pytest.mark.compat

GROUP = "kconv.example.com"


@pytest.fixture(scope="module")
def webhook() -> Iterator[WebhookServer]:
    with webhook_server({"/convert": conversion_answer}) as server:
        yield server


def _version(name: str, storage: bool, field: str, type_: str, column: str) -> dict[str, Any]:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {field: {"type": type_}}}}}},
            "additionalPrinterColumns": [{"name": column, "type": type_,
                                          "jsonPath": f".spec.{field}"}]}


def crd(plural: str, kind: str, url: str, ca_bundle: str) -> str:
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "conversion": {"strategy": "Webhook", "webhook": {
                     "clientConfig": {"url": url, "caBundle": ca_bundle},
                     "conversionReviewVersions": ["v1"]}},
                 "versions": [_version("v1", False, "size", "string", "Size"),
                              _version("v2", True, "replicas", "integer", "Replicas")]}})


def install(kubectl: Kubectl, plural: str, kind: str, url: str, ca_bundle: str) -> None:
    kubectl.run("apply", "-f", "-", input=crd(plural, kind, url, ca_bundle))
    kubectl.run("wait", "--for", "condition=established", f"crd/{plural}.{GROUP}")
    eventually(lambda: kubectl.run("get", f"{plural}.v2.{GROUP}").returncode == 0)


def test_kubectl_reads_and_writes_both_versions(kubectl: Kubectl,
                                                webhook: WebhookServer) -> None:
    install(kubectl, "gadgets", "Gadget", webhook.url("/convert"), webhook.ca_bundle)
    kubectl.run("apply", "-f", "-", input=json.dumps({
        "apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": "g1"},
        "spec": {"size": "3"}}))
    kubectl.run("create", "-f", "-", input=json.dumps({
        "apiVersion": f"{GROUP}/v2", "kind": "Gadget", "metadata": {"name": "g2"},
        "spec": {"replicas": 5}}))
    as_v2 = kubectl.json("get", f"gadgets.v2.{GROUP}", "g1")
    assert as_v2["apiVersion"] == f"{GROUP}/v2"
    assert as_v2["spec"] == {"replicas": 3}
    as_v1 = kubectl.json("get", f"gadgets.v1.{GROUP}")
    assert [(i["metadata"]["name"], i["spec"]) for i in as_v1["items"]] == [
        ("g1", {"size": "3"}), ("g2", {"size": "5"})]
    table_v1 = kubectl.run("get", f"gadgets.v1.{GROUP}").stdout.split()
    assert table_v1 == ["NAME", "SIZE", "g1", "3", "g2", "5"]
    table_v2 = kubectl.run("get", f"gadgets.v2.{GROUP}").stdout.split()
    assert table_v2 == ["NAME", "REPLICAS", "g1", "3", "g2", "5"]
    # a patch through v1 lands in v2
    kubectl.run("patch", f"gadgets.v1.{GROUP}", "g1", "--type", "merge", "-p",
                '{"spec": {"size": "9"}}')
    assert kubectl.json("get", f"gadgets.v2.{GROUP}", "g1")["spec"] == {"replicas": 9}


def test_a_webhook_that_is_down_fails_the_other_version_only(
        kubectl: Kubectl, webhook: WebhookServer) -> None:
    url = "https://127.0.0.1:1/convert"
    install(kubectl, "widgetsets", "WidgetSet", url, webhook.ca_bundle)
    kubectl.run("create", "-f", "-", input=json.dumps({
        "apiVersion": f"{GROUP}/v2", "kind": "WidgetSet", "metadata": {"name": "w"},
        "spec": {"replicas": 2}}))
    result = kubectl.run("get", f"widgetsets.v1.{GROUP}", "w", check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        f"Error from server (InternalError): Internal error occurred: conversion webhook for "
        f'{GROUP}/v2, Kind=WidgetSet failed: Post "{url}?timeout=30s": dial tcp '
        "127.0.0.1:1: connect: connection refused")
    assert kubectl.json("get", f"widgetsets.v2.{GROUP}", "w")["spec"] == {"replicas": 2}
