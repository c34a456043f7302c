"""Prometheus metrics in the text exposition format (0.0.4), with no global registry.

A :class:`MetricsRegistry` belongs to its owner (a manager, an API server) and renders every
family it holds with :meth:`MetricsRegistry.render`, which is what ``/metrics`` serves. It has
three kinds of family, each with fixed label names: :class:`Counter`, :class:`Gauge` (also
computed at render time with :meth:`Gauge.set_function`, or refilled by a collector, see
:meth:`MetricsRegistry.add_collector`) and :class:`Histogram` (cumulative buckets, ``_sum``,
``_count``).

This is a small writer of its own rather than ``prometheus_client``: no extra dependency, no
process-wide default registry to keep out of tests, and gauges read from live objects when
scraped.

Invariants: a family's label names are fixed when it is created; asking the registry for an
existing name returns it if the kind and labels agree and raises otherwise. Output is sorted
(families by name, series by label values): two renders of the same state are identical.
Counters only go up.

Non-guarantees: no timestamps, no exemplars, no OpenMetrics format. Series are never removed
except by :meth:`Gauge.clear`; owners keep label values few (they never put a client-chosen
string in a label).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Final

#: Prometheus' default histogram buckets
DEFAULT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

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
        return tuple(map(str, values))

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

    def bind(self, *labels: str) -> BoundCounter:
        """The series of ``labels`` (made to exist at 0), to count on without looking its
        labels up each time."""
        key = self._key(labels)
        self._values.setdefault(key, 0.0)
        return BoundCounter(self._values, key)

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def samples(self) -> Iterable[str]:
        for key in sorted(self._values):
            yield f"{self.name}{_labels(self.label_names, key)} {format_value(self._values[key])}"


class BoundCounter:
    """One series of a :class:`Counter`."""

    __slots__ = ("_key", "_values")

    def __init__(self, values: dict[LabelValues, float], key: LabelValues) -> None:
        self._values = values
        self._key = key

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        self._values[self._key] += amount


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

    def bind(self, *labels: str) -> BoundGauge:
        """The series of ``labels`` (made to exist at 0), to set or move without looking its
        labels up each time. After :meth:`clear` the series is exported again from the bound
        gauge's next move; a :meth:`set_function` of the same labels takes precedence."""
        key = self._key(labels)
        self._values.setdefault(key, 0.0)
        return BoundGauge(self._values, key)

    def set_function(self, func: Callable[[], float], *labels: str) -> None:
        """Compute the series' value at each render (replaces a set value)."""
        key = self._key(labels)
        self._values.pop(key, None)
        self._functions[key] = func

    def clear(self) -> None:
        """Forget every series (a collector refills them before each render)."""
        self._values.clear()
        self._functions.clear()

    def value(self, *labels: str) -> float:
        key = self._key(labels)
        func = self._functions.get(key)
        return float(func()) if func is not None else self._values.get(key, 0.0)

    def samples(self) -> Iterable[str]:
        for key in sorted({*self._values, *self._functions}):
            yield f"{self.name}{_labels(self.label_names, key)} {format_value(self.value(*key))}"


class BoundGauge:
    """One series of a :class:`Gauge`."""

    __slots__ = ("_key", "_values")

    def __init__(self, values: dict[LabelValues, float], key: LabelValues) -> None:
        self._values = values
        self._key = key

    def set(self, value: float) -> None:
        self._values[self._key] = float(value)

    def inc(self, amount: float = 1.0) -> None:
        self._values[self._key] = self._values.get(self._key, 0.0) + amount

    def dec(self, amount: float = 1.0) -> None:
        self.inc(-amount)


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
                 buckets: Sequence[float] = DEFAULT_BUCKETS) -> None:
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

    def bind(self, *labels: str) -> BoundHistogram:
        """The series of ``labels``, to observe into without looking its labels up each
        time."""
        return BoundHistogram(self.buckets, self._get(labels))

    def observe(self, value: float, *labels: str) -> None:
        _observe(self.buckets, self._get(labels), value)

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


class BoundHistogram:
    """One series of a :class:`Histogram`."""

    __slots__ = ("_buckets", "_series")

    def __init__(self, buckets: tuple[float, ...], series: _Series) -> None:
        self._buckets = buckets
        self._series = series

    def observe(self, value: float) -> None:
        _observe(self._buckets, self._series, value)


def _observe(buckets: tuple[float, ...], series: _Series, value: float) -> None:
    i = bisect.bisect_left(buckets, value)  # the first bucket with value <= bound
    if i < len(series.counts):
        series.counts[i] += 1
    series.count += 1
    series.sum += value


class MetricsRegistry:
    """The metric families of one manager."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._collectors: list[Callable[[], None]] = []

    def add_collector(self, collect: Callable[[], None]) -> None:
        """Call ``collect`` at the start of every render (to refill gauges whose label
        sets come and go, such as one series per served resource)."""
        self._collectors.append(collect)

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
                  buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        family = self._family(Histogram, name, help_text, label_names, buckets=buckets)
        assert isinstance(family, Histogram)
        return family

    def get(self, name: str) -> Counter | Gauge | Histogram | None:
        family = self._families.get(name)
        assert family is None or isinstance(family, Counter | Gauge | Histogram)
        return family

    def render(self) -> str:
        """Every family in the text exposition format, sorted by name."""
        for collect in self._collectors:
            collect()
        lines: list[str] = []
        for name in sorted(self._families):
            lines.extend(self._families[name].render())
        return "\n".join(lines) + "\n" if lines else ""
