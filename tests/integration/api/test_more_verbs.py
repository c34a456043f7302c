"""Deletecollection, cluster-scoped custom resources, exact-revision lists, field validation."""

from __future__ import annotations

import asyncio
import copy

import aiohttp

from tests.integration.api.helpers import CRD_V1, WIDGETS, install_widgets, request, widget


async def test_deletecollection_honours_selectors(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    for name, tier in [("a", "x"), ("b", "x"), ("c", "y")]:
        body = widget(name)
        body["metadata"]["labels"] = {"tier": tier}
        await request(http, "POST", WIDGETS, body)
    status, deleted, _ = await request(http, "DELETE", f"{WIDGETS}?labelSelector=tier%3Dx")
    assert status == 200, deleted
    assert deleted["kind"] == "WidgetList"
    assert sorted(i["metadata"]["name"] for i in deleted["items"]) == ["a", "b"]
    _, left, _ = await request(http, "GET", WIDGETS)
    assert [i["metadata"]["name"] for i in left["items"]] == ["c"]


async def test_cluster_scoped_custom_resources(http: aiohttp.ClientSession) -> None:
    crd = copy.deepcopy(CRD_V1)
    crd["metadata"]["name"] = "regions.example.com"
    crd["spec"]["scope"] = "Cluster"
    crd["spec"]["names"] = {"plural": "regions", "singular": "region", "kind": "Region"}
    status, _, _ = await request(http, "POST",
                                 "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201
    path = "/apis/example.com/v1/regions"
    for _ in range(100):
        status, _, _ = await request(http, "GET", path)
        if status == 200:
            break
        await asyncio.sleep(0.02)
    body = {"apiVersion": "example.com/v1", "kind": "Region", "metadata": {"name": "eu"},
            "spec": {"size": 3}}
    status, created, _ = await request(http, "POST", path, body)
    assert status == 201, created
    assert "namespace" not in created["metadata"]
    status, got, _ = await request(http, "GET", f"{path}/eu")
    assert status == 200
    assert got["spec"]["size"] == 3
    # a namespaced path does not address a cluster-scoped resource
    status, _, _ = await request(http, "GET", "/apis/example.com/v1/namespaces/default/regions")
    assert status == 404


async def test_list_at_an_exact_revision(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    _, first, _ = await request(http, "POST", WIDGETS, widget("e1"))
    rv = first["metadata"]["resourceVersion"]
    await request(http, "POST", WIDGETS, widget("e2"))
    await request(http, "DELETE", WIDGETS + "/e1")
    _, exact, _ = await request(
        http, "GET", f"{WIDGETS}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert [i["metadata"]["name"] for i in exact["items"]] == ["e1"]
    assert exact["metadata"]["resourceVersion"] == rv
    _, now, _ = await request(http, "GET", f"{WIDGETS}?resourceVersion={rv}")
    assert [i["metadata"]["name"] for i in now["items"]] == ["e2"]
    status, err, _ = await request(http, "GET", f"{WIDGETS}?resourceVersionMatch=Exact")
    assert status == 422, err


async def test_field_validation_warn_ignore_strict(http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    body = widget("fv", extra_top="x")
    body["spec"]["unknown"] = 1
    status, obj, headers = await request(http, "POST", WIDGETS, body)
    assert status == 201
    assert sorted(headers.getall("Warning")) == [
        '299 - "unknown field \\"extra_top\\""', '299 - "unknown field \\"spec.unknown\\""']
    assert "unknown" not in obj["spec"]
    assert "extra_top" not in obj
    body["metadata"]["name"] = "fv2"
    status, obj, headers = await request(http, "POST", WIDGETS + "?fieldValidation=Ignore",
                                         body)
    assert status == 201
    assert "Warning" not in headers
    body["metadata"]["name"] = "fv3"
    status, err, _ = await request(http, "POST", WIDGETS + "?fieldValidation=Strict", body)
    assert status == 400
    assert err["message"] == ('Widget in version "v1" cannot be handled as a Widget: strict '
                              'decoding error: unknown field "extra_top", unknown field '
                              '"spec.unknown"')
    status, err, _ = await request(http, "POST", WIDGETS + "?fieldValidation=Loose", body)
    assert status == 400
