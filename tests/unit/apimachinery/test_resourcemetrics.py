"""The kubelet's resource-metrics text: written, read back, bounded, and the rates."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import resourcemetrics as rm

NOW = 1_700_000_000.0

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
                min_size=1, max_size=20)
containers = st.builds(
    rm.ContainerSample, names, names, names,
    st.floats(min_value=0, max_value=1e7, allow_nan=False),
    st.integers(min_value=0, max_value=2**50),
    st.floats(min_value=1e9, max_value=2e9).map(lambda t: round(t, 3)),
    st.none() | st.integers(min_value=10**9, max_value=2 * 10**9).map(float))


@given(st.lists(containers, max_size=8, unique_by=lambda c: (c.namespace, c.pod,
                                                              c.container)),
       st.booleans())
def test_render_then_parse_gives_the_samples_back(samples: list[rm.ContainerSample],
                                                   with_node: bool) -> None:
    node = rm.NodeSample(1234.5, 2**33, NOW) if with_node else None
    scrape = rm.Scrape(node, tuple(samples))
    parsed = rm.parse(rm.render(scrape), now=NOW)
    assert parsed.node == node
    key = lambda c: (c.namespace, c.pod, c.container)  # noqa: E731
    assert sorted(parsed.containers, key=key) == sorted(samples, key=key)


@given(st.text(max_size=400))
def test_any_text_is_read_or_refused_with_a_format_error(text: str) -> None:
    try:
        rm.parse(text, now=NOW)
    except rm.MetricsFormatError:
        pass


@given(st.lists(st.sampled_from([
    'container_cpu_usage_seconds_total{container="c",namespace="n",pod="p"} 1.5 1000',
    'container_memory_working_set_bytes{container="c",namespace="n",pod="p"} 10',
    "node_cpu_usage_seconds_total 3", "node_memory_working_set_bytes 4 5", "# comment",
    'container_cpu_usage_seconds_total{container="c",namespace="n",pod="p" 1',
    'container_cpu_usage_seconds_total{container="c\\',
    "node_cpu_usage_seconds_total", "node_cpu_usage_seconds_total NaN", "other_metric 1",
    'container_start_time_seconds{pod="p"} 1', "node_cpu_usage_seconds_total 1 2 3"]),
    max_size=12))
def test_mangled_lines_never_escape_as_other_errors(lines: list[str]) -> None:
    try:
        rm.parse("\n".join(lines), now=NOW)
    except rm.MetricsFormatError:
        pass


def test_what_the_kubelet_writes_is_read() -> None:
    pod = 'namespace="kube-system",pod="coredns-558bd4d5db-4dpjz"'
    text = f"""# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{{container="coredns",{pod}}} 8.529 1633352052185
container_memory_working_set_bytes{{container="coredns",{pod}}} 1.3103104e+07 1633352052185
container_start_time_seconds{{container="coredns",{pod}}} 1.6333496e+09 1633352052185
node_cpu_usage_seconds_total 357.35491 1633352054093
node_memory_working_set_bytes 1.035554816e+09 1633352054093
pod_cpu_usage_seconds_total{{{pod}}} 8.5 1633352052185
resource_scrape_error 0
"""
    scrape = rm.parse(text, now=NOW)
    assert scrape.node == rm.NodeSample(357.35491, 1035554816, 1633352054.093)
    (c,) = scrape.containers
    assert (c.namespace, c.pod, c.container) == ("kube-system", "coredns-558bd4d5db-4dpjz",
                                                 "coredns")
    assert (c.cpu_seconds, c.memory_bytes, c.timestamp, c.start_time) == (
        8.529, 13103104, 1633352052.185, 1633349600.0)


def test_series_are_bounded() -> None:
    line = "node_cpu_usage_seconds_total 1\n"
    with pytest.raises(rm.MetricsFormatError, match="more than 3 series"):
        rm.parse(line * 4, now=NOW, max_series=3)
    long = "x" * 5000
    with pytest.raises(rm.MetricsFormatError, match="labels too long"):
        rm.parse(f'container_cpu_usage_seconds_total{{pod="{long}"}} 1', now=NOW)


def test_rates_and_quantities() -> None:
    assert rm.cpu_rate(12.0, 110.0, 2.0, 100.0) == (1_000_000_000, 10.0)
    assert rm.cpu_rate(1.0, 110.0, 2.0, 100.0) is None  # a restart: the counter went back
    assert rm.cpu_rate(2.0, 100.0, 1.0, 100.0) is None
    assert rm.format_cpu(137283022) == "137283022n"
    assert rm.format_memory(1548668 * 1024 + 1000) == "1548668Ki"
    assert [rm.format_window(s) for s in (0, 0.25, 1, 10.062, 65, 3600.5)] == [
        "0s", "250ms", "1s", "10.062s", "1m5s", "1h0m0.5s"]
