"""An operator's conversion as a Python function: ConversionWebhook serves it over HTTPS with
a certificate of its own CA and registers itself in the CRD; the server then reads and
writes both versions through it; a function that raises fails the read with its message."""

from __future__ import annotations

import base64
import ssl
from typing import Any

import aiohttp
import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client
from setpoint.runtime import ConversionWebhook
from tests.integration.runtime.conftest import eventually

GROUP = "fn.example.com"
GADGET_V1 = (f"{GROUP}/v1", "Gadget")
GADGET_V2 = (f"{GROUP}/v2", "Gadget")


def _version(name: str, storage: bool, field: str, type_: str) -> dict[str, Any]:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {field: {"type": type_}}}}}}}


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [_version("v1", False, "size", "string"),
                          _version("v2", True, "replicas", "integer")]},
}


def convert(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if desired.endswith("/v2") and "size" in spec:
        spec["replicas"] = int(spec.pop("size"))
    elif desired.endswith("/v1") and "replicas" in spec:
        spec["size"] = str(spec.pop("replicas"))
    return obj


async def install(client: Client) -> None:
    await client.create(CRD)

    async def served() -> bool:
        try:
            await client.list(GADGET_V2, namespace="default")
        except errors.NotFound:
            return False
        return True
    await eventually(served, what="gadgets served")


async def test_a_python_function_converts_both_ways(client: Client) -> None:
    await install(client)
    await client.create({"apiVersion": f"{GROUP}/v2", "kind": "Gadget",
                         "metadata": {"name": "probe", "namespace": "default"},
                         "spec": {"replicas": 1}})
    async with ConversionWebhook(convert) as hook:
        crd = await hook.register(client, f"gadgets.{GROUP}")
        assert crd["spec"]["conversion"]["strategy"] == "Webhook"
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == hook.url

        async def converted() -> bool:
            # the server serves the CRD anew once it has seen the change
            probe = await client.get(GADGET_V1, "probe", namespace="default")
            return bool(probe["spec"] == {"size": "1"})
        await eventually(converted, what="reads through the function")
        made = await client.create({"apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                                    "metadata": {"name": "g", "namespace": "default"},
                                    "spec": {"size": "3"}})
        assert made["spec"] == {"size": "3"}
        as_v2 = await client.get(GADGET_V2, "g", namespace="default")
        assert as_v2["spec"] == {"replicas": 3}
        await client.create({"apiVersion": f"{GROUP}/v2", "kind": "Gadget",
                             "metadata": {"name": "h", "namespace": "default"},
                             "spec": {"replicas": 7}})
        as_v1 = await client.get(GADGET_V1, "h", namespace="default")
        assert as_v1["apiVersion"] == f"{GROUP}/v1"
        assert as_v1["spec"] == {"size": "7"}


def _refuse(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    raise ValueError(f"cannot convert {obj['metadata']['name']}")


async def test_a_function_that_raises_fails_the_read_with_its_message(
        client: Client) -> None:
    await install(client)
    await client.create({"apiVersion": f"{GROUP}/v2", "kind": "Gadget",
                         "metadata": {"name": "g", "namespace": "default"},
                         "spec": {"replicas": 1}})
    async with ConversionWebhook(_refuse) as hook:
        await hook.register(client, f"gadgets.{GROUP}")

        async def refused() -> str | None:
            try:
                await client.get(GADGET_V1, "g", namespace="default")
            except errors.InternalError as e:
                return str(e)
            return None  # still served as None until the server sees the change
        message = await eventually(refused, what="the webhook's refusal")
        assert message == (f"Internal error occurred: conversion webhook for {GROUP}/v2, "
                           f"Kind=Gadget failed: ValueError: cannot convert g")
    # the storage version needs no conversion
    assert (await client.get(GADGET_V2, "g", namespace="default"))["spec"] == {"replicas": 1}


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"apiVersion": "x", "request": {}}'])
async def test_what_is_not_a_review_is_refused(body: bytes) -> None:
    async with ConversionWebhook(convert) as hook:
        context = ssl.create_default_context(cadata=base64.b64decode(hook.ca_bundle).decode())
        async with aiohttp.ClientSession() as http, http.post(
                hook.url, data=body, ssl=context) as resp:
            assert resp.status == 400
