"""The exposition writer: format, escaping, histograms, registry rules."""

from __future__ import annotations

import math

import pytest

from setpoint.runtime import metrics as m


def test_counter_and_gauge_exposition() -> None:
    registry = m.MetricsRegistry()
    c = registry.counter("things_total", "Things seen.\nTwo lines \\ here", ("kind",))
    c.inc("a")
    c.inc("b", amount=2.5)
    c.inc('we"ird\n')
    g = registry.gauge("level", "A level")
    g.set(3)
    assert registry.render() == "\n".join([
        "# HELP level A level",
        "# TYPE level gauge",
        "level 3",
        "# HELP things_total Things seen.\\nTwo lines \\\\ here",
        "# TYPE things_total counter",
        'things_total{kind="a"} 1',
        'things_total{kind="b"} 2.5',
        'things_total{kind="we\\"ird\\n"} 1',
    ]) + "\n"


def test_histogram_is_cumulative() -> None:
    registry = m.MetricsRegistry()
    h = registry.histogram("t_seconds", "Time", ("c",), buckets=(0.1, 1, 10))
    for v in (0.05, 0.1, 0.5, 20):
        h.observe(v, "x")
    assert registry.render().splitlines()[2:] == [
        't_seconds_bucket{c="x",le="0.1"} 2',
        't_seconds_bucket{c="x",le="1"} 3',
        't_seconds_bucket{c="x",le="10"} 3',
        't_seconds_bucket{c="x",le="+Inf"} 4',
        't_seconds_sum{c="x"} 20.65',
        't_seconds_count{c="x"} 4',
    ]
    assert h.count("x") == 4


def test_gauge_functions_are_read_at_render() -> None:
    registry = m.MetricsRegistry()
    g = registry.gauge("live", "Live", ("q",))
    value = [1.0]
    g.set_function(lambda: value[0], "a")
    value[0] = 7.0
    assert 'live{q="a"} 7' in registry.render()


def test_registry_rules() -> None:
    registry = m.MetricsRegistry()
    c = registry.counter("x_total", "X", ("a",))
    assert registry.counter("x_total", "X", ("a",)) is c
    with pytest.raises(ValueError, match="another type"):
        registry.gauge("x_total", "X", ("a",))
    with pytest.raises(ValueError, match="another type"):
        registry.counter("x_total", "X", ("b",))
    with pytest.raises(ValueError, match="labels"):
        c.inc()
    with pytest.raises(ValueError, match="only goes up"):
        c.inc("v", amount=-1)
    with pytest.raises(ValueError, match="reserved"):
        registry.histogram("h", "H", ("le",))


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1"), (0.25, "0.25"), (1e-08, "1e-08"), (math.inf, "+Inf"), (-math.inf, "-Inf"),
    (math.nan, "NaN"), (1e20, "1e+20")])
def test_format_value(value: float, text: str) -> None:
    assert m.format_value(value) == text


def test_controller_runtime_names() -> None:
    registry = m.MetricsRegistry()
    controller = m.ControllerMetrics(registry, "books")
    controller.set_workers(4)
    controller.reconciled("success", 0.02)
    controller.error(terminal=True)
    m.WorkQueueMetrics(registry, "books").on_retry()
    m.LeaderMetrics(registry, "lease").set_leading(True)
    text = registry.render()
    for line in [
        'controller_runtime_reconcile_total{controller="books",result="success"} 1',
        'controller_runtime_reconcile_total{controller="books",result="requeue_after"} 0',
        'controller_runtime_reconcile_errors_total{controller="books"} 1',
        'controller_runtime_terminal_reconcile_errors_total{controller="books"} 1',
        'controller_runtime_reconcile_time_seconds_count{controller="books"} 1',
        'controller_runtime_max_concurrent_reconciles{controller="books"} 4',
        'controller_runtime_active_workers{controller="books"} 0',
        'workqueue_retries_total{name="books",controller="books"} 1',
        'workqueue_depth{name="books",controller="books"} 0',
        'workqueue_unfinished_work_seconds{name="books",controller="books"} 0',
        'leader_election_master_status{name="lease"} 1',
    ]:
        assert line in text.splitlines(), line
