"""Legacy discovery as kopf reads it: CRDs themselves are listed, and a new CRD's resource is
in discovery by the time a watcher sees its ``Established`` condition."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from tests.integration.api.helpers import CRD_V1, request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def test_customresourcedefinitions_are_in_legacy_discovery(
        http: aiohttp.ClientSession) -> None:
    status, doc, _ = await request(http, "GET", "/apis/apiextensions.k8s.io/v1")
    assert status == 200
    crds = next(r for r in doc["resources"] if r["name"] == "customresourcedefinitions")
    assert crds["kind"] == "CustomResourceDefinition"
    assert crds["namespaced"] is False
    assert {"list", "watch"} <= set(crds["verbs"])
    assert "customresourcedefinitions/status" in [r["name"] for r in doc["resources"]]


async def test_discovery_is_updated_before_the_established_event(
        http: aiohttp.ClientSession) -> None:
    _, listed, _ = await request(http, "GET", CRDS)
    rv = listed["metadata"]["resourceVersion"]
    seen: list[dict[str, Any]] = []
    async with http.get(f"{CRDS}?watch=true&resourceVersion={rv}") as response:
        status, _, _ = await request(http, "POST", CRDS, CRD_V1)
        assert status == 201
        async with asyncio.timeout(5):
            while True:
                event = orjson.loads(await response.content.readline())
                conditions = {c["type"]: c["status"] for c in
                              (event["object"].get("status") or {}).get("conditions") or []}
                if conditions.get("Established") != "True":
                    continue
                # what kopf does on this event: rescan the group's discovery
                status, group_doc, _ = await request(http, "GET", "/apis/example.com/v1")
                seen.append(group_doc)
                break
    assert status == 200
    assert "widgets" in [r["name"] for r in seen[0]["resources"]]
    _, groups, _ = await request(http, "GET", "/apis")
    assert "example.com" in [g["name"] for g in groups["groups"]]
