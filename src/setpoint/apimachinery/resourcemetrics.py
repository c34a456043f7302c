"""Resource metrics: the kubelet's ``/metrics/resource`` text and the rates ``kubectl top``
shows.

A node agent measures cumulative counters (CPU seconds used since a container started, or
by the whole machine since boot) and gauges (working-set bytes) and serves them as the
kubelet does, in the Prometheus text format with millisecond timestamps::

    node_cpu_usage_seconds_total 357.35 1633352054093
    node_memory_working_set_bytes 1.3e+09 1633352054093
    container_cpu_usage_seconds_total{container="c",namespace="ns",pod="p"} 8.52 1633352052185
    container_memory_working_set_bytes{container="c",namespace="ns",pod="p"} 1.3e+07 16333...
    container_start_time_seconds{container="c",namespace="ns",pod="p"} 1.6333e+09 16333...

The API server reads two such scrapes and turns them into a rate (:func:`cpu_rate`), as
metrics-server does; the objects of ``metrics.k8s.io`` print CPU in nanocores (``"1234n"``),
memory in kibibytes (``"5678Ki"``) and the window as a Go duration (``"10.5s"``).

Invariants: :func:`parse` of :func:`render` gives the samples back (to the precision of the
format); :func:`parse` raises :class:`MetricsFormatError` (never anything else) on any text,
and stops at ``max_series`` series and ``max_label_bytes`` of label text per line.
Non-guarantees: only the series above are read, everything else is skipped; labels other
than ``namespace``, ``pod`` and ``container`` are ignored; a series without a timestamp
takes the scrape's own time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ContainerSample", "MetricsFormatError", "NodeSample", "Scrape", "cpu_rate",
           "format_cpu", "format_memory", "format_window", "parse", "render"]

NODE_CPU: Final = "node_cpu_usage_seconds_total"
NODE_MEMORY: Final = "node_memory_working_set_bytes"
CONTAINER_CPU: Final = "container_cpu_usage_seconds_total"
CONTAINER_MEMORY: Final = "container_memory_working_set_bytes"
CONTAINER_START: Final = "container_start_time_seconds"
SCRAPE_ERROR: Final = "resource_scrape_error"
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

_HELP: Final = {
    CONTAINER_CPU: ("counter", "[STABLE] Cumulative cpu time consumed by the container in "
                               "core-seconds"),
    CONTAINER_MEMORY: ("gauge", "[STABLE] Current working set of the container in bytes"),
    CONTAINER_START: ("gauge", "[STABLE] Start time of the container since unix epoch in "
                               "seconds"),
    NODE_CPU: ("counter", "[STABLE] Cumulative cpu time consumed by the node in core-seconds"),
    NODE_MEMORY: ("gauge", "[STABLE] Current working set of the node in bytes"),
    SCRAPE_ERROR: ("gauge", "[STABLE] 1 if there was an error while getting container "
                            "metrics, 0 otherwise"),
}


class MetricsFormatError(ValueError):
    """The text is not resource metrics this module can read."""


@dataclass(frozen=True, slots=True)
class NodeSample:
    cpu_seconds: float
    memory_bytes: int
    #: seconds since the epoch
    timestamp: float


@dataclass(frozen=True, slots=True)
class ContainerSample:
    namespace: str
    pod: str
    container: str
    cpu_seconds: float
    memory_bytes: int
    timestamp: float
    #: when the container (this instance of it) started, seconds since the epoch
    start_time: float | None = None


@dataclass(frozen=True, slots=True)
class Scrape:
    node: NodeSample | None = None
    containers: tuple[ContainerSample, ...] = field(default=())


# --- writing ---------------------------------------------------------------------------------

def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return repr(float(value))


def _ms(timestamp: float) -> str:
    return str(round(timestamp * 1000))


def render(scrape: Scrape) -> str:
    """``scrape`` as the kubelet's ``/metrics/resource`` serves it."""
    series: dict[str, list[str]] = {name: [] for name in _HELP}
    for c in scrape.containers:
        labels = (f'{{container="{_escape(c.container)}",namespace="{_escape(c.namespace)}",'
                  f'pod="{_escape(c.pod)}"}}')
        ts = _ms(c.timestamp)
        series[CONTAINER_CPU].append(f"{CONTAINER_CPU}{labels} {_number(c.cpu_seconds)} {ts}")
        series[CONTAINER_MEMORY].append(
            f"{CONTAINER_MEMORY}{labels} {_number(c.memory_bytes)} {ts}")
        if c.start_time is not None:
            series[CONTAINER_START].append(
                f"{CONTAINER_START}{labels} {_number(c.start_time)} {ts}")
    if scrape.node is not None:
        ts = _ms(scrape.node.timestamp)
        series[NODE_CPU].append(f"{NODE_CPU} {_number(scrape.node.cpu_seconds)} {ts}")
        series[NODE_MEMORY].append(f"{NODE_MEMORY} {_number(scrape.node.memory_bytes)} {ts}")
    series[SCRAPE_ERROR].append(f"{SCRAPE_ERROR} 0")
    lines: list[str] = []
    for name in sorted(series):
        kind, text = _HELP[name]
        lines.append(f"# HELP {name} {text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(sorted(series[name]))
    return "\n".join(lines) + "\n"


# --- reading ---------------------------------------------------------------------------------

def _labels(text: str, max_bytes: int) -> dict[str, str]:
    """``a="x",b="y"`` (the text between the braces)."""
    if len(text) > max_bytes:
        raise MetricsFormatError("labels too long")
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        eq = text.find("=", i)
        if eq < 0:
            raise MetricsFormatError("a label without a value")
        name = text[i:eq].strip()
        if not name or eq + 1 >= n or text[eq + 1] != '"':
            raise MetricsFormatError("a label value must be quoted")
        j = eq + 2
        value: list[str] = []
        while True:
            if j >= n:
                raise MetricsFormatError("an unterminated label value")
            ch = text[j]
            if ch == "\\":
                if j + 1 >= n:
                    raise MetricsFormatError("an unterminated escape")
                nxt = text[j + 1]
                value.append("\n" if nxt == "n" else nxt)
                j += 2
                continue
            if ch == '"':
                break
            value.append(ch)
            j += 1
        out[name] = "".join(value)
        i = j + 1
        while i < n and text[i] in " \t":
            i += 1
        if i < n:
            if text[i] != ",":
                raise MetricsFormatError("labels must be separated by commas")
            i += 1
    return out


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise MetricsFormatError(f"not a number: {text[:32]!r}") from None
    if not math.isfinite(value):
        raise MetricsFormatError("not a finite number")
    return value


def parse(text: str, *, now: float, max_series: int = 1_000_000,
          max_label_bytes: int = 4096) -> Scrape:
    """The node and container samples in ``text`` (see the module docstring).

    ``now`` is the time of a series that carries no timestamp.
    """
    node_cpu: tuple[float, float] | None = None
    node_mem: tuple[float, float] | None = None
    cpu: dict[tuple[str, str, str], tuple[float, float]] = {}
    mem: dict[tuple[str, str, str], float] = {}
    start: dict[tuple[str, str, str], float] = {}
    count = 0
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        count += 1
        if count > max_series:
            raise MetricsFormatError(f"more than {max_series} series")
        brace = line.find("{")
        space = line.find(" ")
        if brace >= 0 and (space < 0 or brace < space):
            name = line[:brace]
            close = line.rfind("}")
            if close < brace:
                raise MetricsFormatError("unterminated labels")
            label_text, rest = line[brace + 1:close], line[close + 1:]
        else:
            if space < 0:
                raise MetricsFormatError("a series without a value")
            name, label_text, rest = line[:space], "", line[space:]
        if name not in _HELP:
            continue
        fields = rest.split()
        if not 1 <= len(fields) <= 2:
            raise MetricsFormatError("a series must have a value and at most a timestamp")
        value = _float(fields[0])
        ts = _float(fields[1]) / 1000 if len(fields) == 2 else now
        if name == NODE_CPU:
            node_cpu = (value, ts)
        elif name == NODE_MEMORY:
            node_mem = (value, ts)
        elif name in (CONTAINER_CPU, CONTAINER_MEMORY, CONTAINER_START):
            labels = _labels(label_text, max_label_bytes)
            key = (labels.get("namespace", ""), labels.get("pod", ""),
                   labels.get("container", ""))
            if not all(key):
                raise MetricsFormatError(f"{name} needs namespace, pod and container labels")
            if name == CONTAINER_CPU:
                cpu[key] = (value, ts)
            elif name == CONTAINER_MEMORY:
                mem[key] = value
            else:
                start[key] = value
    node = None
    if node_cpu is not None and node_mem is not None:
        node = NodeSample(node_cpu[0], int(node_mem[0]), node_cpu[1])
    containers = tuple(
        ContainerSample(ns, pod, c, value, int(mem[(ns, pod, c)]), ts,
                        start.get((ns, pod, c)))
        for (ns, pod, c), (value, ts) in sorted(cpu.items()) if (ns, pod, c) in mem)
    return Scrape(node, containers)


# --- rates and quantities --------------------------------------------------------------------

def cpu_rate(later_seconds: float, later_time: float, earlier_seconds: float,
             earlier_time: float) -> tuple[int, float] | None:
    """(nanocores, window seconds) between two cumulative samples; None when they do not
    make a rate (no time between them, or a counter that went back: a restart)."""
    window = later_time - earlier_time
    used = later_seconds - earlier_seconds
    if window <= 0 or used < 0:
        return None
    return round(used / window * 1e9), window


def format_cpu(nanocores: int) -> str:
    return f"{max(nanocores, 0)}n"


def format_memory(memory_bytes: int) -> str:
    return f"{max(memory_bytes, 0) // 1024}Ki"


def format_window(seconds: float) -> str:
    """A Go ``time.Duration`` string, to the millisecond (``"10.062s"``, ``"1m5s"``)."""
    ms = max(round(seconds * 1000), 0)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    whole, frac = divmod(rest, 1000)
    secs = f"{whole}.{frac:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{secs}"
    if minutes:
        return f"{minutes}m{secs}"
    return secs

