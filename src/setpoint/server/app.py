"""The aiohttp application: one catch-all route that dispatches by path.

Resource paths go to :class:`~setpoint.server.verbs.ResourceHandler`; everything else is
discovery, OpenAPI, health (:mod:`setpoint.server.health`) or ``/metrics``
(:mod:`setpoint.server.metrics`). Every failure leaves as a ``metav1.Status`` (the middleware is
the single mapping point); storage that cannot be reached is a 503 with ``Retry-After`` (the
client retries; the server itself recovers once storage is back), and an unexpected exception
is logged and answered with a 500 Status, never a dropped connection.

Around that, the route's handler (``edge`` in :func:`build_app`) does what every request
needs: it tells the connection guard a request is being served, applies the in-flight limits
(429 beyond them; watches and probes are not counted, see :mod:`setpoint.server.limits`), and
counts the request in the metrics once it is answered. (No aiohttp middlewares: one handler
is cheaper than a chain, and the path is parsed once.) Every answer that does not say
otherwise carries ``Cache-Control: no-cache, private`` (kube-apiserver's ``WithCacheControl``):
everything the server says is behind authentication, so no shared cache may keep it and no
private one may reuse it unchecked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from aiohttp import web

from setpoint.apimachinery import errors, prometheus
from setpoint.apimachinery.clock import Clock
from setpoint.registry import listbudget, storageerrors
from setpoint.registry import watchcache as wc
from setpoint.registry.catalog import Catalog
from setpoint.server import (
    connections,
    discovery,
    health,
    limits,
    metrics,
    negotiation,
    nodeproxy,
    request_info,
    responses,
    security,
    ui,
)
from setpoint.server.openapi import builtins as openapi_data
from setpoint.server.openapi import documents as openapi_documents
from setpoint.server.openapi.handler import OpenAPIHandler
from setpoint.server.verbs import ResourceHandler, subresources
from setpoint.server.watchresponse import WatchConfig
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(slots=True)
class AppState:
    catalog: Catalog
    cache: wc.WatchCache
    clock: Clock
    watch: WatchConfig
    edge_limits: limits.Limits = field(default_factory=limits.Limits)
    #: the server's health checks (``ping`` only unless the server adds its own)
    checks: health.HealthChecks = field(default_factory=health.HealthChecks)
    #: the connection guard of the site serving this app, if any
    guard: connections.ConnectionGuard | None = None
    api_metrics: metrics.ApiMetrics | None = None
    inflight: limits.InflightLimiter | None = None
    #: authentication, audit, impersonation and authorization of every request (none: the
    #: request is served as it is, for apps built without a server, in tests)
    gate: security.Gate | None = None
    git_version: str = "v1.32.0-setpoint"
    ready: bool = False
    lists: listbudget.ListBudget = field(default_factory=listbudget.ListBudget)
    #: the pods' streaming subresources, served by their node agents (none: not served)
    pod_streams: nodeproxy.PodStreams | None = None
    #: the web UI's static files, served under ``/ui`` to anyone (they hold no data)
    ui_assets: ui.Assets = field(default_factory=ui.Assets.load)

    def __post_init__(self) -> None:
        if self.inflight is None:
            self.inflight = limits.InflightLimiter(self.edge_limits)
        if self.api_metrics is None:
            self.api_metrics = metrics.ApiMetrics(prometheus.MetricsRegistry(), self.inflight,
                                              self.stored_objects)

    def stored_objects(self) -> list[tuple[str, int]]:
        return metrics.qualified_counts({
            (s.info.group, s.info.resource): self.cache.count(s.info.namespace_prefix(None))
            for s in self.catalog.all()})


#: the ``Cache-Control`` of every answer that sets none of its own
CACHE_CONTROL: Final = "no-cache, private"


async def cache_control(request: web.Request, response: web.StreamResponse) -> None:
    """Before an answer's head is sent: :data:`CACHE_CONTROL` unless it has its own."""
    headers = response.headers
    if "Cache-Control" not in headers:
        headers["Cache-Control"] = CACHE_CONTROL


async def status_errors(request: web.Request, answer: Awaitable[T]) -> T | web.Response:
    """``answer``'s response, or the Status its failure maps to (the one mapping point)."""
    try:
        return await answer
    except limits.BodyTimeout as e:
        return await _answer_and_close(request, responses.error_response(e))
    except errors.ApiError as e:
        return responses.error_response(e)
    except web.HTTPException:
        raise
    except st.StorageError as e:  # the registry maps them; this is the backstop
        return responses.error_response(storageerrors.api_error(e))
    except TimeoutError:
        return responses.error_response(errors.Timeout("the request timed out",
                                                       retry_after=1))
    except ConnectionError as e:
        if not client_gone(request):
            # a connection of the server's own (to a node agent, say): a server error
            log.exception("internal error serving %s %s", request.method, request.path)
            return responses.error_response(errors.InternalError(
                "an internal error occurred while serving the request"))
        # the client went away in the middle of its request or its answer: not an error of
        # the server's, and nothing to tell anyone (aiohttp would log it with a traceback)
        log.debug("the client of %s %s went away: %s", request.method, request.path, e)
        return responses.error_response(client_closed_request())
    except Exception:
        log.exception("internal error serving %s %s", request.method, request.path)
        return responses.error_response(errors.InternalError(
            "an internal error occurred while serving the request"))


#: the code a request whose client went away is counted with (nginx's "client closed
#: request"): nobody reads the answer, and it is not a server error
CLIENT_CLOSED_REQUEST = 499


def client_closed_request() -> errors.ApiError:
    return errors.ApiError("the client closed the connection before it was answered",
                           code=CLIENT_CLOSED_REQUEST, reason="ClientClosedRequest")


def client_gone(request: web.Request) -> bool:
    """The client's connection is closed or closing."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send ``response`` now and close the connection: its client stalled in the middle of a
    body, so nothing more will be read from it (unless it went away meanwhile)."""
    response.force_close()
    try:
        await response.prepare(request)
        await response.write_eof()
    except ConnectionError:
        return response
    if request.transport is not None:
        request.transport.close()  # flushes the response first
    return response


def build_app(state: AppState) -> web.Application:
    resources = ResourceHandler(state.catalog, state.clock, state.watch, state.lists,
                                state.edge_limits, pod_streams=state.pod_streams)
    openapi = OpenAPIHandler(openapi_documents.Documents(
        state.catalog, openapi_data.Definitions.load(), clock=state.clock,
        version=state.git_version.split("-", 1)[0]), state.clock)
    catalog = state.catalog
    guard = state.guard
    inflight = state.inflight
    api_metrics = state.api_metrics
    assert inflight is not None
    assert api_metrics is not None
    retry_after = state.edge_limits.retry_after
    gate = state.gate
    ui_assets = state.ui_assets

    def labels_of(request: web.Request, ri: request_info.RequestInfo | None, watch: bool
                  ) -> metrics.Labels | None:
        """The metric labels of a request, or None when it is not counted (an unknown path
        or subresource: label values never come from the client)."""
        if ri is None:
            return metrics.non_resource_labels(request.method, request.path)
        served = catalog.lookup(ri.group, ri.version, ri.resource)
        if served is None:
            return None
        if ri.subresource:
            version = served.info.version(ri.version)
            if version is None or ri.subresource not in subresources(served.info, version):
                return None
        query = request.query
        return metrics.resource_labels(
            request.method, ri, watch=watch,
            dry_run=query.getall("dryRun", []) if "dryRun" in query else [],
            content_type=request.headers.get("Content-Type"))

    async def edge(request: web.Request) -> web.StreamResponse:
        """Every request: connection state and metrics around :func:`admit`, which the
        gate (authentication, audit, authorization) runs first when the server has one."""
        started = time.perf_counter()
        path = request.path
        transport = request.transport
        if ui.is_ui_path(path):
            # static files without data, the same for everyone: before the gate, so that a
            # browser can load the sign-in page; every data request the UI makes goes
            # through the gate like any other client's. The connection's state still
            # follows the request (a keep-alive connection left in HEADERS would be closed
            # under the browser's next request)
            if guard is not None:
                guard.request_started(transport)
            try:
                return ui_assets.serve(request)
            finally:
                if guard is not None:
                    guard.request_finished(transport)
        ri = request_info.parse(path)
        kind = limits.classify(request.method, path, ri, request.query.get("watch"))
        labels = labels_of(request, ri, kind is limits.Kind.LONG_RUNNING)
        if guard is not None:
            guard.request_started(transport)
        try:
            if gate is not None:
                response = await status_errors(request, gate.serve(
                    request, ri, lambda: admit(request, ri, kind, labels)))
            else:
                response = await admit(request, ri, kind, labels)
        except web.HTTPException as e:
            if labels is not None:
                api_metrics.observe(labels, e.status, time.perf_counter() - started)
            raise
        finally:
            if guard is not None:
                guard.request_finished(transport)
        if labels is not None:
            api_metrics.observe(labels, response.status, time.perf_counter() - started)
        return response

    async def admit(request: web.Request, ri: request_info.RequestInfo | None,
                    kind: limits.Kind, labels: metrics.Labels | None) -> web.StreamResponse:
        """In-flight limits (429 beyond them; watches and probes are not counted, and a
        write counts only once its body has arrived), then :func:`serve` (failures mapped
        to a Status by :func:`status_errors`)."""
        if kind is limits.Kind.LONG_RUNNING:
            if labels is not None:
                api_metrics.watch_started(labels)
            try:
                return await status_errors(request, serve(request, ri))
            finally:
                if labels is not None:
                    api_metrics.watch_ended(labels)
        if kind is limits.Kind.EXEMPT:
            return await status_errors(request, serve(request, ri))
        if kind is limits.Kind.MUTATING:
            early = await status_errors(request, body_first(request))
            if early is not None:
                return early  # the body failed to arrive (408, 413)
        if not inflight.try_acquire(kind):
            api_metrics.dropped_request(kind)
            return responses.error_response(limits.too_many_requests(retry_after))
        try:
            return await status_errors(request, serve(request, ri))
        finally:
            inflight.release(kind)

    async def body_first(request: web.Request) -> None:
        """Wait for a write's body before it counts in flight (:func:`limits.await_body`)."""
        await limits.await_body(request, state.edge_limits)

    async def serve(request: web.Request,
                    ri: request_info.RequestInfo | None) -> web.StreamResponse:
        if ri is not None:
            return await resources.handle(request, ri)
        path = request.path
        if request.method not in ("GET", "HEAD"):
            if path.rstrip("/") in ("", "/version", "/api", "/apis", "/healthz", "/livez",
                                    "/readyz", "/metrics") or path.startswith("/openapi"):
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource")
            raise errors.path_not_found()
        if path == "/openapi" or path.startswith("/openapi/"):
            return await openapi.handle(request)
        return await non_resource(request, state)

    app = web.Application(client_max_size=negotiation.MAX_BODY + 1024)
    app.on_response_prepare.append(cache_control)
    # every path, newlines included (".*" would leave "/\n" to aiohttp's plain-text 404)
    app.router.add_route("*", r"/{tail:[\s\S]*}", edge)
    return app


async def non_resource(request: web.Request, state: AppState) -> web.StreamResponse:
    path = request.path.rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    catalog = state.catalog
    if parts and parts[0] in health.ENDPOINTS and len(parts) <= 2:
        query = request.query
        return await state.checks.respond(parts[0], parts[1] if len(parts) == 2 else "",
                                          "verbose" in query, query.getall("exclude", []))
    if path == "/metrics":
        assert state.api_metrics is not None
        return web.Response(body=state.api_metrics.render().encode(),
                            headers={"Content-Type": metrics.CONTENT_TYPE})
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
