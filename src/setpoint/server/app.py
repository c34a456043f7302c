"""The aiohttp application: one catch-all route that dispatches by path.

Resource paths go to :class:`~setpoint.server.handlers.ResourceHandler`; everything else is
discovery, OpenAPI or health. Every failure leaves as a ``metav1.Status`` (the middleware is
the single mapping point); storage that cannot be reached is a 503 with ``Retry-After`` (the
client retries; the server itself recovers once storage is back), and an unexpected exception
is logged and answered with a 500 Status, never a dropped connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock
from setpoint.registry import cache as wc
from setpoint.registry import listbudget
from setpoint.registry.catalog import Catalog
from setpoint.server import discovery, limits, negotiation, request_info, responses
from setpoint.server.handlers import ResourceHandler
from setpoint.server.openapi import builtins as openapi_data
from setpoint.server.openapi import documents as openapi_documents
from setpoint.server.openapi.handler import OpenAPIHandler
from setpoint.server.watch import WatchConfig
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(slots=True)
class AppState:
    catalog: Catalog
    cache: wc.WatchCache
    clock: Clock
    watch: WatchConfig
    limits: limits.Limits = field(default_factory=limits.Limits)
    git_version: str = "v1.32.0-setpoint"
    ready: bool = False
    lists: listbudget.ListBudget = field(default_factory=listbudget.ListBudget)
    #: None while storage can acknowledge writes, else why not (``/readyz`` says 503)
    storage_health: Callable[[], str | None] = lambda: None


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except limits.BodyTimeout as e:
        return await _answer_and_close(request, responses.error_response(e))
    except errors.ApiError as e:
        return responses.error_response(e)
    except web.HTTPException:
        raise
    except st.Unavailable as e:
        return responses.error_response(errors.ServiceUnavailable(
            f"storage is unavailable: {e}", retry_after=1))
    except (ConnectionResetError, TimeoutError) as e:
        if isinstance(e, TimeoutError):
            return responses.error_response(errors.Timeout("the request timed out",
                                                           retry_after=1))
        raise
    except Exception:
        log.exception("internal error serving %s %s", request.method, request.path)
        return responses.error_response(errors.InternalError(
            "an internal error occurred while serving the request"))


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response`` now and close the connection: its client stalled in the middle of a
    body, so nothing more will be read from it."""
    response.force_close()
    await response.prepare(request)
    await response.write_eof()
    if request.transport is not None:
        request.transport.close()  # flushes the response first
    return response


def build_app(state: AppState) -> web.Application:
    app = web.Application(middlewares=[status_errors],
                          client_max_size=negotiation.MAX_BODY + 1024)
    resources = ResourceHandler(state.catalog, state.clock, state.watch, state.lists,
                                state.limits)
    openapi = OpenAPIHandler(openapi_documents.Documents(
        state.catalog, openapi_data.Definitions.load(), clock=state.clock,
        version=state.git_version.split("-", 1)[0]), state.clock)

    async def dispatch(request: web.Request) -> web.StreamResponse:
        path = request.path
        ri = request_info.parse(path)
        if ri is not None:
            return await resources.handle(request, ri)
        if request.method not in ("GET", "HEAD"):
            if path.rstrip("/") in ("", "/version", "/api", "/apis", "/healthz", "/livez",
                                    "/readyz") or path.startswith("/openapi"):
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource")
            raise errors.path_not_found()
        if path == "/openapi" or path.startswith("/openapi/"):
            return await openapi.handle(request)
        return non_resource(request, state)

    app.router.add_route("*", "/{tail:.*}", dispatch)
    return app


def non_resource(request: web.Request, state: AppState) -> web.StreamResponse:
    path = request.path.rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    catalog = state.catalog
    if path in ("/healthz", "/livez"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/readyz":
        if not state.ready:
            return web.Response(status=503, text="not ready", content_type="text/plain")
        problem = state.storage_health()
        if problem is not None:
            return web.Response(status=503, text=f"storage: {problem}",
                                content_type="text/plain")
        return web.Response(text="ok", content_type="text/plain")
    if path.startswith(("/healthz/", "/livez/", "/readyz/")):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/version":
        return responses.json_response(discovery.version_doc(state.git_version))
    if path == "/":
        return responses.json_response({"paths": sorted(
            ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3",
             "/readyz", "/version"])})
    if path in ("/api", "/apis"):
        output = negotiation.choose(negotiation.parse_accept(request.headers.get("Accept")),
                                    allow_discovery=True)
        if output.kind == "discovery":
            body = discovery.aggregated(catalog, core=path == "/api",
                                        doc_version=output.version)
            response = responses.json_response(body, content_type=output.content_type)
            response.headers["X-Varied-Accept"] = request.headers.get("Accept", "")
            response.headers["Vary"] = "Accept"
            return response
        if path == "/api":
            host = request.host or "127.0.0.1"
            return responses.json_response(discovery.api_versions(host))
        return responses.json_response(discovery.api_group_list(catalog))
    if len(parts) == 2 and parts[0] == "api":
        doc = discovery.api_resource_list(catalog, "", parts[1])
        if doc is None:
            raise errors.path_not_found()
        return responses.json_response(doc)
    if len(parts) == 2 and parts[0] == "apis":
        group_doc = discovery.api_group(catalog, parts[1])
        if group_doc is None:
            raise errors.path_not_found()
        return responses.json_response(group_doc)
    if len(parts) == 3 and parts[0] == "apis":
        doc = discovery.api_resource_list(catalog, parts[1], parts[2])
        if doc is None:
            raise errors.path_not_found()
        return responses.json_response(doc)
    raise errors.path_not_found()
