"""``accept=`` on ``Client.request`` and ``Client.watch``: the header sent, the default kept."""

from __future__ import annotations

import orjson
from aiohttp import web

from tests.unit.client.fakeapi import FakeAPI, json_response, serve

PATH = "/api/v1/namespaces/default/configmaps"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


async def test_request_sends_the_accept_given_and_json_by_default() -> None:
    fake = FakeAPI()

    async def handler(request: web.Request) -> web.Response:
        return json_response({"kind": "PartialObjectMetadataList", "items": [],
                              "accept": request.headers["Accept"]})

    fake.route("GET", PATH, handler)
    async with serve(fake) as client:
        partial = await client.request("GET", PATH, accept=PARTIAL_LIST)
        plain = await client.request("GET", PATH)
    assert partial["accept"] == PARTIAL_LIST
    assert plain["accept"] == "application/json"
    assert [r.headers["Accept"] for r in fake.requests_to(PATH)] == [PARTIAL_LIST,
                                                                     "application/json"]


async def test_watch_sends_the_accept_given_and_json_by_default() -> None:
    fake = FakeAPI()

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "application/json"
        await response.prepare(request)
        partial = request.headers["Accept"] == PARTIAL
        obj = {"metadata": {"name": "a", "resourceVersion": "7"}}
        if partial:
            obj.update(kind="PartialObjectMetadata", apiVersion="meta.k8s.io/v1")
        await response.write(orjson.dumps({"type": "ADDED", "object": obj}) + b"\n")
        await response.write_eof()
        return response

    fake.route("GET", PATH, stream)
    async with serve(fake) as client:
        async with client.watch(("v1", "ConfigMap"), accept=PARTIAL) as events:
            partial = [e.object async for e in events]
        async with client.watch(("v1", "ConfigMap")) as events:
            plain = [e.object async for e in events]
    assert [r.headers["Accept"] for r in fake.requests_to(PATH)] == [PARTIAL,
                                                                     "application/json"]
    assert partial[0]["kind"] == "PartialObjectMetadata"  # kept as the server sent it
    assert plain[0]["kind"] == "ConfigMap"  # filled in from the watched resource
