"""Kubernetes Events about the objects a controller manages (what ``kubectl describe`` shows).

An :class:`EventRecorder` writes core/v1 ``Event`` objects: ``involvedObject`` (apiVersion,
kind, namespace, name, uid, resourceVersion), ``reason``, ``message``, ``type`` (``Normal`` or
``Warning``), ``source.component``, ``reportingComponent``, ``reportingInstance``,
``firstTimestamp``, ``lastTimestamp`` and ``count``.

Aggregation, as client-go's recorder does it: a repeat of the same (object, reason, message,
type) within ``window`` seconds (10 minutes) of the previous one **patches** the existing Event
(``count + 1`` and a new ``lastTimestamp``) instead of creating another. A repeat after the
window, or one whose Event was deleted meanwhile (Events expire on the server), creates a new
Event. The recorder remembers at most ``max_entries`` series (least recently used are
forgotten first; a forgotten series simply starts a new Event).

Invariants: recording never raises (a failed write is logged and dropped: an Event is a
report, not state) and never mutates the object it describes. Writes of one series are
serialised, so concurrent repeats increment the count one by one. Time is read from the
injected clock.

Non-guarantees: Events are best effort. The count lives in this process: two recorders (two
replicas, a restart) each start their own series. Recording awaits the write, so it adds one
request's latency to the caller. Event names are ``<object name>.<hex nanoseconds>`` as
client-go makes them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from setpoint import client as sp_client
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]
EventType = Literal["Normal", "Warning"]

NORMAL: Final = "Normal"
WARNING: Final = "Warning"
EVENT: Final = ("v1", "Event")

#: client-go's aggregation window and cache size
DEFAULT_WINDOW: Final = 600.0
DEFAULT_MAX_ENTRIES: Final = 4096
#: longer messages are cut (the events.k8s.io API rejects notes over 1 kB)
MAX_MESSAGE: Final = 1024

#: (apiVersion, kind, namespace, name, uid, reason, message, type)
SeriesKey = tuple[str, ...]


@dataclass(slots=True)
class _Series:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    name: str = ""
    namespace: str = ""
    count: int = 0
    last_seen: float = 0.0


def involved_object(obj: Obj) -> dict[str, Any]:
    """The ``involvedObject`` reference of ``obj``."""
    metadata = obj.get("metadata") or {}
    ref: dict[str, Any] = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                           "name": metadata.get("name", "")}
    for src, dst in (("namespace", "namespace"), ("uid", "uid"),
                     ("resourceVersion", "resourceVersion")):
        if metadata.get(src):
            ref[dst] = metadata[src]
    return ref


class EventRecorder:
    """Records Events for one component (a controller's name); see the module docstring."""

    def __init__(self, client: sp_client.Client, component: str, *,
                 instance: str | None = None, clock: base_clock.Clock | None = None,
                 window: float = DEFAULT_WINDOW,
                 max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if not component:
            raise ValueError("an event recorder needs a component name")
        if window <= 0 or max_entries < 1:
            raise ValueError("window must be positive and max_entries at least 1")
        self.client = client
        self.component = component
        self.instance = instance or component
        self._clock: base_clock.Clock = clock or base_clock.SystemClock()
        self._window = window
        self._max_entries = max_entries
        self._series: OrderedDict[SeriesKey, _Series] = OrderedDict()
        self._last_nanos = 0

    async def normal(self, obj: Obj, reason: str, message: str) -> None:
        await self.event(obj, NORMAL, reason, message)

    async def warning(self, obj: Obj, reason: str, message: str) -> None:
        await self.event(obj, WARNING, reason, message)

    async def event(self, obj: Obj, type_: EventType, reason: str, message: str) -> None:
        """Record that ``reason``/``message`` happened to ``obj``; never raises."""
        if type_ not in (NORMAL, WARNING):
            raise ValueError(f"an event type is Normal or Warning, not {type_!r}")
        ref = involved_object(obj)
        if not ref["name"]:
            logger.warning("not recording %s: the object has no name", reason)
            return
        message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
        key: SeriesKey = (ref["apiVersion"], ref["kind"], ref.get("namespace", ""), ref["name"],
                          ref.get("uid", ""), reason, message, type_)
        series = self._entry(key)
        async with series.lock:
            try:
                await self._record(series, ref, type_, reason, message)
            except Exception as e:
                logger.warning("could not record event %s for %s %s: %s", reason, ref["kind"],
                               ref["name"], e)

    def _entry(self, key: SeriesKey) -> _Series:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series()
            while len(self._series) > self._max_entries:
                self._series.popitem(last=False)
        else:
            self._series.move_to_end(key)
        return series

    def _nanos(self) -> int:
        """Event-name nanoseconds, made strictly increasing so names never collide here."""
        now = self._clock.now()
        nanos = int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1000
        self._last_nanos = max(nanos, self._last_nanos + 1)
        return self._last_nanos

    async def _record(self, series: _Series, ref: dict[str, Any], type_: str, reason: str,
                      message: str) -> None:
        mono = self._clock.monotonic()
        stamp = timeutil.format_time(self._clock.now())
        if series.name and mono - series.last_seen <= self._window:
            count = series.count + 1
            try:
                await self.client.patch(EVENT, series.name, {"count": count,
                                                             "lastTimestamp": stamp},
                                        namespace=series.namespace)
            except errors.NotFound:
                pass  # expired or deleted: start a new Event below
            else:
                series.count = count
                series.last_seen = mono
                return
        namespace = ref.get("namespace") or "default"
        for _ in range(3):
            name = f"{ref['name']}.{self._nanos():x}"
            body = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref, "reason": reason, "message": message, "type": type_,
                "source": {"component": self.component},
                "reportingComponent": self.component, "reportingInstance": self.instance,
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            }
            try:
                await self.client.create(body, namespace=namespace)
            except errors.AlreadyExists:
                continue  # another recorder took the name: take the next nanosecond
            series.name, series.namespace, series.count, series.last_seen = (
                name, namespace, 1, mono)
            return
        raise errors.AlreadyExists(f"no free event name for {ref['name']}")
