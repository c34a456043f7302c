"""404s as kube-apiserver gives them: a missing object names itself in ``details`` (name,
group, kind = the resource); an unknown subresource of a custom resource does the same (its
handler answers that the object is not found); a path that names no resource under a built-in
API version is a bare NotFound, and under any other version the Status clients make of
kube-apiserver's plain-text ``404 page not found``."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from tests.integration.api.helpers import WIDGETS, install_widgets, request, widget

GENERIC = "the server could not find the requested resource"


@pytest.mark.parametrize(("path", "message", "details"), [
    ("/api/v1/namespaces/default/configmaps/nope", 'configmaps "nope" not found',
     {"name": "nope", "kind": "configmaps"}),
    ("/api/v1/namespaces/nope", 'namespaces "nope" not found',
     {"name": "nope", "kind": "namespaces"}),
    ("/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
     'leases.coordination.k8s.io "l" not found',
     {"name": "l", "group": "coordination.k8s.io", "kind": "leases"}),
    (WIDGETS + "/nope", 'widgets.example.com "nope" not found',
     {"name": "nope", "group": "example.com", "kind": "widgets"}),
    (WIDGETS + "/nope/status", 'widgets.example.com "nope" not found',
     {"name": "nope", "group": "example.com", "kind": "widgets"}),
    (WIDGETS + "/w/bogus", 'widgets.example.com "w" not found',
     {"name": "w", "group": "example.com", "kind": "widgets"}),
    ("/api/v1/namespaces/default/foos/bar", GENERIC, None),
    ("/api/v1/foos", GENERIC, None),
    ("/api/v1/namespaces/default/configmaps/c/bogus", GENERIC, None),
    ("/apis/example.com/v1/gadgets", GENERIC,
     {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}),
    ("/apis/nope.io/v1/things", GENERIC,
     {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}),
])
async def test_not_found(http: aiohttp.ClientSession, path: str, message: str,
                         details: dict[str, Any] | None) -> None:
    await install_widgets(http)
    assert (await request(http, "POST", WIDGETS, widget("w")))[0] == 201
    status, body, _ = await request(http, "GET", path)
    assert status == 404, body
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "NotFound", 404)
    assert body["message"] == message
    assert body.get("details") == details


async def test_status_bytes_are_kube_apiservers(http: aiohttp.ClientSession) -> None:
    # The kubernetes client's create_from_yaml reports "Error from server (Conflict): <body>"
    # and its own tests compare that text: the keys come in the Go struct's order (details
    # before code) and the body ends with the newline of Go's json.Encoder.
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dup"}}
    async with http.post("/api/v1/namespaces/default/configmaps", json=configmap) as first:
        assert first.status == 201
    async with http.post("/api/v1/namespaces/default/configmaps", json=configmap) as second:
        assert second.status == 409
        raw = await second.read()
    assert raw == (b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
                   b'"message":"configmaps \\"dup\\" already exists","reason":"AlreadyExists",'
                   b'"details":{"name":"dup","kind":"configmaps"},"code":409}\n')
