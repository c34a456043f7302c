"""Prometheus metrics with controller-runtime's names.

The writer (:class:`MetricsRegistry`, :class:`Counter`, :class:`Gauge`, :class:`Histogram`,
the text exposition format) is :mod:`setpoint.apimachinery.prometheus`, re-exported here; a
registry belongs to one manager (there is no global registry).

The families, as controller-runtime and client-go's workqueue name them:

- per controller (label ``controller``): ``controller_runtime_reconcile_total`` (also
  ``result`` = success | error | requeue | requeue_after),
  ``controller_runtime_reconcile_triggers_total`` (also ``cause``, one of
  :data:`setpoint.runtime.triggers.CAUSES`: each reconcile counts once per distinct cause
  merged into it; setpoint's own), ``..._reconcile_errors_total``,
  ``..._terminal_reconcile_errors_total``, ``..._reconcile_time_seconds`` (histogram),
  ``..._active_workers``, ``..._max_concurrent_reconciles``;
- per work queue (labels ``name``, ``controller``): ``workqueue_depth``,
  ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
  ``workqueue_work_duration_seconds``, ``workqueue_retries_total``,
  ``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``;
- ``leader_election_master_status{name}``: 1 while this manager holds the lease.

Non-guarantees: series are never removed: one per controller and queue name, which are few.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

# the writer, re-exported: runtime code and operators name these from here
from setpoint.apimachinery.prometheus import CONTENT_TYPE as CONTENT_TYPE
from setpoint.apimachinery.prometheus import Counter as Counter
from setpoint.apimachinery.prometheus import Gauge as Gauge
from setpoint.apimachinery.prometheus import Histogram as Histogram
from setpoint.apimachinery.prometheus import MetricsRegistry as MetricsRegistry
from setpoint.apimachinery.prometheus import format_value as format_value
from setpoint.runtime import queue as rtqueue
from setpoint.runtime import triggers as rttriggers

#: controller-runtime's buckets for controller_runtime_reconcile_time_seconds
RECONCILE_TIME_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0)
#: client-go's workqueue latency buckets: 10 ns to 1000 s, x10
QUEUE_LATENCY_BUCKETS: Final = tuple(float(f"1e{exp}") for exp in range(-8, 4))

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
        self.by_cause = registry.counter(
            "controller_runtime_reconcile_triggers_total",
            "Reconciliations per controller and cause (a reconcile counts once per distinct "
            "cause merged into it)", ("controller", "cause"))
        # every series exported at 0 from the start, as controller-runtime does; bound
        # once, so a reconcile looks no label up
        self._total = {result: self.total.bind(controller, result) for result in RESULTS}
        self._by_cause = {cause: self.by_cause.bind(controller, cause)
                          for cause in rttriggers.CAUSES}
        self._errors = self.errors.bind(controller)
        self._terminal_errors = self.terminal_errors.bind(controller)
        self._time = self.time.bind(controller)
        self._active = self.active.bind(controller)
        self._max_concurrent = self.max_concurrent.bind(controller)

    def set_workers(self, workers: int) -> None:
        self._max_concurrent.set(workers)

    def worker_started(self) -> None:
        self._active.inc()

    def worker_finished(self) -> None:
        self._active.dec()

    def triggered(self, triggers: tuple[rttriggers.Trigger, ...]) -> None:
        if len(triggers) == 1:
            causes: Iterable[str] = (triggers[0].cause,)
        else:
            causes = {t.cause for t in triggers}
        for cause in causes:
            series = self._by_cause.get(cause)
            if series is None:  # a cause outside CAUSES: its own series, made on first use
                series = self._by_cause[cause] = self.by_cause.bind(self.controller, cause)
            series.inc()

    def reconciled(self, result: str, seconds: float) -> None:
        series = self._total.get(result)
        if series is None:
            series = self._total[result] = self.total.bind(self.controller, result)
        series.inc()
        self._time.observe(seconds)

    def error(self, *, terminal: bool) -> None:
        self._errors.inc()
        if terminal:
            self._terminal_errors.inc()


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
        self._depth = self.depth.bind(*self.labels)
        self._adds = self.adds.bind(*self.labels)
        self._retries = self.retries.bind(*self.labels)
        self._queue_latency = self.queue_latency.bind(*self.labels)
        self._work_duration = self.work_duration.bind(*self.labels)
        self.unfinished.set(0, *self.labels)
        self.longest.set(0, *self.labels)

    def attach(self, queue: rtqueue.WorkQueue[rtqueue.K]) -> None:
        """Read the in-progress gauges from ``queue`` at each render."""
        self.unfinished.set_function(queue.unfinished_work_seconds, *self.labels)
        self.longest.set_function(queue.longest_running_processor_seconds, *self.labels)

    def on_add(self) -> None:
        self._adds.inc()

    def on_depth(self, depth: int) -> None:
        self._depth.set(depth)

    def on_queue_latency(self, seconds: float) -> None:
        self._queue_latency.observe(seconds)

    def on_work_duration(self, seconds: float) -> None:
        self._work_duration.observe(seconds)

    def on_retry(self) -> None:
        self._retries.inc()


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
