"""Reconciles published as Events: what a controller did to an object, where any client sees it.

A :class:`ReconcileEvents` belongs to one controller. After each reconcile of an object that
is still in the controller's cache, the engine hands it the object and the reconcile's
:class:`~setpoint.runtime.history.Entry`; it writes an ``events.k8s.io/v1`` Event:

- ``regarding``: the object (apiVersion, kind, namespace, name, uid, resourceVersion);
- ``reportingController``: the controller's name; ``reportingInstance``: this replica;
- ``action``: ``Reconcile``;
- ``reason``: ``Reconciled`` (type ``Normal``) for a reconcile that returned, whatever it
  asked next; ``ReconcileFailed`` (type ``Warning``) for one that raised;
- ``note``: the result, the duration and the triggers, e.g. ``success in 12.3 ms;
  triggered by update by for Book of default/dune`` (and the error for a failure);
- ``eventTime``: when the reconcile started.

Any Kubernetes client reads these: ``kubectl events``, ``kubectl describe``, the UI's
timeline (which draws them as reconcile rows).

**Series**, as Kubernetes' event series: a repeat of the same (object, reason, note) within
``series_window`` of its previous occurrence does not write a new Event; it counts into the
first one's ``series`` (``count`` and ``lastObservedTime``). The series is written at most once
per ``series_interval`` (the occurrence that finds the last write older than that writes the
current count), so a hot object costs at most one write per interval and series.

**Rate bound per object**: each object may start at most ``burst`` new Events, refilled by
one every ``refill_seconds``. A reconcile that would start one more when the object's budget
is spent counts instead into the series of the object's latest Event of the same reason
(its note then describes the first reconcile of that series, the count all of them), or,
with none, is not published (counted in :attr:`ReconcileEvents.dropped`).

**Rate bound per controller**: all the controller's Event writes (creates and series
writes) share one budget of ``controller_burst`` writes, refilled at ``controller_rate`` per
second, so publishing never adds more than that to the server's load, whatever the number
of objects: under a bulk load (thousands of objects created at once), most reconciles are
not published (counted in :attr:`ReconcileEvents.dropped`; a series write that finds the
budget spent waits for a later repeat).

Invariants: publishing never raises (a failed write is logged and dropped: an Event is a
report, not state) and never mutates the object. Memory is bounded: at most ``max_series``
series are remembered (least recently used forgotten first; a forgotten series starts a new
Event) and ``max_objects`` object budgets. Writes of one series are serialised. Time comes
from the injected clock.

Non-guarantees: best effort, like every Event. The count on the server lags by the
occurrences of the last ``series_interval`` (they are written with the next occurrence after
it, none if there is none). Series live in this process: two replicas or a restart each
start their own. An Event's note is immutable (as Kubernetes' ``events.k8s.io`` validation
requires), so a series' note describes its first reconcile. A reconcile of an object gone
from the cache (deleted) is not published. The engine awaits publishing in the worker,
after the reconcile (whose recorded duration does not include it): a write delays that
worker's next request by one request's latency.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint import client as sp_client
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors, timeutil
from setpoint.runtime import events
from setpoint.runtime import history as rthistory
from setpoint.runtime.bucket import Bucket

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]

EVENT: Final = ("events.k8s.io/v1", "Event")
ACTION: Final = "Reconcile"
REASON_OK: Final = "Reconciled"
REASON_FAILED: Final = "ReconcileFailed"

#: (kind, namespace, name, uid): one object
ObjectKey = tuple[str, str, str, str]
#: (object, reason, note): one series
SeriesKey = tuple[ObjectKey, str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileEventsConfig:
    """How a manager publishes reconciles as Events (``None`` in its place: not at all)."""

    #: new Events an object may start at once, and one more every ``refill_seconds``
    burst: int = 10
    refill_seconds: float = 10.0
    #: a series' count is written at most once per this many seconds
    series_interval: float = 10.0
    #: a repeat later than this after the previous one starts a new Event (client-go's 6 min)
    series_window: float = 360.0
    #: series and object budgets remembered (least recently used forgotten first)
    max_series: int = 4096
    max_objects: int = 4096
    #: Event writes (creates and series writes) of the whole controller: at most this many
    #: at once, refilled at ``controller_rate`` per second
    controller_burst: int = 100
    controller_rate: float = 10.0

    def __post_init__(self) -> None:
        if not 1 <= self.burst <= 1000:
            raise ValueError("burst must be between 1 and 1000")
        for name in ("refill_seconds", "series_interval", "series_window"):
            if not 0 < getattr(self, name) <= 86400:
                raise ValueError(f"{name} must be positive and at most a day")
        if not 1 <= self.max_series <= 1_000_000 or not 1 <= self.max_objects <= 1_000_000:
            raise ValueError("max_series and max_objects must be between 1 and 1,000,000")
        if not 1 <= self.controller_burst <= 100_000:
            raise ValueError("controller_burst must be between 1 and 100,000")
        if not 0 < self.controller_rate <= 100_000:
            raise ValueError("controller_rate must be positive and at most 100,000 per second")


def describe(entry: rthistory.Entry) -> str:
    """The note of a reconcile: result, duration, triggers, and the error of a failure."""
    note = f"{entry.result} in {entry.seconds * 1000:.1f} ms"
    if entry.triggers:
        note += "; triggered by " + ", ".join(str(t) for t in entry.triggers)
        if entry.merged > len(entry.triggers):
            note += f" ({entry.merged} adds merged)"
    if entry.error:
        note += f"; error: {entry.error}"
    if len(note) > events.MAX_MESSAGE:
        note = note[:events.MAX_MESSAGE - 1] + "…"
    return note


#: room left in a 253-character name for ``.<hex nanoseconds>``
MAX_NAME_PREFIX: Final = 253 - 17


def name_prefix(name: str) -> str:
    """``name`` as the first label of a DNS-subdomain Event name: lower case, characters
    other than ``a-z0-9-`` (dots too: an empty or hyphen-led label is invalid) replaced by
    ``-``, starting and ending alphanumeric, bounded."""
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "-") else "-"
                      for c in name.lower()[:MAX_NAME_PREFIX])
    return cleaned.strip("-") or "object"


def _note_key(entry: rthistory.Entry) -> str:
    """What makes two reconciles "the same" for a series: the note without the duration."""
    triggers = ", ".join(str(t) for t in entry.triggers)
    return f"{entry.result}|{triggers}|{entry.error}"


@dataclass(slots=True)
class _Series:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    name: str = ""
    namespace: str = ""
    count: int = 0
    written: int = 0
    first_mono: float = 0.0
    last_mono: float = 0.0
    last_write: float = 0.0
    last_observed: str = ""


@dataclass(slots=True)
class _Budget:
    bucket: Bucket
    #: reason -> the series key of the object's latest Event of that reason
    latest: dict[str, SeriesKey] = field(default_factory=dict)


class ReconcileEvents:
    """Publishes one controller's reconciles as Events; see the module docstring."""

    def __init__(self, client: sp_client.Client, controller: str, *, instance: str = "",
                 clock: base_clock.Clock | None = None,
                 config: ReconcileEventsConfig | None = None) -> None:
        if not controller:
            raise ValueError("reconcile events need a controller name")
        self.client = client
        self.controller = controller
        self.instance = instance or controller
        self.config = config or ReconcileEventsConfig()
        self._clock: base_clock.Clock = clock or base_clock.SystemClock()
        self._series: OrderedDict[SeriesKey, _Series] = OrderedDict()
        self._budgets: OrderedDict[ObjectKey, _Budget] = OrderedDict()
        self._last_nanos = 0
        self._writes = Bucket.full(self.config.controller_rate, self.config.controller_burst,
                                   self._clock.monotonic())
        #: reconciles not published (their object's or the controller's budget was spent)
        self.dropped = 0

    async def publish(self, obj: Obj, entry: rthistory.Entry) -> None:
        """Publish one reconcile of ``obj`` (bounded as the module docstring says); never
        raises."""
        try:
            await self._publish(obj, entry)
        except Exception as e:
            logger.warning("could not publish a reconcile of %s by %s: %s",
                           (obj.get("metadata") or {}).get("name"), self.controller, e)

    async def _publish(self, obj: Obj, entry: rthistory.Entry) -> None:
        ref = events.involved_object(obj)
        if not ref["name"]:
            return
        failed = entry.result == "error"
        reason = REASON_FAILED if failed else REASON_OK
        okey: ObjectKey = (ref["kind"], ref.get("namespace", ""), ref["name"],
                           ref.get("uid", ""))
        skey: SeriesKey = (okey, reason, _note_key(entry))
        mono = self._clock.monotonic()
        series = self._live(skey, mono)
        if series is None and okey not in self._budgets and self._writes.refill(mono) < 1:
            # an object with nothing to count into while the controller's writes are spent
            # (a bulk load): dropped, as below, without making it a budget first
            self.dropped += 1
            return
        observed = timeutil.format_micro_time(self._clock.now())
        budget = self._budget(okey, mono)
        fresh = False  # a new series, its write already taken from the budgets
        if series is None:
            if budget.bucket.tokens >= 1 and self._take_write(mono):
                budget.bucket.take(mono)
                series = self._remember(skey, _Series(first_mono=mono))
                budget.latest[reason] = skey
                fresh = True
            else:
                series = self._live(budget.latest.get(reason), mono)
                if series is None:
                    self.dropped += 1
                    return
        series.count += 1
        series.last_mono = mono
        series.last_observed = observed
        async with series.lock:
            if not series.name:
                # a new series, or one whose Event could not be written (a refusal, the
                # server away): another try costs a write of the controller's budget
                if fresh or self._take_write(mono):
                    await self._create(series, ref, reason, describe(entry), observed)
            elif (series.count > series.written
                  and mono - series.last_write >= self.config.series_interval
                  and self._take_write(mono)):
                await self._write_series(series, ref, reason, entry, observed)

    def _take_write(self, mono: float) -> bool:
        """Take one write from the controller's budget; False when it is spent."""
        return self._writes.take(mono)

    def _live(self, key: SeriesKey | None, mono: float) -> _Series | None:
        """The remembered series ``key`` if its last occurrence is within the window."""
        if key is None:
            return None
        series = self._series.get(key)
        if series is None:
            return None
        if series.count and mono - series.last_mono > self.config.series_window:
            del self._series[key]
            return None
        self._series.move_to_end(key)
        return series

    def _remember(self, key: SeriesKey, series: _Series) -> _Series:
        self._series[key] = series
        while len(self._series) > self.config.max_series:
            self._series.popitem(last=False)
        return series

    def _budget(self, key: ObjectKey, mono: float) -> _Budget:
        budget = self._budgets.get(key)
        if budget is None:
            budget = self._budgets[key] = _Budget(
                Bucket.full(1.0 / self.config.refill_seconds, self.config.burst, mono))
            while len(self._budgets) > self.config.max_objects:
                self._budgets.popitem(last=False)
            return budget
        self._budgets.move_to_end(key)
        budget.bucket.refill(mono)
        return budget

    def _event_name(self, object_name: str) -> str:
        """``<object name>.<hex nanoseconds>``, as client-go names Events, with the object's
        name made a DNS label (``system:basic-user`` gives ``system-basic-user``)."""
        return f"{name_prefix(object_name)}.{self._nanos():x}"

    def _nanos(self) -> int:
        """Event-name nanoseconds, strictly increasing so names never collide here."""
        now = self._clock.now()
        nanos = int(now.timestamp()) * 1_000_000_000 + now.microsecond * 1000
        self._last_nanos = max(nanos, self._last_nanos + 1)
        return self._last_nanos

    async def _create(self, series: _Series, ref: dict[str, Any], reason: str, note: str,
                      observed: str) -> None:
        namespace = ref.get("namespace") or "default"
        count = series.count
        for _ in range(3):
            name = self._event_name(ref["name"])
            body: dict[str, Any] = {
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "regarding": ref, "eventTime": observed,
                "reportingController": self.controller, "reportingInstance": self.instance,
                "action": ACTION, "reason": reason,
                "type": events.WARNING if reason == REASON_FAILED else events.NORMAL,
                "note": note,
            }
            if count > 1:
                body["series"] = {"count": count, "lastObservedTime": observed}
            try:
                await self.client.create(body, resource=EVENT, namespace=namespace)
            except errors.AlreadyExists:
                continue
            series.name, series.namespace = name, namespace
            series.written, series.last_write = count, self._clock.monotonic()
            return
        raise errors.AlreadyExists(f"no free event name for {ref['name']}")

    async def _write_series(self, series: _Series, ref: dict[str, Any], reason: str,
                            entry: rthistory.Entry, observed: str) -> None:
        count = series.count
        try:
            await self.client.patch(EVENT, series.name, {"series": {
                "count": count, "lastObservedTime": observed}}, namespace=series.namespace)
        except errors.NotFound:
            # the Event expired or was deleted: this reconcile starts a new one
            series.name, series.count, series.written = "", 1, 0
            await self._create(series, ref, reason, describe(entry), observed)
            return
        series.written, series.last_write = count, self._clock.monotonic()
