"""The manager's own HTTP endpoints: ``/healthz``, ``/readyz``, ``/metrics`` and
``/debug/reconciles`` (aiohttp's server, imported only by a manager that serves them).

Invariants: ``/healthz`` answers ``ok`` while the process serves; ``/readyz`` answers 200
once the manager is ready (caches synced) and 503 before; ``/debug/reconciles`` refuses query
values longer than :data:`MAX_QUERY` characters (400) and names only controllers the manager
runs (404 otherwise). A port that cannot be bound raises the ``OSError`` of the bind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from typing import Any

from aiohttp import web

from setpoint.runtime import history as rthistory
from setpoint.runtime import metrics as rtmetrics

#: the longest ``controller`` or ``key`` query value ``/debug/reconciles`` accepts
MAX_QUERY = 512


class Endpoints:
    """The handlers, over what a manager shows: whether it is ready, its metrics, its
    reconcile history and the names of its controllers."""

    def __init__(self, ready: Callable[[], bool], metrics: rtmetrics.MetricsRegistry,
                 history: rthistory.ReconcileHistory,
                 controllers: Callable[[], Collection[str]]) -> None:
        self._ready = ready
        self._metrics = metrics
        self._history = history
        self._controllers = controllers

    def app(self, endpoints: Collection[str]) -> web.Application:
        app = web.Application()
        if "health" in endpoints:
            app.router.add_get("/healthz", self._healthz)
            app.router.add_get("/readyz", self._readyz)
        if "metrics" in endpoints:
            app.router.add_get("/metrics", self._metrics_page)
            app.router.add_get("/debug/reconciles", self._debug_reconciles)
        return app

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self._ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="caches not synced")

    async def _metrics_page(self, request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.render().encode())
        response.headers["Content-Type"] = rtmetrics.CONTENT_TYPE
        return response

    async def _debug_reconciles(self, request: web.Request) -> web.Response:
        """``/debug/reconciles``: the controllers with history; ``?controller=NAME``: the
        last reconcile of each of its objects; ``&key=NS/NAME``: that object's history."""
        controller = request.query.get("controller", "")
        key = request.query.get("key", "")
        history = self._history
        if len(controller) > MAX_QUERY or len(key) > MAX_QUERY:
            return web.json_response({"error": "query values are limited to "
                                      f"{MAX_QUERY} characters"}, status=400)
        if key and not controller:
            return web.json_response({"error": "key needs controller"}, status=400)
        if not controller:
            return web.json_response({"controllers": history.controllers(),
                                      "limits": {"objects": history.config.max_objects,
                                                 "per_object": history.config.per_object}})
        if controller not in self._controllers():
            return web.json_response({"error": f"no controller named {controller!r}"},
                                     status=404)
        if not key:
            return web.json_response({"controller": controller,
                                      "objects": history.latest(controller)})
        return web.json_response({"controller": controller, "key": key,
                                  "reconciles": history.of(controller, key)})


async def serve(stack: contextlib.AsyncExitStack, endpoints: Endpoints, host: str, port: int,
                which: Collection[str]) -> str:
    """Serve ``which`` endpoints (``health``, ``metrics``) on ``host:port`` until ``stack``
    closes; returns the URL (port 0: the port bound)."""
    runner = web.AppRunner(endpoints.app(which), access_log=None, handle_signals=False,
                           shutdown_timeout=1.0)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets: Any = getattr(site._server, "sockets", None) or []
    bound = int(sockets[0].getsockname()[1]) if sockets else port
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{bound}"
