"""Prometheus metrics with controller-runtime's names, in the text exposition format.

A :class:`MetricsRegistry` belongs to one manager (there is no global registry) and renders
every family it holds with :meth:`MetricsRegistry.render` (text format 0.0.4, what
``/metrics`` serves). It has three kinds of family, each with fixed label names:
:class:`Counter`, :class:`Gauge` (also computed at render time with
:meth:`Gauge.set_function`) and :class:`Histogram` (cumulative buckets, ``_sum``, ``_count``).

This is a small writer of its own rather than ``prometheus_client``: the runtime needs a
dozen families, no extra dependency, no process-wide default registry to keep out of tests,
and gauges read from live objects (the queues) when scraped.

The families, as controller-runtime and client-go's workqueue name them:

- per controller (label ``controller``): ``controller_runtime_reconcile_total`` (also
  ``result`` = success | error | requeue | requeue_after), ``..._reconcile_errors_total``,
  ``..._terminal_reconcile_errors_total``, ``..._reconcile_time_seconds`` (histogram),
  ``..._active_workers``, ``..._max_concurrent_reconciles``;
- per work queue (labels ``name``, ``controller``): ``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_retries_total``,
  ``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``;
- ``leader_election_master_status{name}``: 1 while this manager holds the lease.

Invariants: a family's label names are fixed when it is created; asking the registry for an
existing name returns it if the kind and labels agree and raises otherwise. Output is sorted
(families by name, series by label values): two renders of the same state are identical.
Counters only go up.

Non-guarantees: no timestamps, no exemplars, no OpenMetrics format. Series are never removed:
one per controller and queue name, which are few.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from setpoint.runtime import queue as rtqueue

#: controller-runtime's buckets for controller_runtime_reconcile_time_seconds
RECONCILE_TIME_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
#: client-go's workqueue latency buckets: 10 ns to 1000 s, x10
QUEUE_LATENCY_BUCKETS: Final = tuple(float(f"1e{exp}") for exp in range(-8, 4))

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

LabelValues = tuple[str, ...]


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it (``+Inf``, ``NaN``, integers without ``.0``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Family:
    kind = "untyped"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str]) -> None:
        self.name = name
        self.help = help_text
        self.label_names = tuple(label_names)

    def _key(self, values: Sequence[str]) -> LabelValues:
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {values!r}")
        return tuple(str(v) for v in values)

    def samples(self) -> Iterable[str]:
        raise NotImplementedError

    def render(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}",
                f"# TYPE {self.name} {self.kind}", *self.samples()]


class Counter(_Family):
    """A value per label set that only goes up."""

    kind = "counter"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[LabelValues, float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def touch(self, *labels: str) -> None:
        """Make the series exist (at 0) so it is exported before its first increment."""
        self._values.setdefault(self._key(labels), 0.0)

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> Iterable[str]:
        for key in sorted(self._values):
            yield f"{self.name}{_labels(self.label_names, key)} {format_value(self._values[key])}"


class Gauge(_Family):
    """A value per label set that goes up and down, or is computed when rendered."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[LabelValues, float] = {}
        self._functions: dict[LabelValues, Callable[[], float]] = {}

    def set(self, value: float, *labels: str) -> None:
        self._values[self._key(labels)] = float(value)

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        key = self._key(labels)
        self._values[key] = self._values.get(key, 0.0) + amount

    def dec(self, *labels: str, amount: float = 1.0) -> None:
        self.inc(*labels, amount=-amount)

    def set_function(self, func: Callable[[], float], *labels: str) -> None:
        """Compute the series' value at each render (replaces a set value)."""
        key = self._key(labels)
        self._values.pop(key, None)
        self._functions[key] = func

    def value(self, *labels: str) -> float:
        key = self._key(labels)
        func = self._functions.get(key)
        return float(func()) if func is not None else self._values.get(key, 0.0)

    def samples(self) -> Iterable[str]:
        for key in sorted({*self._values, *self._functions}):
            yield f"{self.name}{_labels(self.label_names, key)} {format_value(self.value(*key))}"


class _Series:
    __slots__ = ("count", "counts", "sum")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * buckets
        self.count = 0
        self.sum = 0.0


class Histogram(_Family):
    """Observations counted into cumulative ``le`` buckets, with their sum and count."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = (), *,
                 buckets: Sequence[float] = RECONCILE_TIME_BUCKETS) -> None:
        super().__init__(name, help_text, label_names)
        if "le" in self.label_names:
            raise ValueError("'le' is reserved for histogram buckets")
        bounds = sorted(float(b) for b in buckets)
        if not bounds or len(set(bounds)) != len(bounds):
            raise ValueError("a histogram needs distinct buckets")
        self.buckets = tuple(bounds)
        self._series: dict[LabelValues, _Series] = {}

    def _get(self, labels: Sequence[str]) -> _Series:
        key = self._key(labels)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _Series(len(self.buckets))
        return series

    def touch(self, *labels: str) -> None:
        self._get(labels)

    def observe(self, value: float, *labels: str) -> None:
        series = self._get(labels)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                series.counts[i] += 1
                break
        series.count += 1
        series.sum += value

    def count(self, *labels: str) -> int:
        series = self._series.get(self._key(labels))
        return series.count if series else 0

    def samples(self) -> Iterable[str]:
        for key in sorted(self._series):
            series = self._series[key]
            cumulative = 0
            for bound, n in zip(self.buckets, series.counts, strict=True):
                cumulative += n
                le = f'le="{format_value(bound)}"'
                yield f"{self.name}_bucket{_labels(self.label_names, key, le)} {cumulative}"
            inf = 'le="+Inf"'
            yield f"{self.name}_bucket{_labels(self.label_names, key, inf)} {series.count}"
            yield f"{self.name}_sum{_labels(self.label_names, key)} {format_value(series.sum)}"
            yield f"{self.name}_count{_labels(self.label_names, key)} {series.count}"


class MetricsRegistry:
    """The metric families of one manager."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def _family(self, cls: type[_Family], name: str, help_text: str,
                label_names: Sequence[str], **kwargs: Sequence[float]) -> _Family:
        existing = self._families.get(name)
        if existing is not None:
            if type(existing) is not cls or existing.label_names != tuple(label_names):
                raise ValueError(f"metric {name} exists with another type or labels")
            return existing
        family = cls(name, help_text, label_names, **kwargs)
        self._families[name] = family
        return family

    def counter(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Counter:
        family = self._family(Counter, name, help_text, label_names)
        assert isinstance(family, Counter)
        return family

    def gauge(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> Gauge:
        family = self._family(Gauge, name, help_text, label_names)
        assert isinstance(family, Gauge)
        return family

    def histogram(self, name: str, help_text: str, label_names: Sequence[str] = (), *,
                  buckets: Sequence[float] = RECONCILE_TIME_BUCKETS) -> Histogram:
        family = self._family(Histogram, name, help_text, label_names, buckets=buckets)
        assert isinstance(family, Histogram)
        return family

    def get(self, name: str) -> Counter | Gauge | Histogram | None:
        family = self._families.get(name)
        assert family is None or isinstance(family, Counter | Gauge | Histogram)
        return family

    def render(self) -> str:
        """Every family in the text exposition format, sorted by name."""
        lines: list[str] = []
        for name in sorted(self._families):
            lines.extend(self._families[name].render())
        return "\n".join(lines) + "\n" if lines else ""


# --- controller-runtime's families ---------------------------------------------------------

RESULT_SUCCESS: Final = "success"
RESULT_ERROR: Final = "error"
RESULT_REQUEUE: Final = "requeue"
RESULT_REQUEUE_AFTER: Final = "requeue_after"
RESULTS: Final = (RESULT_SUCCESS, RESULT_ERROR, RESULT_REQUEUE, RESULT_REQUEUE_AFTER)


class ControllerMetrics:
    """The ``controller_runtime_*`` series of one controller."""

    def __init__(self, registry: MetricsRegistry, controller: str) -> None:
        self.controller = controller
        self.total = registry.counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller", ("controller", "result"))
        self.errors = registry.counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller", ("controller",))
        self.terminal_errors = registry.counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller", ("controller",))
        self.time = registry.histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller", ("controller",),
            buckets=RECONCILE_TIME_BUCKETS)
        self.active = registry.gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller", ("controller",))
        self.max_concurrent = registry.gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller", ("controller",))
        for result in RESULTS:  # exported at 0 from the start, as controller-runtime does
            self.total.touch(controller, result)
        self.errors.touch(controller)
        self.terminal_errors.touch(controller)
        self.time.touch(controller)
        self.active.set(0, controller)

    def set_workers(self, workers: int) -> None:
        self.max_concurrent.set(workers, self.controller)

    def worker_started(self) -> None:
        self.active.inc(self.controller)

    def worker_finished(self) -> None:
        self.active.dec(self.controller)

    def reconciled(self, result: str, seconds: float) -> None:
        self.total.inc(self.controller, result)
        self.time.observe(seconds, self.controller)

    def error(self, *, terminal: bool) -> None:
        self.errors.inc(self.controller)
        if terminal:
            self.terminal_errors.inc(self.controller)


class WorkQueueMetrics(rtqueue.QueueMetrics):
    """The ``workqueue_*`` series of one queue; implements the queue's ``QueueMetrics``."""

    def __init__(self, registry: MetricsRegistry, name: str) -> None:
        self.labels = (name, name)
        label_names = ("name", "controller")
        self.depth = registry.gauge("workqueue_depth", "Current depth of workqueue",
                                    label_names)
        self.adds = registry.counter("workqueue_adds_total",
                                     "Total number of adds handled by workqueue", label_names)
        self.queue_latency = registry.histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            label_names, buckets=QUEUE_LATENCY_BUCKETS)
        self.work_duration = registry.histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            label_names, buckets=QUEUE_LATENCY_BUCKETS)
        self.retries = registry.counter("workqueue_retries_total",
                                        "Total number of retries handled by workqueue",
                                        label_names)
        self.unfinished = registry.gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            label_names)
        self.longest = registry.gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            label_names)
        self.depth.set(0, *self.labels)
        self.adds.touch(*self.labels)
        self.retries.touch(*self.labels)
        self.queue_latency.touch(*self.labels)
        self.work_duration.touch(*self.labels)
        self.unfinished.set(0, *self.labels)
        self.longest.set(0, *self.labels)

    def attach(self, queue: rtqueue.WorkQueue[rtqueue.K]) -> None:
        """Read the in-progress gauges from ``queue`` at each render."""
        self.unfinished.set_function(queue.unfinished_work_seconds, *self.labels)
        self.longest.set_function(queue.longest_running_processor_seconds, *self.labels)

    def on_add(self) -> None:
        self.adds.inc(*self.labels)

    def on_depth(self, depth: int) -> None:
        self.depth.set(depth, *self.labels)

    def on_queue_latency(self, seconds: float) -> None:
        self.queue_latency.observe(seconds, *self.labels)

    def on_work_duration(self, seconds: float) -> None:
        self.work_duration.observe(seconds, *self.labels)

    def on_retry(self) -> None:
        self.retries.inc(*self.labels)


class LeaderMetrics:
    """``leader_election_master_status{name}``: 1 while leading, else 0."""

    def __init__(self, registry: MetricsRegistry, name: str) -> None:
        self.name = name
        self.status = registry.gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. "
            "Please make sure to group by name.", ("name",))
        self.status.set(0, name)

    def set_leading(self, leading: bool) -> None:
        self.status.set(1 if leading else 0, self.name)
