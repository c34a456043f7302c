"""CRDs with several served versions: one storage version, conversion None, per-version schemas."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp

from tests.integration.api.helpers import request

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def version(name: str, *, storage: bool, schema: dict[str, Any],
            **extra: Any) -> dict[str, Any]:
    return {"name": name, "served": True, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": schema}}}, **extra}


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "tanks.water.example.com"},
    "spec": {"group": "water.example.com", "scope": "Namespaced",
             "names": {"plural": "tanks", "singular": "tank", "kind": "Tank"},
             "versions": [
                 version("v1", storage=True, deprecated=True,
                         deprecationWarning="water.example.com/v1 Tank is deprecated; use v2",
                         schema={"type": "object", "properties": {
                             "level": {"type": "integer", "maximum": 100},
                             "unit": {"type": "string", "default": "litre"}}}),
                 version("v2", storage=False,
                         schema={"type": "object", "required": ["level"], "properties": {
                             "level": {"type": "integer", "maximum": 1000},
                             "alarm": {"type": "boolean", "default": False}}}),
             ]},
}


def path(v: str) -> str:
    return f"/apis/water.example.com/{v}/namespaces/default/tanks"


async def install(http: aiohttp.ClientSession, crd: dict[str, Any]) -> None:
    status, body, _ = await request(http, "POST", CRDS, crd)
    assert status == 201, body
    for _ in range(100):
        if (await request(http, "GET", path("v2")))[0] == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not served")


async def test_each_version_has_its_schema_and_reads_convert(
        http: aiohttp.ClientSession) -> None:
    await install(http, copy.deepcopy(CRD))
    tank = {"apiVersion": "water.example.com/v2", "kind": "Tank", "metadata": {"name": "t1"},
            "spec": {"level": 500, "unit": "gallon"}}
    status, created, headers = await request(http, "POST", path("v2"), tank)
    assert status == 201, created
    # v2 pruned what it does not know, defaulted what it does, and validated with its bounds
    assert created["apiVersion"] == "water.example.com/v2"
    assert created["spec"] == {"level": 500, "alarm": False}
    assert "Warning" not in headers or "deprecated" not in headers["Warning"]
    # the same object through v1: apiVersion rewritten, v1's defaults applied on read
    status, as_v1, headers = await request(http, "GET", path("v1") + "/t1")
    assert status == 200
    assert as_v1["apiVersion"] == "water.example.com/v1"
    assert as_v1["spec"]["unit"] == "litre"
    assert as_v1["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert headers["Warning"] == '299 - "water.example.com/v1 Tank is deprecated; use v2"'
    # v1's own schema applies to writes through v1
    too_high = {"apiVersion": "water.example.com/v1", "kind": "Tank",
                "metadata": {"name": "t2"}, "spec": {"level": 500}}
    status, err, _ = await request(http, "POST", path("v1"), too_high)
    assert status == 422, err
    assert "spec.level: Invalid value: 500" in err["message"]
    # v2 requires level
    status, err, _ = await request(http, "POST", path("v2"), {
        "apiVersion": "water.example.com/v2", "kind": "Tank", "metadata": {"name": "t3"},
        "spec": {}})
    assert status == 422
    assert "spec.level: Required value" in err["message"]


async def test_stored_versions_follow_the_storage_version(http: aiohttp.ClientSession) -> None:
    await install(http, copy.deepcopy(CRD))
    crd_path = f"{CRDS}/tanks.water.example.com"
    _, crd, _ = await request(http, "GET", crd_path)
    assert crd["status"]["storedVersions"] == ["v1"]
    crd["spec"]["versions"][0]["storage"] = False
    crd["spec"]["versions"][1]["storage"] = True
    status, body, _ = await request(http, "PUT", crd_path, crd)
    assert status == 200, body
    for _ in range(100):
        _, crd, _ = await request(http, "GET", crd_path)
        if crd["status"]["storedVersions"] == ["v1", "v2"]:
            break
        await asyncio.sleep(0.02)
    assert crd["status"]["storedVersions"] == ["v1", "v2"]
