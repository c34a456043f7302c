"""The shared exposition writer: bucket edges, collectors, clearing gauges."""

from __future__ import annotations

from setpoint.apimachinery import prometheus


def test_observations_on_a_bucket_bound_count_in_that_bucket() -> None:
    registry = prometheus.MetricsRegistry()
    h = registry.histogram("d_seconds", "D", buckets=(0.1, 1.0))
    for value in (0.1, 1.0, 1.0000001, 0.0):
        h.observe(value)
    assert registry.render().splitlines()[2:6] == [
        'd_seconds_bucket{le="0.1"} 2',
        'd_seconds_bucket{le="1"} 3',
        'd_seconds_bucket{le="+Inf"} 4',
        "d_seconds_sum 2.1000001",
    ]


def test_histograms_default_to_prometheus_buckets() -> None:
    h = prometheus.MetricsRegistry().histogram("x_seconds", "X")
    assert h.buckets == prometheus.DEFAULT_BUCKETS


def test_collectors_refill_gauges_before_each_render() -> None:
    registry = prometheus.MetricsRegistry()
    objects = registry.gauge("objects", "Objects", ("resource",))
    current = {"a": 1, "b": 2}

    def collect() -> None:
        objects.clear()
        for name, n in current.items():
            objects.set(n, name)

    registry.add_collector(collect)
    assert 'objects{resource="b"} 2' in registry.render()
    del current["b"]
    current["c"] = 5
    text = registry.render()
    assert 'objects{resource="b"}' not in text
    assert 'objects{resource="a"} 1' in text
    assert 'objects{resource="c"} 5' in text


def test_bound_series_count_into_the_family() -> None:
    registry = prometheus.MetricsRegistry()
    requests = registry.counter("r_total", "R", ("code",))
    seconds = registry.histogram("s_seconds", "S", ("code",), buckets=(1.0,))
    ok, ok_time = requests.bind("200"), seconds.bind("200")
    assert requests.value("200") == 0  # bound series exist from the start
    ok.inc()
    ok.inc(2)
    ok_time.observe(0.5)
    requests.inc("200")
    assert requests.value("200") == 4
    assert seconds.count("200") == 1
    text = registry.render()
    assert 'r_total{code="200"} 4' in text
    assert 's_seconds_bucket{code="200",le="1"} 1' in text


def test_a_bound_gauge_moves_its_series_and_survives_a_clear() -> None:
    registry = prometheus.MetricsRegistry()
    workers = registry.gauge("w", "W", ("controller",))
    bound = workers.bind("a")
    assert 'w{controller="a"} 0' in registry.render()  # exists from the start
    bound.inc()
    bound.inc(2)
    bound.dec()
    workers.inc("a")
    assert workers.value("a") == 3
    bound.set(7)
    assert 'w{controller="a"} 7' in registry.render()
    workers.clear()
    assert 'w{controller="a"}' not in registry.render()
    bound.dec()
    assert workers.value("a") == -1
    assert 'w{controller="a"} -1' in registry.render()
