"""A running control plane: storage, watch cache, catalog, background loops and HTTP.

``async with Server(config) as server:`` starts everything and stops it in reverse order.
Every task belongs to one TaskGroup; stopping closes open watches first, so clients see their
streams end cleanly, then the HTTP site, the loops, and storage last (no write that was
acknowledged is lost: the backend only acknowledges committed writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.apimachinery.clock import Clock, SystemClock
from setpoint.registry import bootstrap, compactor, core, listbudget, services
from setpoint.registry import watchcache as wc
from setpoint.registry.catalog import Catalog
from setpoint.registry.crdlifecycle import CRDLifecycle
from setpoint.registry.options import WriteOptions
from setpoint.registry.serviceips import ServiceNetworkConfig
from setpoint.server import (
    connections,
    health,
    kubeconfigs,
    nodemetrics,
    nodeproxy,
    webhookclient,
)
from setpoint.server.app import AppState, build_app
from setpoint.server.limits import Limits
from setpoint.server.securing import Secured, SecurityConfig
from setpoint.server.watchresponse import WatchConfig
from setpoint.storage import StorageConfig, create_backend
from setpoint.storage import interface as st
from setpoint.storage.encryption import EncryptingBackend
from setpoint.storage.encryption import load_config as load_encryption

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 6443
    storage: StorageConfig = field(default_factory=lambda: StorageConfig(kind="memory"))
    #: where the admin kubeconfig is written (None: nowhere)
    kubeconfig_path: Path | None = None
    bookmark_interval: float = 55.0
    min_request_timeout: float = 1800.0
    #: the watch cache's history: at most this many events ...
    watch_cache_capacity: int = wc.DEFAULT_CAPACITY
    #: ... and at most this many stored bytes of them (watches from older revisions: 410)
    watch_cache_bytes: int = wc.DEFAULT_MAX_BYTES
    watcher_buffer: int = 4096
    #: estimated response bytes of the LISTs served at once (see
    #: :mod:`setpoint.registry.listbudget`); more wait briefly or get 429
    list_budget_bytes: int = listbudget.DEFAULT_MAX_BYTES
    #: a garbage collector runs against this server (see :mod:`setpoint.controlplane`):
    #: DELETE with propagationPolicy Foreground or Orphan (or orphanDependents) then adds the
    #: ``foregroundDeletion`` / ``orphan`` finalizer. Without one such deletes would hang, so
    #: by default they delete at once, as Background does.
    garbage_collection: bool = False
    #: seconds between compactions of storage history, each to the revision read at the
    #: previous one (see :mod:`setpoint.registry.compactor`); None: never compact
    compaction_interval: float | None = compactor.DEFAULT_INTERVAL
    #: body size and time, in-flight requests, connections (see :mod:`setpoint.server.limits`)
    limits: Limits = field(default_factory=Limits)
    #: TLS, authentication, RBAC and audit (see :mod:`setpoint.server.securing`); None serves
    #: plain HTTP where every request runs as an administrator (tests, local experiments)
    security: SecurityConfig | None = None
    #: an EncryptionConfiguration file: the resources it names are encrypted in storage
    encryption_config: Path | None = None
    #: the ranges Services get cluster IPs and node ports from
    service_network: ServiceNetworkConfig = field(default_factory=ServiceNetworkConfig)
    #: the address the ``kubernetes`` Service's endpoints name (default: the host when it is
    #: one address, else 127.0.0.1)
    advertise_address: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port out of range: {self.port}")
        if self.bookmark_interval <= 0:
            raise ValueError("bookmark_interval must be positive")
        if self.compaction_interval is not None and self.compaction_interval <= 0:
            raise ValueError("compaction_interval must be positive (or None)")
        if self.watch_cache_capacity < 1 or self.watch_cache_bytes < 1:
            raise ValueError("watch_cache_capacity and watch_cache_bytes must be positive")
        if self.list_budget_bytes < 1:
            raise ValueError("list_budget_bytes must be positive")


class Server:
    def __init__(self, config: ServerConfig, *, backend: st.Backend | None = None,
                 clock: Clock | None = None, rng: random.Random | None = None) -> None:
        self.config = config
        self._backend = backend
        self._owns_backend = backend is None
        self._clock = clock or SystemClock()
        # seeded once from the OS: uids stay unique without a syscall per object
        self._rng = rng or random.Random(os.urandom(32))
        self._runner: web.AppRunner | None = None
        self._tasks: asyncio.TaskGroup | None = None
        self._stack = contextlib.AsyncExitStack()
        self.port = 0
        self.catalog: Catalog | None = None
        self.cache: wc.WatchCache | None = None
        self.lists: listbudget.ListBudget | None = None
        #: the checks of /livez, /readyz and /healthz; anyone may add one (see
        #: :mod:`setpoint.server.health`); the server adds its own when it starts
        self.health = health.HealthChecks()
        self._stopping = False
        self._guard: connections.ConnectionGuard | None = None
        self.secured: Secured | None = None
        self._watch = WatchConfig(bookmark_interval=config.bookmark_interval,
                                  min_request_timeout=config.min_request_timeout,
                                  max_request_timeout=config.min_request_timeout * 2)

    @property
    def scheme(self) -> str:
        return "https" if self.config.security is not None else "http"

    @property
    def url(self) -> str:
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def advertised_address(self) -> str:
        """The address the ``kubernetes`` Service's endpoints name."""
        if self.config.advertise_address:
            return self.config.advertise_address
        host = self.config.host
        if host in ("0.0.0.0", "::", "") or not services.valid_ip(host):
            return "127.0.0.1"
        return host

    @property
    def backend(self) -> st.Backend:
        assert self._backend is not None
        return self._backend

    async def __aenter__(self) -> Server:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        if self._backend is None:
            backend = create_backend(self.config.storage)
            if self.config.encryption_config is not None:
                backend = EncryptingBackend(backend, load_encryption(
                    self.config.encryption_config))
            self._backend = backend
        backend = self._backend
        await backend.start()
        if self._owns_backend:
            self._stack.push_async_callback(backend.close)
        cache = wc.WatchCache(backend, capacity=self.config.watch_cache_capacity,
                              max_bytes=self.config.watch_cache_bytes,
                              watcher_buffer=self.config.watcher_buffer)
        self.cache = cache
        self._tasks = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._stack.callback(self._cancel_tasks)
        self._task_list: list[asyncio.Task[Any]] = []
        self._spawn(cache.run(), "watch-cache")
        await cache.wait_ready()
        if self.config.compaction_interval is not None:
            self._spawn(compactor.compact_periodically(backend, self.config.compaction_interval),
                        "compactor")
        catalog = Catalog(backend, cache, clock=self._clock, rng=self._rng,
                          garbage_collection=self.config.garbage_collection,
                          service_network=self.config.service_network)
        catalog.load_existing()
        self.catalog = catalog
        secured = Secured(self.config.security, listen_host=self.config.host, cache=cache,
                          clock=self._clock)
        self.secured = secured
        self._stack.callback(secured.close)
        secured.register_actions(catalog)
        await self._ensure_namespaces(catalog)
        await bootstrap.ensure(catalog)
        self._spawn(CRDLifecycle(catalog, cache, self._clock).run(), "crd-lifecycle")
        lists = listbudget.ListBudget(listbudget.ListBudgetConfig(
            max_bytes=self.config.list_budget_bytes,
            small=min(listbudget.DEFAULT_SMALL, self.config.list_budget_bytes)))
        self.lists = lists
        self._add_health_checks(backend, cache)
        edge = self.config.limits
        client_files = secured.kubelet_client_files()
        dialer = nodeproxy.NodeDialer(
            secure=secured.secure,
            cert_file=str(client_files[0]) if client_files is not None else None,
            key_file=str(client_files[1]) if client_files is not None else None)
        self._stack.push_async_callback(dialer.close)
        nodemetrics.MetricsSource(catalog, dialer).register(catalog)
        webhook_client = webhookclient.WebhookClient()
        catalog.webhooks.transport = webhook_client
        self._stack.push_async_callback(webhook_client.close)
        state = AppState(catalog=catalog, cache=cache, clock=self._clock, watch=self._watch,
                         lists=lists, edge_limits=edge, checks=self.health, gate=secured.gate,
                         pod_streams=nodeproxy.PodStreams(catalog, dialer))
        assert state.api_metrics is not None
        guard = connections.ConnectionGuard(
            edge, max_connections=connections.connection_budget(edge.max_connections),
            on_close=state.api_metrics.connection_closed)
        state.api_metrics.attach_connections(lambda: guard.open_connections)
        state.guard = self._guard = guard
        app = build_app(state)
        # request bodies are taken as sent, as kube-apiserver does: a Content-Encoding is not
        # undone (so a compressed body cannot expand past the body limit)
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=2.0, keepalive_timeout=edge.idle_timeout,
                               auto_decompress=False, lingering_time=1.0)
        await runner.setup()
        self._runner = runner
        self._stack.push_async_callback(self._stop_http)
        site = connections.GuardedSite(
            runner, self.config.host, self.config.port, guard,
            ssl_context=secured.tls.context if secured.tls is not None else None)
        await site.start()
        self.port = site.port
        await services.ensure_kubernetes_service(
            catalog.store("", "services"), catalog.store("", "endpoints"),
            catalog.store("discovery.k8s.io", "endpointslices"),
            cluster_ip=self.config.service_network.first_ip,
            address=self.advertised_address, port=self.port)
        state.ready = True
        self.write_kubeconfigs()
        if secured.secure:
            self._spawn(secured.renew_periodically(self.write_kubeconfigs), "certificates")
        log.info("serving on %s", self.url)

    def write_kubeconfigs(self) -> None:
        """(Re)write the admin kubeconfig, with a current client certificate."""
        if self.config.kubeconfig_path is not None and self.secured is not None:
            kubeconfigs.write(self.config.kubeconfig_path, self.secured.kubeconfig(self.url))

    def controller_kubeconfig(self, controller: str, url: str | None = None) -> dict[str, Any]:
        """A kubeconfig for built-in controller ``controller`` (its own identity)."""
        assert self.secured is not None, "the server has not started"
        return self.secured.controller_kubeconfig(url or self.url, controller)

    def node_kubeconfig(self, node: str, url: str | None = None) -> dict[str, Any]:
        """A kubeconfig for the agent of node ``node`` (``system:node:<node>``)."""
        assert self.secured is not None, "the server has not started"
        return self.secured.node_kubeconfig(url or self.url, node)

    def _spawn(self, coro: Any, name: str) -> None:
        assert self._tasks is not None
        self._task_list.append(self._tasks.create_task(coro, name=name))

    def _cancel_tasks(self) -> None:
        for task in getattr(self, "_task_list", []):
            task.cancel()

    def _add_health_checks(self, backend: st.Backend, cache: wc.WatchCache) -> None:
        async def storage() -> None:
            await backend.current_revision()

        async def informer_sync() -> None:
            if not cache.ready:
                raise RuntimeError("the watch cache has not caught up with storage")

        async def shutdown() -> None:
            if self._stopping:
                raise RuntimeError("the server is shutting down")

        # kube-apiserver's names: its storage checks are "etcd" and "etcd-readiness". Both are
        # readiness only: the server recovers by itself once storage is back, so a restart
        # (what a failing /livez asks for) would not help
        name = "etcd" if self.config.storage.kind == "etcd" else "storage"
        self.health.add(name, storage)
        if isinstance(backend, st.ReportsHealth):
            reports = backend

            async def writable() -> None:
                problem = reports.health()
                if problem is not None:
                    raise RuntimeError(problem)

            # not ready, but alive: a server that may not acknowledge writes gets none
            self.health.add(f"{name}-readiness", writable)
        self.health.add("informer-sync", informer_sync)
        self.health.add("shutdown", shutdown)

    async def _stop_http(self) -> None:
        self._stopping = True
        self._watch.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._guard is not None:
            self._guard.close_all()

    async def stop(self) -> None:
        await self._stack.aclose()

    async def _ensure_namespaces(self, catalog: Catalog) -> None:
        store = catalog.store("", "namespaces")
        for name in core.INITIAL_NAMESPACES:
            try:
                await store.create(None, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": name}}, "v1", WriteOptions())
            except errors.AlreadyExists:
                pass
