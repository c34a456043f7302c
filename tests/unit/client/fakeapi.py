"""A scripted API server for client tests: real HTTP on port 0, no setpoint server code.

It serves discovery for ConfigMaps and Namespaces (core) and Widgets (``example.com/v1``),
records every request, and answers other paths from handlers a test registers with
:meth:`FakeAPI.route`; unregistered object and collection paths echo the request back as
JSON, and anything else is a 404 Status.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from setpoint.client import api
from setpoint.client import config as cfg

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def json_response(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status,
                        content_type="application/json")


def status_response(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason,
                            "code": code}
    if details:
        body["details"] = details
    return json_response(body, code)


DISCOVERY: dict[str, Any] = {
    "/version": {"major": "1", "minor": "32", "gitVersion": "v1.32.0"},
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "configmaps", "singularName": "configmap", "namespaced": True,
         "kind": "ConfigMap", "verbs": ["get", "list", "watch"], "shortNames": ["cm"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": False,
         "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]},
    ]},
    "/apis": {"kind": "APIGroupList", "groups": [
        {"name": "example.com",
         "versions": [{"groupVersion": "example.com/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}}]},
    "/apis/example.com/v1": {"kind": "APIResourceList", "groupVersion": "example.com/v1",
                             "resources": [
        {"name": "widgets", "singularName": "widget", "namespaced": True, "kind": "Widget",
         "verbs": ["get", "list", "watch", "patch"]},
        {"name": "widgets/status", "singularName": "", "namespaced": True, "kind": "Widget",
         "verbs": ["get", "patch", "update"]}]},
}


class FakeAPI:
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.routes: dict[tuple[str, str], Handler] = {}
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def requests_to(self, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.path == path]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append(Recorded(request.method, request.path, dict(request.query),
                                      dict(request.headers), body))
        handler = self.routes.get((request.method, request.path))
        if handler is not None:
            return await handler(request)
        if request.method == "GET" and request.path in DISCOVERY:
            return json_response(DISCOVERY[request.path])
        if _below_group_version(request.path):
            return json_response({"echo": request.method, "path": request.path,
                                  "body": orjson.loads(body) if body else None})
        return status_response(404, "NotFound",
                               "the server could not find the requested resource")


def _below_group_version(path: str) -> bool:
    """``/api/v1/...`` or ``/apis/g/v/...``: an object or collection path."""
    parts = path.strip("/").split("/")
    return (parts[0] == "api" and len(parts) > 2) or (parts[0] == "apis" and len(parts) > 3)


@contextlib.asynccontextmanager
async def serve(fake: FakeAPI, **overrides: Any) -> AsyncIterator[api.Client]:
    """The fake on a free port and a client for it (plain http)."""
    server = TestServer(fake.app)
    await server.start_server()
    try:
        config = cfg.ClientConfig(server=str(server.make_url("")), **overrides)
        async with api.Client(config) as client:
            yield client
    finally:
        await server.close()
