"""Request bodies must say they are JSON, YAML or (for built-in kinds) protobuf: anything else
is a 415 before the body is decoded. The requests a browser sends to any site without asking
it first (a form, a ``text/plain`` body, no credentials) write nothing."""

from __future__ import annotations

import re

import aiohttp
import orjson
import pytest

from setpoint.server.server import Server
from tests.integration.api import rawhttp
from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
UNSUPPORTED = ("the body of the request was in an unknown format - accepted media types "
               "include: application/json, application/yaml, "
               "application/vnd.kubernetes.protobuf")

#: what a web page can make a browser send to any origin without a CORS preflight
BROWSER_SIMPLE = [
    ("text/plain;charset=UTF-8", b'{"apiVersion":"v1","kind":"ConfigMap","metadata":'
                                 b'{"name":"csrf"},"data":{"a":"b"}}'),
    ("application/x-www-form-urlencoded",
     b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"csrf"},"x":"="}'),
    ("multipart/form-data; boundary=----x",
     b'------x\r\nContent-Disposition: form-data; name="a"\r\n\r\n{"apiVersion":"v1",'
     b'"kind":"ConfigMap","metadata":{"name":"csrf"}}\r\n------x--\r\n'),
]


def assert_415(status: int, body: dict[str, object], message: str = UNSUPPORTED) -> None:
    assert status == 415, body
    assert body["kind"] == "Status"
    assert body["reason"] == "UnsupportedMediaType"
    assert body["code"] == 415
    assert body["message"] == message


@pytest.mark.parametrize(("content_type", "raw"), BROWSER_SIMPLE,
                         ids=["text-plain", "form-urlencoded", "multipart"])
async def test_a_browser_simple_request_writes_nothing(server: Server,
                                                       http: aiohttp.ClientSession,
                                                       content_type: str, raw: bytes) -> None:
    headers = {"Origin": "https://example.net", "Referer": "https://example.net/page",
               "User-Agent": "Mozilla/5.0", "Accept": "*/*"}
    status, body, _ = await request(http, "POST", CONFIGMAPS, raw=raw,
                                    content_type=content_type, headers=headers)
    assert_415(status, body)
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/csrf")
    assert status == 404


@pytest.mark.parametrize("content_type", [
    "text/plain", "application/octet-stream", "application/x-yaml", "text/yaml",
    "application/merge-patch+json", "application/jsonx", "*/*"])
async def test_creates_and_updates_refuse_other_types(server: Server,
                                                      http: aiohttp.ClientSession,
                                                      content_type: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}
    status, answer, _ = await request(http, "POST", CONFIGMAPS, body,
                                      content_type=content_type)
    assert_415(status, answer)
    status, created, _ = await request(http, "POST", CONFIGMAPS, body)
    assert status == 201
    created["data"] = {"changed": "yes"}
    status, answer, _ = await request(http, "PUT", f"{CONFIGMAPS}/cm", created,
                                      content_type=content_type)
    assert_415(status, answer)
    _, current, _ = await request(http, "GET", f"{CONFIGMAPS}/cm")
    assert "data" not in current


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON",
    "application/yaml"])
async def test_json_and_yaml_are_accepted(server: Server, http: aiohttp.ClientSession,
                                          content_type: str) -> None:
    name = "ok-" + re.sub(r"[^a-z0-9]+", "-", content_type.lower()).strip("-")
    if "yaml" in content_type:
        raw = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n".encode()
    else:
        raw = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name}})
    status, body, _ = await request(http, "POST", CONFIGMAPS, raw=raw,
                                    content_type=content_type)
    assert status == 201, body


async def test_a_body_without_content_type_is_json(server: Server) -> None:
    """As kube-apiserver: no Content-Type means its first media type, JSON."""
    raw = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bare"}})
    response = await rawhttp.request_in_pieces(server.url, "POST", CONFIGMAPS, raw,
                                               content_type=None, pieces=1)
    assert response.status == 201, response.body
    response = await rawhttp.request_in_pieces(server.url, "POST", CONFIGMAPS, b"not json",
                                               content_type=None, pieces=1)
    assert response.status == 400
    assert response.json()["reason"] == "BadRequest"


async def test_custom_resources_are_not_taken_as_protobuf(server: Server,
                                                          http: aiohttp.ClientSession) -> None:
    await install_widgets(http)
    status, body, _ = await request(http, "POST", WIDGETS, widget("w"),
                                    content_type="application/vnd.kubernetes.protobuf")
    assert_415(status, body, "the body of the request was in an unknown format - accepted "
                             "media types include: application/json, application/yaml")
    status, body, _ = await request(http, "POST", WIDGETS, widget("w"),
                                    content_type="text/plain")
    assert_415(status, body, "the body of the request was in an unknown format - accepted "
                             "media types include: application/json, application/yaml")
    status, body, _ = await request(http, "POST", WIDGETS, widget("w"))
    assert status == 201, body


async def test_delete_options_are_checked_when_there_are_some(server: Server,
                                                               http: aiohttp.ClientSession
                                                               ) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "del"}}
    assert (await request(http, "POST", CONFIGMAPS, body))[0] == 201
    options = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1"})
    status, answer, _ = await request(http, "DELETE", f"{CONFIGMAPS}/del", raw=options,
                                      content_type="text/plain")
    assert_415(status, answer)
    assert (await request(http, "GET", f"{CONFIGMAPS}/del"))[0] == 200
    # an empty body needs no particular Content-Type, as in Kubernetes
    status, answer, _ = await request(http, "DELETE", f"{CONFIGMAPS}/del", raw=b"",
                                      content_type="text/plain")
    assert status == 200, answer


async def test_patches_take_only_patch_types(server: Server,
                                             http: aiohttp.ClientSession) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}
    assert (await request(http, "POST", CONFIGMAPS, body))[0] == 201
    for content_type in ("text/plain", "application/json", "application/x-www-form-urlencoded"):
        status, answer, _ = await request(http, "PATCH", f"{CONFIGMAPS}/p",
                                          {"data": {"a": "b"}}, content_type=content_type)
        assert status == 415, answer
        assert answer["reason"] == "UnsupportedMediaType"
    response = await rawhttp.request_in_pieces(server.url, "PATCH", f"{CONFIGMAPS}/p",
                                               b'{"data":{"a":"b"}}', content_type=None,
                                               pieces=1)
    assert response.status == 415
    _, current, _ = await request(http, "GET", f"{CONFIGMAPS}/p")
    assert "data" not in current
