"""Every answer of the server carries ``Cache-Control: no-cache, private`` unless it sets its
own, as kube-apiserver's answers do: successes, failures, refusals of unauthenticated
clients, watches, discovery and health; the UI's static files and OpenAPI v3 documents asked
for by their hash keep theirs."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from setpoint.server.app import CACHE_CONTROL
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.conftest import kubeconfig_ssl_context

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[tuple[Server, ssl.SSLContext]]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          kubeconfig_path=kubeconfig,
                          security=SecurityConfig(pki_dir=tmp_path / "pki"))
    async with Server(config) as server:
        admin = kubeconfig_ssl_context(kubeconfig)
        assert admin is not None
        yield server, admin


async def test_answers_say_no_cache_private(
        secured: tuple[Server, ssl.SSLContext], tmp_path: Path) -> None:
    server, admin = secured
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    async with aiohttp.ClientSession(
            base_url=server.url, connector=aiohttp.TCPConnector(ssl=admin)) as http:
        answers = []
        for method, path, body in (
                ("POST", CONFIGMAPS, configmap),  # 201
                ("GET", CONFIGMAPS + "/c", None),  # 200
                ("POST", CONFIGMAPS, configmap),  # 409
                ("GET", CONFIGMAPS + "/missing", None),  # 404
                ("PUT", "/version", None),  # 405
                ("GET", "/apis", None),
                ("GET", "/version", None),
                ("GET", "/readyz", None),
                ("GET", "/openapi/v2", None)):
            async with http.request(method, path, json=body) as response:
                await response.read()
                answers.append((method, path, response.status,
                                response.headers.get("Cache-Control")))
        assert [a[2] for a in answers] == [201, 200, 409, 404, 405, 200, 200, 200, 200]
        assert all(a[3] == CACHE_CONTROL for a in answers), answers

        # a watch's head, before any event
        async with http.get(CONFIGMAPS, params={"watch": "1", "resourceVersion": "0"}) as watch:
            assert watch.status == 200
            assert watch.headers["Cache-Control"] == CACHE_CONTROL

        # the UI's static files say their own
        async with http.get("/ui/app.js") as asset:
            assert asset.status == 200
            assert asset.headers["Cache-Control"] == "no-cache"

    # a client without credentials is refused, with the same header
    anonymous = ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))
    async with aiohttp.ClientSession(
            base_url=server.url, connector=aiohttp.TCPConnector(ssl=anonymous)) as http, \
            http.get(CONFIGMAPS, headers={"Authorization": "Bearer not-a-token"}) as refused:
        assert refused.status == 401
        assert refused.headers["Cache-Control"] == CACHE_CONTROL
