"""/openapi/v2 and /openapi/v3 over HTTP: negotiation, validators, caching per generation,
the built-in kinds' published schemas and the custom resources' converted ones."""

from __future__ import annotations

import asyncio
import gzip
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.server.openapi import fragments
from setpoint.server.server import Server
from tests.integration.api.helpers import CRD_V1, install_widgets, request

PROTO = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
PROTO_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."


async def get(http: aiohttp.ClientSession, path: str, **headers: str
              ) -> tuple[int, bytes, Any]:
    async with http.get(path, headers=headers, allow_redirects=False) as r:
        return r.status, await r.read(), r.headers


async def v3(http: aiohttp.ClientSession, gv: str) -> Any:
    _, root, _ = await request(http, "GET", "/openapi/v3")
    status, doc, _ = await request(http, "GET", root["paths"][gv]["serverRelativeURL"])
    assert status == 200
    return doc


async def test_v2_is_served_as_json_and_as_protobuf_with_one_etag(
        http: aiohttp.ClientSession) -> None:
    status, body, headers = await get(http, "/openapi/v2")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    doc = orjson.loads(body)
    assert doc["swagger"] == "2.0"
    assert doc["info"]["version"].startswith("v1.32")
    configmap = doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]
    assert configmap["description"] == "ConfigMap holds configuration data for pods to consume."
    assert "Accept" in headers["Vary"]

    status, proto, proto_headers = await get(http, "/openapi/v2", Accept=PROTO)
    assert status == 200
    assert proto_headers["Content-Type"] == PROTO_ANSWER
    assert proto[:5] == b"\x0a\x032.0"  # field 1 (swagger), 3 bytes: "2.0"
    assert proto_headers["ETag"] == headers["ETag"]
    # the other spelling of the media type, and a q-valued list preferring protobuf
    for accept in (PROTO_ANSWER, f"application/json;q=0.5, {PROTO}"):
        status, again, _ = await get(http, "/openapi/v2", Accept=accept)
        assert status == 200
        assert again == proto


async def test_unacceptable_media_types_get_406_status(http: aiohttp.ClientSession) -> None:
    status, body, _ = await request(http, "GET", "/openapi/v2",
                                    headers={"Accept": "application/vnd.kubernetes.protobuf"})
    assert status == 406
    assert body["kind"] == "Status"
    assert body["reason"] == "NotAcceptable"
    status, _, _ = await request(http, "GET", "/openapi/v3", headers={"Accept": PROTO})
    assert status == 406


async def test_conditional_requests_get_304(http: aiohttp.ClientSession) -> None:
    _, _, headers = await get(http, "/openapi/v2", Accept=PROTO)
    etag = headers["ETag"]
    status, body, again = await get(http, "/openapi/v2", Accept=PROTO, **{"If-None-Match": etag})
    assert status == 304
    assert body == b""
    assert again["ETag"] == etag
    status, _, _ = await get(http, "/openapi/v2", **{"If-None-Match": '"other", ' + etag})
    assert status == 304
    status, _, _ = await get(http, "/openapi/v2", **{"If-None-Match": '"other"'})
    assert status == 200
    modified = parsedate_to_datetime(headers["Last-Modified"])
    status, _, _ = await get(http, "/openapi/v2",
                             **{"If-Modified-Since": format_datetime(modified, usegmt=True)})
    assert status == 304
    status, _, _ = await get(http, "/openapi/v2", **{"If-Modified-Since": "not a date"})
    assert status == 200


async def test_documents_are_compressed_for_clients_that_accept_gzip(server: Server) -> None:
    async with aiohttp.ClientSession(base_url=server.url, auto_decompress=False) as raw:
        status, body, headers = await get(raw, "/openapi/v2", Accept=PROTO,
                                          **{"Accept-Encoding": "gzip"})
        assert status == 200
        assert headers["Content-Encoding"] == "gzip"
        _, plain, plain_headers = await get(raw, "/openapi/v2", Accept=PROTO,
                                            **{"Accept-Encoding": "identity"})
        assert "Content-Encoding" not in plain_headers
        assert gzip.decompress(body) == plain
        _, _, refused = await get(raw, "/openapi/v2", **{"Accept-Encoding": "gzip;q=0"})
        assert "Content-Encoding" not in refused


async def test_built_once_per_generation_and_rebuilt_for_the_changed_crd_only(
        http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = fragments.of

    def counting(served: Any, data: Any) -> Any:
        built.append(served.info.qualified)
        return original(served, data)

    monkeypatch.setattr(fragments, "of", counting)
    _, first, headers = await get(http, "/openapi/v2", Accept=PROTO)
    _, root, _ = await request(http, "GET", "/openapi/v3")
    for _ in range(3):
        _, again, again_headers = await get(http, "/openapi/v2", Accept=PROTO)
        assert again == first
        assert again_headers["ETag"] == headers["ETag"]
    resources = len(built)
    assert resources == len(set(built))  # each resource once, whatever was asked for

    await install_widgets(http)
    _, after, after_headers = await get(http, "/openapi/v2", Accept=PROTO)
    assert after_headers["ETag"] != headers["ETag"]
    assert b"com.example.v1.Widget" in after
    assert built[resources:] == ["widgets.example.com"]
    _, new_root, _ = await request(http, "GET", "/openapi/v3")
    assert new_root["paths"]["api/v1"] == root["paths"]["api/v1"]  # unrelated hash kept
    assert "apis/example.com/v1" in new_root["paths"]

    status, body, _ = await request(http, "DELETE", f"{CRDS}/widgets.example.com")
    assert status == 200, body
    # no CRD cleanup controller runs here: let the CRD go as it would once its objects are gone
    status, body, _ = await request(http, "PATCH", f"{CRDS}/widgets.example.com",
                                    {"metadata": {"finalizers": None}},
                                    content_type="application/merge-patch+json")
    assert status == 200, body
    for _ in range(200):
        _, v2, _ = await request(http, "GET", "/openapi/v2")
        if "com.example.v1.Widget" not in v2["definitions"]:
            break
        await asyncio.sleep(0.02)
    assert "com.example.v1.Widget" not in v2["definitions"]
    assert not any(p.startswith("/apis/example.com/") for p in v2["paths"])


async def test_v3_urls_carry_content_hashes(http: aiohttp.ClientSession) -> None:
    _, root, _ = await request(http, "GET", "/openapi/v3")
    url = root["paths"]["api/v1"]["serverRelativeURL"]
    status, _, headers = await get(http, url)
    assert status == 200
    assert headers["Cache-Control"] == "public, immutable"
    assert headers["ETag"] == '"' + url.split("hash=")[1] + '"'
    status, _, headers = await get(http, "/openapi/v3/api/v1?hash=OUTDATED")
    assert status == 301
    assert headers["Location"] == url
    status, _, headers = await get(http, "/openapi/v3/api/v1")
    assert status == 200
    # what every answer without its own says (kube-apiserver's filter sets it first, and
    # only the handler of a hashed URL replaces it)
    assert headers["Cache-Control"] == "no-cache, private"
    for missing in ("/openapi/v3/apis/nothing.example.com/v1", "/openapi/v3/api",
                    "/openapi/v3/apis/a/b/c", "/openapi/v4"):
        status, body, _ = await request(http, "GET", missing)
        assert status == 404, missing
        assert body["kind"] == "Status"
    status, _, _ = await request(http, "POST", "/openapi/v2", {})
    assert status == 405


async def test_builtin_schemas_are_kubernetes_own(http: aiohttp.ClientSession) -> None:
    doc = await v3(http, "api/v1")
    schemas = doc["components"]["schemas"]
    configmap = schemas["io.k8s.api.core.v1.ConfigMap"]
    assert configmap["x-kubernetes-group-version-kind"] == [
        {"group": "", "kind": "ConfigMap", "version": "v1"}]
    assert configmap["properties"]["metadata"] == {
        "allOf": [{"$ref": f"#/components/schemas/{META}ObjectMeta"}],
        "description": "Standard object's metadata. More info: https://git.k8s.io/community/"
                       "contributors/devel/sig-architecture/api-conventions.md#metadata"}
    assert configmap["properties"]["data"]["description"].startswith(
        "Data contains the configuration data.")
    owners = schemas[f"{META}ObjectMeta"]["properties"]["ownerReferences"]
    assert owners["x-kubernetes-patch-merge-key"] == "uid"
    assert f"{META}ManagedFieldsEntry" in schemas

    item = doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]
    patch = item["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "", "kind": "ConfigMap", "version": "v1"}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert {p["name"] for p in patch["parameters"]} >= {"fieldValidation", "fieldManager",
                                                        "dryRun", "force"}
    assert item["parameters"][0]["name"] == "name"

    lease = (await v3(http, "apis/coordination.k8s.io/v1"))["components"]["schemas"]
    assert lease["io.k8s.api.coordination.v1.LeaseSpec"]["properties"]["holderIdentity"][
        "description"].startswith("holderIdentity contains the identity")

    crd_doc = await v3(http, "apis/apiextensions.k8s.io/v1")
    crd_patch = crd_doc["paths"][
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"]["patch"]
    # the server applies no strategic merge patch to CRDs: kubectl must not send one
    assert "application/strategic-merge-patch+json" not in crd_patch["requestBody"]["content"]
    version = crd_doc["components"]["schemas"][
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion"]
    assert "schema" in version["properties"]

    v1beta1 = await v3(http, "apis/apiextensions.k8s.io/v1beta1")  # not in the data: generic
    generic = v1beta1["components"]["schemas"][
        "io.k8s.apiextensions.v1beta1.CustomResourceDefinition"]
    assert generic["x-kubernetes-preserve-unknown-fields"] is True


SCHEMA: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [{"rule": "self.spec.size >= 0"}],
    "properties": {
        "spec": {"type": "object", "description": "What it should be.", "required": ["size"],
                 "properties": {
                     "size": {"type": "integer", "default": 1},
                     "quantity": {"x-kubernetes-int-or-string": True},
                     "note": {"type": "string", "nullable": True},
                     "choice": {"type": "string", "anyOf": [{"enum": ["a"]}, {"enum": ["b"]}]},
                     "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                  "properties": {"spec": {"type": "object"}}},
                     "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                              "properties": {"known": {"type": "string"}}},
                 }},
    },
}


async def test_custom_resource_schemas_as_apiextensions_publishes_them(
        http: aiohttp.ClientSession) -> None:
    body = orjson.loads(orjson.dumps(CRD_V1))
    version = body["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"] = SCHEMA
    version["selectableFields"] = [{"jsonPath": ".spec.note"}]
    version.pop("additionalPrinterColumns")
    version["subresources"]["scale"].pop("labelSelectorPath")
    await install_widgets_with(http, body)

    doc = await v3(http, "apis/example.com/v1")
    widget = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "kind": "Widget", "version": "v1"}]
    assert widget["x-kubernetes-selectable-fields"] == [{"fieldPath": "spec.note"}]
    assert widget["x-kubernetes-validations"] == [{"rule": "self.spec.size >= 0"}]
    spec = widget["properties"]["spec"]
    assert spec["properties"]["quantity"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert spec["properties"]["note"]["nullable"] is True
    assert spec["properties"]["size"]["default"] == 1
    template = spec["properties"]["template"]
    assert set(template["properties"]) == {"spec", "apiVersion", "kind", "metadata"}
    assert template["required"] == ["kind", "apiVersion"]
    assert set(widget["properties"]) == {"spec", "apiVersion", "kind", "metadata"}
    widget_list = doc["components"]["schemas"]["com.example.v1.WidgetList"]
    assert widget_list["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/com.example.v1.Widget"}
    assert f"{META}ObjectMeta" in doc["components"]["schemas"]
    assert f"{META}ListMeta" in doc["components"]["schemas"]
    scale = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale"]
    assert scale["get"]["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling", "kind": "Scale", "version": "v1"}
    assert "io.k8s.api.autoscaling.v1.Scale" in doc["components"]["schemas"]
    patch = doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
    assert set(patch["requestBody"]["content"]) == {
        "application/json-patch+json", "application/merge-patch+json",
        "application/apply-patch+yaml"}

    _, v2, _ = await request(http, "GET", "/openapi/v2")
    spec2 = v2["definitions"]["com.example.v1.Widget"]["properties"]["spec"]
    assert "default" not in spec2["properties"]["size"]  # defaults are pruned from v2
    assert spec2["properties"]["quantity"] == {"x-kubernetes-int-or-string": True}
    assert spec2["properties"]["note"] == {}  # nullable: any value
    assert "anyOf" not in spec2["properties"]["choice"]
    assert spec2["properties"]["free"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert v2["definitions"][f"{META}ObjectMeta"]["properties"]["finalizers"][
        "x-kubernetes-patch-strategy"] == "merge"
    parameter_refs = [p["$ref"] for p in v2["paths"][
        "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]["parameters"]
        if "$ref" in p]
    names = {v2["parameters"][ref.removeprefix("#/parameters/")]["name"]
             for ref in parameter_refs}
    assert "fieldValidation" in names


async def install_widgets_with(http: aiohttp.ClientSession, body: dict[str, Any]) -> None:
    status, created, _ = await request(http, "POST", CRDS, body)
    assert status == 201, created
    for _ in range(100):
        status, _, _ = await request(http, "GET", "/apis/example.com/v1/widgets")
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("widgets were not served")


async def test_a_preserve_unknown_fields_root_is_a_plain_object_in_v2(
        http: aiohttp.ClientSession) -> None:
    body = orjson.loads(orjson.dumps(CRD_V1))
    version = body["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"] = {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}},
                                "x-kubernetes-preserve-unknown-fields": True}}}
    version.pop("additionalPrinterColumns")
    version.pop("subresources")
    await install_widgets_with(http, body)
    _, v2, _ = await request(http, "GET", "/openapi/v2")
    assert v2["definitions"]["com.example.v1.Widget"] == {
        "type": "object", "x-kubernetes-group-version-kind": [
            {"group": "example.com", "kind": "Widget", "version": "v1"}]}
    doc = await v3(http, "apis/example.com/v1")
    assert "spec" in doc["components"]["schemas"]["com.example.v1.Widget"]["properties"]


async def test_head_and_an_empty_accept(http: aiohttp.ClientSession) -> None:
    async with http.head("/openapi/v2", headers={"Accept": PROTO}) as r:
        assert r.status == 200
        assert int(r.headers["Content-Length"]) > 1000
        assert await r.read() == b""
    status, body, headers = await get(http, "/openapi/v3", Accept="")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert "api/v1" in orjson.loads(body)["paths"]
