"""The agent's view of Services: their environment variables for pods, and the service proxy.

:class:`ServiceWatch` keeps informers on Services and EndpointSlices (all namespaces, as the
kubelet and kube-proxy do) and

* answers :meth:`ServiceWatch.env` for a pod about to start (the variables of
  :func:`setpoint.agent.servicelinks.service_env` from the Services known then; a Service
  created after a container started is not in its environment, as in Kubernetes);
* keeps a :class:`~setpoint.agent.proxy.ServiceProxy` in step: after every change (coalesced:
  at most one recomputation in flight, another queued) the whole table is recomputed from the
  caches and applied. A Service deleted closes its listeners and removes its route.

``synced`` is set once both informers have listed and the first table is applied; the pod
loop waits for it before starting pods, so their environment has every Service (the kubelet
refuses to start containers before it has read the Services once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.agent import proxy as px
from setpoint.agent import servicelinks

log = logging.getLogger(__name__)


class ServiceWatch:
    """See the module docstring. ``run()`` until cancelled."""

    def __init__(self, client: sp_client.Client, config: px.ProxyConfig, state_dir: Path, *,
                 clock: runtime.AsyncClock | None = None) -> None:
        self.client = client
        self.config = config
        self.state_dir = state_dir
        self.clock: runtime.AsyncClock = clock or runtime.SystemAsyncClock()
        self.services: runtime.Informer | None = None
        self.slices: runtime.Informer | None = None
        self.proxy: px.ServiceProxy | None = None
        self.synced = asyncio.Event()
        self._dirty = asyncio.Event()

    def env(self, namespace: str, enable_links: bool) -> dict[str, str]:
        """The service variables of a pod in ``namespace`` (empty before the first list)."""
        if self.services is None:
            return {}
        return servicelinks.service_env(self.services.cache.list(), namespace, enable_links)

    def _touch(self, *_: Any) -> None:
        self._dirty.set()

    async def run(self) -> None:
        svc_ref = await self.client.resolve(("v1", "Service"))
        slice_ref = await self.client.resolve(("discovery.k8s.io/v1", "EndpointSlice"))
        self.services = runtime.Informer(runtime.ClientListWatcher(self.client, svc_ref),
                                         clock=self.clock, name="node services")
        self.slices = runtime.Informer(runtime.ClientListWatcher(self.client, slice_ref),
                                       clock=self.clock, name="node endpointslices")
        handlers = runtime.Handlers(add=self._touch, update=self._touch, delete=self._touch)
        self.services.cache.subscribe(handlers)
        self.slices.cache.subscribe(handlers)
        async with px.ServiceProxy(self.config, self.state_dir) as proxy, \
                asyncio.TaskGroup() as group:
            self.proxy = proxy
            group.create_task(self.services.run(), name="service informer")
            group.create_task(self.slices.run(), name="endpointslice informer")
            await self.services.wait_synced()
            await self.slices.wait_synced()
            await self._apply()
            self.synced.set()
            while True:
                await self._dirty.wait()
                await self._apply()

    async def _apply(self) -> None:
        assert self.services is not None
        assert self.slices is not None
        assert self.proxy is not None
        self._dirty.clear()
        if self.proxy.mode == "off":
            return
        table = px.rules_from(self.services.cache.list(), self.slices.cache.list(),
                              self.proxy.mode)
        try:
            await self.proxy.apply(table)
        except OSError as e:
            log.warning("service proxy: applying the table failed: %s", e)

    def listening(self) -> Mapping[px.Frontend, tuple[px.Address, ...]]:
        return {} if self.proxy is None else self.proxy.listening()
