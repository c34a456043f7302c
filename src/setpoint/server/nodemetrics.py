"""``metrics.k8s.io/v1beta1``: NodeMetrics and PodMetrics, what ``kubectl top`` reads.

The server does what metrics-server does, in-process: it reads each node agent's
``/metrics/resource`` (:mod:`setpoint.node.usage`; the address and credentials of
:class:`~setpoint.server.nodeproxy.NodeDialer`, as for logs and exec) and turns two scrapes
into a rate. The server pulls rather than the agents pushing: the agents already serve
an endpoint the server reaches, nothing is written to storage (metrics are not objects
worth a revision), and an agent that cannot be reached is simply left out, as
metrics-server leaves it out.

Scrapes are made when asked for, not in the background:

* a scrape of a node younger than ``fresh_for`` is reused, and concurrent requests share
  one scrape in flight per node (so any number of clients cost a node at most one scrape per
  ``fresh_for``);
* the CPU rate of the node is taken between the newest scrape and the newest earlier one at
  least ``min_window`` older (the last ``history`` are kept per node); the first time a node
  is asked for there is none, and the server scrapes it a second time ``min_window`` later;
* a container's rate is taken between the same two scrapes when it ran in both (the same
  start time); one that started since is measured from its start (its counter started at
  zero then), as metrics-server does;
* ``window`` is the time between the two samples, ``timestamp`` the newer one's.

Bounds: at most ``max_concurrent_scrapes`` scrapes at a time, each within
``scrape_timeout`` and ``max_response_bytes`` (a node that exceeds either is left out and
logged), the series parsed with :func:`setpoint.apimachinery.resourcemetrics.parse`'s
limits; history for nodes no longer listed is dropped when nodes are listed.

Non-guarantees: a list holds the pods and nodes measured at that moment (a pod whose node
cannot be reached, or whose containers are not running, is missing from it, and a get of it
answers NotFound); numbers are what the agents report (see :mod:`setpoint.node.usage`; the
simulated runtime reports zero); watch is not served, as metrics-server does not.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import aiohttp

from setpoint.apimachinery import errors, selectors, timeutil
from setpoint.apimachinery import resourcemetrics as rm
from setpoint.registry import actions
from setpoint.registry.catalog import Catalog
from setpoint.registry.options import ListOptions
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.server import nodeproxy

log = logging.getLogger(__name__)

Obj = dict[str, Any]

GROUP: Final = "metrics.k8s.io"
VERSION: Final = "v1beta1"
API_VERSION: Final = f"{GROUP}/{VERSION}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsConfig:
    scrape_timeout: float = 5.0
    max_concurrent_scrapes: int = 16
    max_response_bytes: int = 32 * 1024 * 1024
    #: the shortest window a rate is taken over (seconds)
    min_window: float = 1.0
    #: a scrape this young (seconds) is reused rather than repeated
    fresh_for: float = 0.5
    #: scrapes kept per node
    history: int = 4

    def __post_init__(self) -> None:
        if not 0 < self.scrape_timeout <= 300:
            raise ValueError("scrape_timeout must be in (0, 300] seconds")
        if not 1 <= self.max_concurrent_scrapes <= 1024:
            raise ValueError("max_concurrent_scrapes must be between 1 and 1024")
        if not 1024 <= self.max_response_bytes <= 1 << 30:
            raise ValueError("max_response_bytes must be between 1 KiB and 1 GiB")
        if not 0 < self.fresh_for < self.min_window <= 600:
            raise ValueError("0 < fresh_for < min_window <= 600 seconds is required")
        if not 2 <= self.history <= 64:
            raise ValueError("history must be between 2 and 64")


@dataclass(frozen=True, slots=True)
class _Point:
    received: float
    scrape: rm.Scrape


@dataclass(frozen=True, slots=True)
class ContainerUsage:
    name: str
    nanocores: int
    memory_bytes: int
    timestamp: float
    window: float


class MetricsSource:
    """Scrapes node agents and answers the ``metrics.k8s.io`` reads (module docstring)."""

    def __init__(self, catalog: Catalog, dialer: nodeproxy.NodeDialer,
                 config: MetricsConfig | None = None, *,
                 now: Callable[[], float] | None = None) -> None:
        self._catalog = catalog
        self._dialer = dialer
        self.config = config or MetricsConfig()
        self._now = now or (lambda: datetime.now(UTC).timestamp())
        self._history: dict[str, collections.deque[_Point]] = {}
        self._inflight: dict[str, asyncio.Future[_Point | None]] = {}
        self._slots = asyncio.Semaphore(self.config.max_concurrent_scrapes)

    # --- scraping ----------------------------------------------------------------------------

    async def _fetch(self, node: Mapping[str, Any]) -> _Point | None:
        name = str((node.get("metadata") or {}).get("name") or "")
        try:
            host, port = nodeproxy.node_endpoint(node)
        except errors.ApiError:
            return None
        host = f"[{host}]" if ":" in host else host
        url = f"{self._dialer.scheme}://{host}:{port}/metrics/resource"
        limit = self.config.max_response_bytes
        async with self._slots:
            try:
                async with asyncio.timeout(self.config.scrape_timeout):
                    async with self._dialer.session.get(url) as response:
                        if response.status != 200:
                            log.info("node %s: metrics answered %s", name, response.status)
                            return None
                        body = await _read_bounded(response, limit)
            except (TimeoutError, aiohttp.ClientError, OSError) as e:
                log.info("node %s: metrics could not be read: %s", name, e)
                return None
        if len(body) > limit:
            log.warning("node %s: metrics larger than %d bytes, left out", name, limit)
            return None
        received = self._now()
        try:
            scrape = rm.parse(body.decode("utf-8", "replace"), now=received)
        except rm.MetricsFormatError as e:
            log.warning("node %s: unreadable metrics: %s", name, e)
            return None
        return _Point(received, scrape)

    async def _latest(self, node: Mapping[str, Any]) -> _Point | None:
        name = str((node.get("metadata") or {}).get("name") or "")
        history = self._history.get(name)
        if history and self._now() - history[-1].received < self.config.fresh_for:
            return history[-1]
        pending = self._inflight.get(name)
        if pending is None:
            pending = asyncio.ensure_future(self._fetch(node))
            self._inflight[name] = pending

            def done(fut: asyncio.Future[_Point | None]) -> None:
                if self._inflight.get(name) is fut:
                    del self._inflight[name]
                if fut.cancelled() or fut.exception() is not None:
                    return
                point = fut.result()
                if point is not None:
                    self._history.setdefault(
                        name, collections.deque(maxlen=self.config.history)).append(point)

            pending.add_done_callback(done)
        return await asyncio.shield(pending)

    def _base(self, name: str, latest: _Point) -> _Point | None:
        for point in reversed(self._history.get(name) or ()):
            if latest.received - point.received >= self.config.min_window:
                return point
        return None

    async def points(self, node: Mapping[str, Any]) -> tuple[_Point, _Point] | None:
        """The newest scrape of ``node`` and the one to take rates against; None when the
        node's agent cannot be read."""
        name = str((node.get("metadata") or {}).get("name") or "")
        latest = await self._latest(node)
        if latest is None:
            return None
        base = self._base(name, latest)
        if base is None:
            await asyncio.sleep(self.config.min_window)
            latest = await self._latest(node)
            if latest is None:
                return None
            base = self._base(name, latest)
            if base is None:
                return None
        return latest, base

    async def _points_of(self, nodes: Sequence[Mapping[str, Any]]
                         ) -> dict[str, tuple[_Point, _Point]]:
        out: dict[str, tuple[_Point, _Point]] = {}

        async def one(node: Mapping[str, Any]) -> None:
            found = await self.points(node)
            if found is not None:
                out[str(node["metadata"]["name"])] = found

        async with asyncio.TaskGroup() as group:
            for node in nodes:
                group.create_task(one(node))
        return out

    def forget_except(self, names: set[str]) -> None:
        for name in [n for n in self._history if n not in names]:
            del self._history[name]

    # --- rates -------------------------------------------------------------------------------

    @staticmethod
    def node_usage(latest: _Point, base: _Point) -> tuple[int, int, float, float] | None:
        """(nanocores, memory bytes, timestamp, window) of the node, or None."""
        now, before = latest.scrape.node, base.scrape.node
        if now is None or before is None:
            return None
        rate = rm.cpu_rate(now.cpu_seconds, now.timestamp, before.cpu_seconds,
                           before.timestamp)
        if rate is None:
            return None
        return rate[0], now.memory_bytes, now.timestamp, rate[1]

    @staticmethod
    def container_usage(latest: _Point, base: _Point
                        ) -> dict[tuple[str, str], list[ContainerUsage]]:
        """Per (namespace, pod): its containers' usage between the two scrapes."""
        before = {(c.namespace, c.pod, c.container): c for c in base.scrape.containers}
        out: dict[tuple[str, str], list[ContainerUsage]] = {}
        for c in latest.scrape.containers:
            old = before.get((c.namespace, c.pod, c.container))
            rate = None
            if old is not None and old.start_time == c.start_time:
                rate = rm.cpu_rate(c.cpu_seconds, c.timestamp, old.cpu_seconds, old.timestamp)
            elif c.start_time is not None:
                rate = rm.cpu_rate(c.cpu_seconds, c.timestamp, 0.0, c.start_time)
            if rate is None:
                continue
            out.setdefault((c.namespace, c.pod), []).append(
                ContainerUsage(c.container, rate[0], c.memory_bytes, c.timestamp, rate[1]))
        return out

    # --- the API's reads ---------------------------------------------------------------------

    def _stamp(self) -> str:
        return timeutil.format_time(datetime.fromtimestamp(self._now(), UTC))

    async def _nodes(self, opts: ListOptions) -> list[Obj]:
        page = await self._catalog.store("", "nodes").list(None, "v1", opts)
        return list(page.items)

    def _node_metrics(self, node: Mapping[str, Any],
                      found: tuple[_Point, _Point] | None) -> Obj | None:
        if found is None:
            return None
        usage = self.node_usage(*found)
        if usage is None:
            return None
        nanocores, memory, timestamp, window = usage
        meta = node.get("metadata") or {}
        metadata: Obj = {"name": meta.get("name"), "creationTimestamp": self._stamp()}
        if meta.get("labels"):
            metadata["labels"] = dict(meta["labels"])
        return {"kind": "NodeMetrics", "apiVersion": API_VERSION, "metadata": metadata,
                "timestamp": _format_ts(timestamp), "window": rm.format_window(window),
                "usage": {"cpu": rm.format_cpu(nanocores),
                          "memory": rm.format_memory(memory)}}

    async def list_nodes(self, label_selector: str, field_selector: str) -> Obj:
        opts = _list_options(label_selector, field_selector, ("metadata.name",))
        nodes = await self._nodes(opts)
        if opts.label_selector is None and opts.field_selector is None:
            self.forget_except({str(n["metadata"]["name"]) for n in nodes})
        found = await self._points_of(nodes)
        items = [m for n in nodes
                 if (m := self._node_metrics(n, found.get(str(n["metadata"]["name"]))))]
        return {"kind": "NodeMetricsList", "apiVersion": API_VERSION, "metadata": {},
                "items": items}

    async def get_node(self, name: str) -> Obj:
        try:
            node = await self._catalog.store("", "nodes").get(None, name, "v1")
        except errors.NotFound:
            raise errors.not_found("nodemetrics", GROUP, name) from None
        metrics = self._node_metrics(node, await self.points(node))
        if metrics is None:
            raise errors.not_found("nodemetrics", GROUP, name)
        return metrics

    def _pod_metrics(self, pod: Mapping[str, Any],
                     usage: Mapping[tuple[str, str], list[ContainerUsage]]) -> Obj | None:
        meta = pod.get("metadata") or {}
        containers = usage.get((str(meta.get("namespace") or ""), str(meta.get("name") or "")))
        if not containers:
            return None
        metadata: Obj = {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "creationTimestamp": self._stamp()}
        if meta.get("labels"):
            metadata["labels"] = dict(meta["labels"])
        order = {str(c.get("name")): i for i, c in
                 enumerate((pod.get("spec") or {}).get("containers") or [])}
        containers = sorted(containers, key=lambda c: (order.get(c.name, len(order)), c.name))
        return {"kind": "PodMetrics", "apiVersion": API_VERSION, "metadata": metadata,
                "timestamp": _format_ts(max(c.timestamp for c in containers)),
                "window": rm.format_window(max(c.window for c in containers)),
                "containers": [{"name": c.name, "usage": {
                    "cpu": rm.format_cpu(c.nanocores),
                    "memory": rm.format_memory(c.memory_bytes)}} for c in containers]}

    async def _usage_of_pods(self, pods: Sequence[Mapping[str, Any]]
                             ) -> dict[tuple[str, str], list[ContainerUsage]]:
        node_names = sorted({str((p.get("spec") or {}).get("nodeName") or "") for p in pods}
                            - {""})
        store = self._catalog.store("", "nodes")
        nodes: list[Obj] = []
        for name in node_names:
            with contextlib.suppress(errors.NotFound):
                nodes.append(await store.get(None, name, "v1"))
        usage: dict[tuple[str, str], list[ContainerUsage]] = {}
        for latest, base in (await self._points_of(nodes)).values():
            usage.update(self.container_usage(latest, base))
        return usage

    async def list_pods(self, namespace: str | None, label_selector: str,
                        field_selector: str) -> Obj:
        opts = _list_options(label_selector, field_selector,
                             ("metadata.name", "metadata.namespace"))
        page = await self._catalog.store("", "pods").list(namespace, "v1", opts)
        pods = [p for p in page.items if (p.get("spec") or {}).get("nodeName")]
        usage = await self._usage_of_pods(pods)
        items = [m for p in pods if (m := self._pod_metrics(p, usage))]
        return {"kind": "PodMetricsList", "apiVersion": API_VERSION, "metadata": {},
                "items": items}

    async def get_pod(self, namespace: str, name: str) -> Obj:
        missing = errors.not_found("podmetrics", GROUP, f"{namespace}/{name}")
        try:
            pod = await self._catalog.store("", "pods").get(namespace, name, "v1")
        except errors.NotFound:
            raise missing from None
        metrics = self._pod_metrics(pod, await self._usage_of_pods([pod]))
        if metrics is None:
            raise missing
        return metrics

    # --- serving -----------------------------------------------------------------------------

    def register(self, catalog: Catalog) -> None:
        """Serve ``nodes`` and ``pods`` of ``metrics.k8s.io/v1beta1`` from this source."""

        async def nodes(req: actions.ReadRequest) -> Obj:
            if req.name:
                return await self.get_node(req.name)
            return await self.list_nodes(req.label_selector, req.field_selector)

        async def pods(req: actions.ReadRequest) -> Obj:
            if req.name:
                assert req.namespace is not None
                return await self.get_pod(req.namespace, req.name)
            return await self.list_pods(req.namespace, req.label_selector, req.field_selector)

        version = (VersionInfo(VERSION, storage=True),)
        catalog.add_virtual(actions.VirtualResource(ResourceInfo(
            group=GROUP, resource="nodes", kind="NodeMetrics", singular="", namespaced=False,
            versions=version, verbs=("get", "list")), read=nodes))
        catalog.add_virtual(actions.VirtualResource(ResourceInfo(
            group=GROUP, resource="pods", kind="PodMetrics", singular="", namespaced=True,
            versions=version, verbs=("get", "list")), read=pods))


async def _read_bounded(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or its first ``limit + 1`` bytes when it is longer (the caller
    refuses those): ``read(n)`` alone returns what has arrived so far."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


def _format_ts(timestamp: float) -> str:
    return timeutil.format_time(datetime.fromtimestamp(timestamp, UTC))


def _list_options(label: str, field: str, supported: Sequence[str]) -> ListOptions:
    field_sel = selectors.FieldSelector.parse(field) if field else None
    if field_sel is not None:
        selectors.check_supported(field_sel, supported)
    return ListOptions(label_selector=selectors.LabelSelector.parse(label) if label else None,
                       field_selector=field_sel)
