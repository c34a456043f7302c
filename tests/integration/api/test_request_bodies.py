"""Request bodies are read completely, however they arrive, up to 3 MiB; 413 beyond, 408 when
they stall. The bodies go through a real socket in pieces, so the server sees them arrive bit
by bit (with a Content-Length, and as chunks without one)."""

from __future__ import annotations

import gzip
from pathlib import Path

import aiohttp
import orjson
import pytest

from setpoint.server.limits import MAX_BODY_BYTES, Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api import rawhttp
from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def configmap(name: str, size: int) -> bytes:
    """A ConfigMap whose JSON body is ``size`` bytes long."""
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"blob": ""}}
    padding = size - len(orjson.dumps(body))
    assert padding > 0
    body["data"]["blob"] = "x" * padding
    raw = orjson.dumps(body)
    assert len(raw) == size
    return raw


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("size", [300_000, 1_000_000], ids=["300KB", "1MB"])
async def test_configmaps_arrive_whole(server: Server, http: aiohttp.ClientSession,
                                       size: int, chunked: bool) -> None:
    name = f"cm-{size}-{int(chunked)}"
    response = await rawhttp.request_in_pieces(server.url, "POST", CONFIGMAPS,
                                               configmap(name, size), chunked=chunked)
    assert response.status == 201, response.body[:300]
    status, stored, _ = await request(http, "GET", f"{CONFIGMAPS}/{name}")
    assert status == 200
    assert len(orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": name}, "data": stored["data"]})) == size


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_just_under_the_limit_is_read_and_decoded(
        server: Server, http: aiohttp.ClientSession, chunked: bool) -> None:
    """3 MiB minus a bit: the whole body is decoded (a cut one would be a 400). Kubernetes
    refuses ConfigMap data over 1 MiB with a 422 on ``data``; a server that stores it must
    give it back whole."""
    name = f"huge-{int(chunked)}"
    body = configmap(name, MAX_BODY_BYTES - 100)
    response = await rawhttp.request_in_pieces(server.url, "POST", CONFIGMAPS, body,
                                               chunked=chunked, pieces=24)
    if response.status == 422:
        status = response.json()
        assert status["details"]["causes"][0]["field"] in ("data", "[]")
        assert "must have at most 1048576 bytes" in status["message"]
        return
    assert response.status == 201, response.body[:300]
    status_code, stored, _ = await request(http, "GET", f"{CONFIGMAPS}/{name}")
    assert status_code == 200
    assert stored["data"] == orjson.loads(body)["data"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_over_the_limit_is_413(server: Server, http: aiohttp.ClientSession,
                                            chunked: bool) -> None:
    response = await rawhttp.request_in_pieces(
        server.url, "POST", CONFIGMAPS, configmap("over", MAX_BODY_BYTES + 1),
        chunked=chunked, pieces=4, pause=0)
    assert response.status == 413
    status = response.json()
    assert (status["reason"], status["code"]) == ("RequestEntityTooLarge", 413)
    assert status["message"] == "Request entity too large: limit is 3145728"
    status_code, _, _ = await request(http, "GET", f"{CONFIGMAPS}/over")
    assert status_code == 404


async def test_a_declared_length_over_the_limit_is_refused_before_reading(
        server: Server) -> None:
    conn = await rawhttp.Connection.open(server.url)
    try:
        await conn.send_head("POST", CONFIGMAPS, {"Content-Type": "application/json",
                                                  "Content-Length": str(10 * 1024 ** 3)})
        response = await conn.read_response()
        assert response.status == 413
        assert response.json()["reason"] == "RequestEntityTooLarge"
    finally:
        await conn.close()


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
async def test_updates_and_patches_arrive_whole(server: Server, http: aiohttp.ClientSession,
                                                method: str) -> None:
    status, created, _ = await request(http, "POST", CONFIGMAPS, orjson.loads(
        configmap("upd", 1000)))
    assert status == 201
    big = orjson.loads(configmap("upd", 600_000))
    if method == "PUT":
        big["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
        content_type = "application/json"
    else:
        big = {"data": big["data"]}
        content_type = "application/merge-patch+json"
    response = await rawhttp.request_in_pieces(server.url, method, f"{CONFIGMAPS}/upd",
                                               orjson.dumps(big), content_type=content_type)
    assert response.status == 200, response.body[:300]
    assert response.json()["data"] == big["data"]


async def test_delete_bodies_arrive_whole(server: Server, http: aiohttp.ClientSession) -> None:
    status, _, _ = await request(http, "POST", CONFIGMAPS, orjson.loads(configmap("d", 500)))
    assert status == 201
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background",
               "preconditions": {"resourceVersion": "0"}, "padding": "p" * 200_000}
    response = await rawhttp.request_in_pieces(server.url, "DELETE", f"{CONFIGMAPS}/d",
                                               orjson.dumps(options), chunked=True)
    # the precondition at the end of the body was read: a stale resourceVersion is a 409
    assert response.status == 409, response.body[:300]
    options["preconditions"] = {}
    response = await rawhttp.request_in_pieces(server.url, "DELETE", f"{CONFIGMAPS}/d",
                                               orjson.dumps(options))
    assert response.status == 200, response.body[:300]


async def test_a_stalled_body_is_408_and_the_connection_closed(tmp_path: Path) -> None:
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          limits=Limits(body_timeout=0.3))
    async with Server(config) as server:
        conn = await rawhttp.Connection.open(server.url)
        try:
            await conn.send_head("POST", CONFIGMAPS, {"Content-Type": "application/json",
                                                      "Content-Length": "100"})
            await conn.send(b'{"apiVersion": "v1", ')
            response = await conn.read_response()
            assert response.status == 408
            status = response.json()
            assert (status["kind"], status["reason"], status["code"]) == ("Status", "Timeout",
                                                                          408)
            assert await conn.closed_by_server()
        finally:
            await conn.close()
        async with aiohttp.ClientSession(base_url=server.url) as http:
            status_code, _, _ = await request(http, "GET", CONFIGMAPS)
            assert status_code == 200


async def test_a_compressed_body_is_not_expanded(server: Server,
                                                 http: aiohttp.ClientSession) -> None:
    """Kubernetes does not undo a request's Content-Encoding, and neither does the server: a
    body that expands 1,000-fold (here into a valid ConfigMap) is taken as the few KB of gzip
    it is, so no compressed body can grow past the body limit."""
    inflated = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"zipped"}'
                + b" " * (2 * 1024 * 1024) + b"}")
    bomb = gzip.compress(inflated, compresslevel=9)
    assert len(bomb) * 500 < len(inflated)
    for _ in range(10):
        status, body, _ = await request(http, "POST", CONFIGMAPS, raw=bomb,
                                        headers={"Content-Encoding": "gzip"})
        assert status == 400, body
        assert body["reason"] == "BadRequest"
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}/zipped")
    assert status == 404
