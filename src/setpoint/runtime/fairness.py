"""The order in which a work queue hands out ready keys: FIFO, or weighted priorities.

A controller's queue holds very different work at once: thousands of objects from the
initial list (or a resync) that merely need a check, requeue-afters polling something outside
the cluster, retries, and changes a user just made and is waiting for. Plain FIFO makes the
user's change wait behind the whole initial list (controller-runtime's complaint); strict
priorities make the initial list, resyncs and polls wait for as long as changes keep coming.

:class:`WeightedPriority` sorts each ready key into a *class* by the causes of the triggers
merged into it (:mod:`setpoint.runtime.triggers`; the class of greatest weight among them
wins), keeps a FIFO per class, and chooses the class by stride scheduling: each class has a
*pass*; the non-empty class with the lowest pass goes next (ties: the heavier class), and its
pass then grows by ``1 / weight``. A class that waits **ages**: its pass stands still while
the others' grow, so its turn comes. A class that was empty rejoins at the current pass (it
cannot bank turns while idle). The default classes and weights:

==============  =================================================  ======
class           causes                                             weight
==============  =================================================  ======
``urgent``      ``external`` (``Manager.reconcile_now``),          16
                ``reconcile_now`` (the annotation)
``change``      ``add``, ``update``, ``delete``; keys without one  8
``retry``       ``requeue``, ``retry``, ``requeue_after``, ``poll``  2
``background``  ``initial``, ``resync``                            1
==============  =================================================  ======

Invariants (for :class:`WeightedPriority`):

- **Nobody starves**: while a class has ready keys it gets at least one turn in every
  ``ceil(W / weight)`` keys handed out, ``W`` being the sum of the weights of the non-empty
  classes (27 with all four waiting: the initial list and resyncs get a key in every 27,
  polls and retries 2 in every 27, however many changes arrive).
- **Changes go first** in proportion: with the initial list waiting, 8 in 9 turns go to
  changes (if there are any), so a change waits for the changes ahead of it and at most one
  background key per 8 of them, not for the whole initial list.
- When only one class has keys it gets every turn (no capacity is left idle), and within a
  class the order is FIFO (by when the key entered the class).
- A key only moves to a heavier class while it waits (a new trigger of a heavier class moves
  it to the tail of that class; never back). Memory is O(ready keys): a move leaves a stale
  entry that is skipped when it surfaces, and a class FIFO is compacted when stale entries
  outnumber the live ones.

:class:`Fifo` is the plain order (client-go's): what became ready first goes first.

Non-guarantees: classes share turns, not workers or time: a long reconcile of a background
key still holds its worker for as long as it takes.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from setpoint.runtime import triggers as rttriggers

K = TypeVar("K", bound=Hashable)

#: the default class of each cause
DEFAULT_CLASSES: Mapping[str, str] = MappingProxyType({
    rttriggers.CAUSE_EXTERNAL: "urgent", rttriggers.CAUSE_RECONCILE_NOW: "urgent",
    rttriggers.CAUSE_POLL: "retry",
    rttriggers.CAUSE_ADD: "change", rttriggers.CAUSE_UPDATE: "change",
    rttriggers.CAUSE_DELETE: "change",
    rttriggers.CAUSE_REQUEUE: "retry", rttriggers.CAUSE_RETRY: "retry",
    rttriggers.CAUSE_REQUEUE_AFTER: "retry",
    rttriggers.CAUSE_INITIAL: "background", rttriggers.CAUSE_RESYNC: "background",
})
#: the default weight of each class
DEFAULT_WEIGHTS: Mapping[str, int] = MappingProxyType(
    {"urgent": 16, "change": 8, "retry": 2, "background": 1})


class ReadyOrder(Protocol[K]):
    """What a work queue needs from the order of its ready keys."""

    def push(self, key: K, causes: Iterable[str]) -> None:
        """``key`` (not in the order) became ready, wanted for ``causes``."""

    def raise_to(self, key: K, causes: Iterable[str]) -> None:
        """``key`` (in the order) is now also wanted for ``causes``."""

    def pop(self) -> K:
        """The next key (the order is not empty)."""

    def __len__(self) -> int:
        """Keys in the order."""


class Fifo(Generic[K]):
    """First ready, first out."""

    def __init__(self) -> None:
        self._keys: deque[K] = deque()

    def push(self, key: K, causes: Iterable[str]) -> None:
        self._keys.append(key)

    def raise_to(self, key: K, causes: Iterable[str]) -> None:
        pass

    def pop(self) -> K:
        return self._keys.popleft()

    def __len__(self) -> int:
        return len(self._keys)


@dataclass(frozen=True, slots=True, kw_only=True)
class PriorityConfig:
    """The classes of trigger causes and the weight of each class."""

    #: the class of each cause; causes left out are in ``default_class``
    classes: Mapping[str, str] = field(default_factory=lambda: DEFAULT_CLASSES)
    #: the weight of each class (1 to 1000): its share of the turns when all are waiting
    weights: Mapping[str, int] = field(default_factory=lambda: DEFAULT_WEIGHTS)
    #: the class of a key added without triggers, and of causes ``classes`` leaves out
    default_class: str = "change"

    def __post_init__(self) -> None:
        for cause in self.classes:
            if cause not in rttriggers.CAUSES:
                raise ValueError(f"unknown trigger cause {cause!r}")
        if not self.weights or len(self.weights) > 32:
            raise ValueError("weights must name between 1 and 32 classes")
        for name, weight in self.weights.items():
            if not isinstance(weight, int) or not 1 <= weight <= 1000:
                raise ValueError(f"the weight of class {name!r} must be an integer from 1 "
                                 f"to 1000, not {weight!r}")
        missing = sorted({*self.classes.values(), self.default_class} - set(self.weights))
        if missing:
            raise ValueError(f"classes without a weight: {missing}")
        object.__setattr__(self, "classes", MappingProxyType(dict(self.classes)))
        object.__setattr__(self, "weights", MappingProxyType(dict(self.weights)))

    def class_of(self, causes: Iterable[str]) -> str:
        """The class of greatest weight among those of ``causes``."""
        best = None
        for cause in causes:
            name = self.classes.get(cause, self.default_class)
            if best is None or self.weights[name] > self.weights[best]:
                best = name
        return best if best is not None else self.default_class


class WeightedPriority(Generic[K]):
    """Weighted classes with stride scheduling; see the module docstring."""

    def __init__(self, config: PriorityConfig | None = None) -> None:
        self.config = config or PriorityConfig()
        names = sorted(self.config.weights, key=lambda n: -self.config.weights[n])
        self._fifos: dict[str, deque[tuple[int, K]]] = {n: deque() for n in names}
        self._count: dict[str, int] = dict.fromkeys(names, 0)
        self._pass: dict[str, float] = dict.fromkeys(names, 0.0)
        self._at: dict[K, tuple[str, int]] = {}  # key -> (class, entry number)
        self._seq = itertools.count()
        self._now = 0.0  # the pass of the class served last

    def push(self, key: K, causes: Iterable[str]) -> None:
        self._enter(key, self.config.class_of(causes))

    def raise_to(self, key: K, causes: Iterable[str]) -> None:
        current = self._at.get(key)
        if current is None:
            return
        wanted = self.config.class_of(causes)
        if self.config.weights[wanted] <= self.config.weights[current[0]]:
            return
        self._count[current[0]] -= 1
        fifo = self._fifos[current[0]]
        if len(fifo) > 2 * self._count[current[0]] + 16:
            self._fifos[current[0]] = deque(
                (n, k) for n, k in fifo if self._at.get(k) == (current[0], n) and k != key)
        self._enter(key, wanted)

    def _enter(self, key: K, name: str) -> None:
        if self._count[name] == 0:  # rejoin at the current pass: no turns banked while idle
            self._pass[name] = max(self._pass[name], self._now)
        number = next(self._seq)
        self._at[key] = (name, number)
        self._fifos[name].append((number, key))
        self._count[name] += 1

    def pop(self) -> K:
        name = min((n for n, c in self._count.items() if c),
                   key=lambda n: (self._pass[n], -self.config.weights[n]))
        fifo = self._fifos[name]
        while True:
            number, key = fifo.popleft()
            if self._at.get(key) == (name, number):
                break
        del self._at[key]
        self._count[name] -= 1
        self._now = self._pass[name]
        self._pass[name] += 1.0 / self.config.weights[name]
        return key

    def __len__(self) -> int:
        return len(self._at)

    def class_lengths(self) -> dict[str, int]:
        """Ready keys per class."""
        return dict(self._count)
