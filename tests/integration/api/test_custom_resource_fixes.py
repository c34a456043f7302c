"""Custom resources: pruning under a preserving root, selectable fields of a non-storage
version."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from tests.integration.api.helpers import request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def install(http: aiohttp.ClientSession, crd: dict[str, Any], path: str) -> None:
    status, body, _ = await request(http, "POST", CRDS, crd)
    assert status == 201, body
    for _ in range(200):
        status, _, _ = await request(http, "GET", path)
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} was not served")


def crd(plural: str, kind: str, versions: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
                     "versions": versions}}


# --- x-kubernetes-preserve-unknown-fields at the root ----------------------------------------

LOOSE = crd("looses", "Loose", [{
    "name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "inner": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "items": {"type": "array", "items": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}}}}}}])
LOOSES = "/apis/example.com/v1/namespaces/default/looses"


async def test_a_preserving_root_keeps_unknown_fields_only_at_the_root(
        http: aiohttp.ClientSession) -> None:
    await install(http, LOOSE, LOOSES)
    body = {"apiVersion": "example.com/v1", "kind": "Loose", "metadata": {"name": "a"},
            "extra": {"anything": [1, {"goes": True}]},
            "spec": {"size": 1, "junk": "x", "inner": {"kept": {"deep": 1}},
                     "items": [{"name": "i", "junk": 2}]}}
    status, created, headers = await request(http, "POST", LOOSES, body)
    assert status == 201, created
    assert created["extra"] == {"anything": [1, {"goes": True}]}
    assert created["spec"] == {"size": 1, "inner": {"kept": {"deep": 1}},
                               "items": [{"name": "i"}]}
    assert sorted(headers.getall("Warning", [])) == [
        '299 - "unknown field \\"spec.items[0].junk\\""',
        '299 - "unknown field \\"spec.junk\\""']
    status, strict, _ = await request(http, "POST", LOOSES + "?fieldValidation=Strict",
                                      {**body, "metadata": {"name": "b"}})
    assert status == 400
    assert 'unknown field "spec.junk"' in strict["message"]


# --- selectableFields of a version that is not the storage version ---------------------------


def _schema(default_tier: str | None) -> dict[str, Any]:
    tier: dict[str, Any] = {"type": "string"}
    if default_tier is not None:
        tier["default"] = default_tier
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"color": {"type": "string"},
                                         "size": {"type": "integer"}, "tier": tier}}}}}


MULTI = crd("paints", "Paint", [
    {"name": "v1", "served": True, "storage": True, "schema": _schema(None),
     "selectableFields": [{"jsonPath": ".spec.color"}]},
    {"name": "v1beta1", "served": True, "storage": False, "schema": _schema("gold"),
     "selectableFields": [{"jsonPath": ".spec.size"}, {"jsonPath": ".spec.tier"}]},
])
V1 = "/apis/example.com/v1/namespaces/default/paints"
V1BETA1 = "/apis/example.com/v1beta1/namespaces/default/paints"


def paint(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Paint", "metadata": {"name": name},
            "spec": spec}


async def names(http: aiohttp.ClientSession, path: str) -> list[str]:
    status, body, _ = await request(http, "GET", path)
    assert status == 200, body
    return sorted(item["metadata"]["name"] for item in body["items"])


async def test_a_selectable_field_of_a_non_storage_version_selects_in_that_version(
        http: aiohttp.ClientSession) -> None:
    await install(http, MULTI, V1BETA1)
    for obj in (paint("red3", color="red", size=3), paint("blue3", color="blue", size=3),
                paint("red5", color="red", size=5, tier="silver")):
        status, body, _ = await request(http, "POST", V1, obj)
        assert status == 201, body
    assert await names(http, f"{V1}?fieldSelector=spec.color%3Dred") == ["red3", "red5"]
    assert await names(http, f"{V1BETA1}?fieldSelector=spec.size%3D3") == ["blue3", "red3"]
    # the value as v1beta1 serves it: its default fills what v1 left out
    assert await names(http, f"{V1BETA1}?fieldSelector=spec.tier%3Dgold") == ["blue3", "red3"]
    assert await names(http, f"{V1BETA1}?fieldSelector=spec.tier%21%3Dgold") == ["red5"]
    # each version selects by its own fields only
    status, body, _ = await request(http, "GET", f"{V1}?fieldSelector=spec.size%3D3")
    assert status == 400, body
    status, body, _ = await request(http, "GET", f"{V1BETA1}?fieldSelector=spec.color%3Dred")
    assert status == 400, body


async def test_a_watch_in_a_non_storage_version_selects_in_that_version(
        http: aiohttp.ClientSession) -> None:
    await install(http, MULTI, V1BETA1)
    status, listed, _ = await request(http, "GET", V1BETA1)
    assert status == 200
    rv = listed["metadata"]["resourceVersion"]
    async with http.get(f"{V1BETA1}?watch=true&resourceVersion={rv}"
                        "&fieldSelector=spec.size%3D7") as response:
        assert response.status == 200
        for obj in (paint("other", size=1), paint("seven", size=7)):
            status, body, _ = await request(http, "POST", V1, obj)
            assert status == 201, body
        async with asyncio.timeout(10):
            event = orjson.loads(await response.content.readline())
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "seven"
    assert event["object"]["apiVersion"] == "example.com/v1beta1"
