"""The API server's metrics, with kube-apiserver's names, labels and verbs.

One :class:`ApiMetrics` per server, over its own
:class:`~setpoint.apimachinery.prometheus.MetricsRegistry` (no global registry); ``/metrics``
renders it in the Prometheus text format. The families:

- ``apiserver_request_total{verb, dry_run, group, version, resource, subresource, scope,
  component, code}`` and ``apiserver_request_duration_seconds`` (histogram, the same labels
  without ``code``; a watch is observed when it ends);
- ``apiserver_current_inflight_requests{request_kind}`` (``readOnly``, ``mutating``: requests
  being served now) and ``apiserver_dropped_requests_total{request_kind}`` (429s);
- ``apiserver_longrunning_requests{verb, group, version, resource, subresource, scope,
  component}``: open watches;
- ``apiserver_storage_objects{resource}``: objects stored per resource (``configmaps``,
  ``widgets.example.com``), read from the watch cache when scraped;
- ``setpoint_open_connections`` and ``setpoint_closed_connections_total{reason}``
  (``header_timeout``, ``idle_timeout``, ``evicted``, ``refused``): the connection guard's.

Verbs are kube-apiserver's reported verbs: ``GET`` (one object), ``LIST``, ``WATCH``,
``POST``, ``PUT``, ``PATCH``, ``APPLY`` (a server-side apply patch), ``DELETE`` (of an object
or a collection); any other method is ``other``. ``scope`` is ``resource`` (a named object, or
a create), ``namespace`` or ``cluster``; ``component`` is ``apiserver``.

Invariant: label values come from the server's own vocabulary, never from what a client
chose: requests are counted only for served resources and their known subresources, and for
a fixed set of non-resource paths (with the path as ``subresource`` and empty ``scope``, as
kube-apiserver reports them). A request to an unknown path is not counted, so no client can
make the series grow. Non-guarantees: kube-apiserver reports the in-flight gauges as the
maximum over the last second, these are the current values; response sizes and the other
apiserver families are not exported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from setpoint.apimachinery import prometheus
from setpoint.server import connections, limits
from setpoint.server.request_info import RequestInfo

COMPONENT: Final = "apiserver"
CONTENT_TYPE: Final = prometheus.CONTENT_TYPE

#: kube-apiserver's buckets for apiserver_request_duration_seconds
REQUEST_DURATION_BUCKETS: Final = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0,
    8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)

#: the non-resource paths that are counted (the path is the ``subresource`` label)
NON_RESOURCE_PATHS: Final = frozenset({
    "/", "/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/metrics",
    "/openapi/v2", "/openapi/v3"})

_VERBS: Final = {"POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE"}
_APPLY_PATCH: Final = "application/apply-patch+yaml"

#: (verb, dry_run, group, version, resource, subresource, scope)
Labels = tuple[str, str, str, str, str, str, str]


def _dry_run(values: list[str]) -> str:
    if not values:
        return ""
    if any(v != "All" for v in values):
        return "invalid"
    return "All"


def resource_labels(method: str, ri: RequestInfo, *, watch: bool, dry_run: list[str],
                    content_type: str | None) -> Labels:
    """The labels of a request to a served resource."""
    if method in ("GET", "HEAD"):
        verb = "GET" if ri.name else ("WATCH" if watch else "LIST")
    elif method == "PATCH" and content_type is not None and \
            content_type.split(";", 1)[0].strip().lower() == _APPLY_PATCH:
        verb = "APPLY"
    else:
        verb = _VERBS.get(method, "other")
    if ri.name or method == "POST":
        scope = "resource"
    elif ri.namespace:
        scope = "namespace"
    else:
        scope = "cluster"
    return (verb, _dry_run(dry_run), ri.group, ri.version, ri.resource, ri.subresource, scope)


def non_resource_labels(method: str, path: str) -> Labels | None:
    """The labels of a request to a counted non-resource path, or None."""
    path = path.rstrip("/") or "/"
    if path not in NON_RESOURCE_PATHS:
        return None
    verb = "GET" if method in ("GET", "HEAD") else _VERBS.get(method, "other")
    return (verb, "", "", "", "", path, "")


class ApiMetrics:
    """The families of one API server; see the module docstring."""

    def __init__(self, registry: prometheus.MetricsRegistry,
                 inflight: limits.InflightLimiter,
                 stored_objects: Callable[[], Iterable[tuple[str, int]]]) -> None:
        self.registry = registry
        request_labels = ("verb", "dry_run", "group", "version", "resource", "subresource",
                          "scope", "component")
        self.requests = registry.counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            (*request_labels, "code"))
        self.duration = registry.histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.", request_labels,
            buckets=REQUEST_DURATION_BUCKETS)
        self.longrunning = registry.gauge(
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, "
            "version, resource, scope and component. Not all requests are tracked this way.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component"))
        self.dropped = registry.counter(
            "apiserver_dropped_requests_total",
            "Number of requests dropped with 'Try again later' response", ("request_kind",))
        current = registry.gauge(
            "apiserver_current_inflight_requests",
            "Number of requests currently being served by this apiserver per request kind.",
            ("request_kind",))
        for kind in (limits.Kind.READ_ONLY, limits.Kind.MUTATING):
            current.set_function(functools.partial(_in_flight, inflight, kind), kind.value)
            self.dropped.touch(kind.value)
        objects = registry.gauge(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
            ("resource",))

        def collect_objects() -> None:
            objects.clear()
            for resource, count in stored_objects():
                objects.set(count, resource)

        registry.add_collector(collect_objects)
        self.open_connections = registry.gauge(
            "setpoint_open_connections", "Number of open client connections.")
        self.closed_connections = registry.counter(
            "setpoint_closed_connections_total",
            "Connections the server closed in self-defense, by reason.", ("reason",))
        for reason in connections.REASONS:
            self.closed_connections.touch(reason)
        #: the series of each (labels, code) seen, bound once (as many as the series)
        self._bound: dict[tuple[Labels, int], tuple[prometheus.BoundCounter,
                                                    prometheus.BoundHistogram]] = {}

    def observe(self, labels: Labels, code: int, seconds: float) -> None:
        """A finished request."""
        bound = self._bound.get((labels, code))
        if bound is None:
            bound = self._bound[(labels, code)] = (
                self.requests.bind(*labels, COMPONENT, str(code)),
                self.duration.bind(*labels, COMPONENT))
        bound[0].inc()
        bound[1].observe(seconds)

    def dropped_request(self, kind: limits.Kind) -> None:
        self.dropped.inc(kind.value)

    def watch_started(self, labels: Labels) -> None:
        self.longrunning.inc(*_longrunning(labels))

    def watch_ended(self, labels: Labels) -> None:
        self.longrunning.dec(*_longrunning(labels))

    def attach_connections(self, open_connections: Callable[[], int]) -> None:
        self.open_connections.set_function(lambda: float(open_connections()))

    def connection_closed(self, reason: str) -> None:
        self.closed_connections.inc(reason)

    def render(self) -> str:
        return self.registry.render()


def _in_flight(inflight: limits.InflightLimiter, kind: limits.Kind) -> float:
    return float(inflight.in_flight(kind))


def _longrunning(labels: Labels) -> tuple[str, ...]:
    verb, _dry, group, version, resource, subresource, scope = labels
    return (verb, group, version, resource, subresource, scope, COMPONENT)


def qualified_counts(counts: Mapping[tuple[str, str], int]) -> list[tuple[str, int]]:
    """``apiserver_storage_objects``' resource names: ``resource.group`` (core: no group)."""
    return [(f"{resource}.{group}" if group else resource, n)
            for (group, resource), n in sorted(counts.items())]
