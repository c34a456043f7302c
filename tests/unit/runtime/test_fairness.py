"""The fair queue on a fake clock: weighted priority classes serve changes before the
initial list, yet the initial list, resyncs and requeue-afters all make progress, also under
a load of changes that alone keeps the worker busy; plain FIFO and strict priorities are the
two failures it avoids."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from setpoint.runtime import fairness
from setpoint.runtime import triggers as t
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.queue import WorkQueue

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

INITIAL = t.Trigger(t.CAUSE_INITIAL, "for Book")
UPDATE = t.Trigger(t.CAUSE_UPDATE, "for Book")
RESYNC = t.Trigger(t.CAUSE_RESYNC, "for Book")
POLL = t.Trigger(t.CAUSE_REQUEUE_AFTER, detail="30s")


@dataclass
class Waits:
    """When each key became wanted and when it was handed out, by class."""

    added: dict[str, float] = field(default_factory=dict)
    waits: dict[str, list[float]] = field(default_factory=dict)

    def add(self, q: WorkQueue[str], key: str, trigger: t.Trigger, now: float) -> None:
        self.added.setdefault(key, now)
        q.add(key, trigger)

    def served(self, key: str, now: float) -> None:
        kind = key.split("-")[0]
        self.waits.setdefault(kind, []).append(now - self.added.pop(key))

    def pending(self, kind: str) -> int:
        return sum(1 for key in self.added if key.startswith(kind))


async def simulate(priority: fairness.PriorityConfig | None, *, change_every: int,
                   horizon: int = 600) -> Waits:
    """One worker serving one key per second. 60 initial-list items wait at the start; a
    user change arrives every ``change_every`` seconds; 5 polled objects come back 30 s after
    each of their reconciles; the 60 are resynced at t=200."""
    clock = FakeAsyncClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, priority=priority)
    w = Waits()
    for i in range(60):
        w.add(q, f"initial-{i}", INITIAL, 0.0)
    polls: dict[float, list[str]] = {}
    for i in range(5):
        w.add(q, f"poll-{i}", POLL, 0.0)
    for second in range(horizon):
        now = float(second)
        if second % change_every == 0:
            w.add(q, f"change-{second}", UPDATE, now)
        for key in polls.pop(now, []):
            w.add(q, key, POLL, now)
        if second == 200:
            for i in range(60):
                w.add(q, f"resync-{i}", RESYNC, now)
        if len(q):
            key = await q.get()
            w.served(key, now)
            q.done(key)
            if key.startswith("poll-"):
                polls.setdefault(now + 30, []).append(key)
        clock.advance(1.0)
    q.shut_down()
    return w


async def test_changes_go_first_and_everything_else_still_progresses() -> None:
    """A load the worker keeps up with on average (changes at half its capacity)."""
    w = await simulate(fairness.PriorityConfig(), change_every=2)
    # a change waits for the changes ahead of it and one background key per 8 changes at
    # most: never for the initial list
    assert max(w.waits["change"]) <= 2
    # and every initial-list item, every resync and every poll was served
    assert len(w.waits["initial"]) == 60
    assert len(w.waits["resync"]) == 60
    assert w.pending("initial") + w.pending("resync") == 0
    assert len(w.waits["poll"]) >= 5 * 10  # each polled object came back 10 times or more


async def test_fifo_makes_changes_wait_behind_the_whole_backlog() -> None:
    w = await simulate(None, change_every=2)
    assert max(w.waits["change"]) >= 60  # behind the 60 initial items


def strict() -> fairness.PriorityConfig:
    """Weights so lopsided that the lower classes never get a turn within the run."""
    return fairness.PriorityConfig(weights={"urgent": 1000, "change": 1000, "retry": 1,
                                            "background": 1})


async def test_under_saturation_every_class_keeps_its_share() -> None:
    """Changes alone keep the worker busy (one a second). Near-strict priorities serve the
    initial list about once per 1000 changes; the default weights give it and the resyncs
    one turn in 9 (1 in 11 while polls wait too), so all 120 are served within the run."""
    lopsided = await simulate(strict(), change_every=1, horizon=1500)
    assert len(lopsided.waits.get("initial", [])) <= 2
    assert lopsided.pending("initial") >= 58
    fair = await simulate(fairness.PriorityConfig(), change_every=1, horizon=1500)
    assert len(fair.waits["initial"]) == 60
    assert len(fair.waits["resync"]) == 60
    assert len(fair.waits["poll"]) >= 5 * 5
    # 8 of every 9 to 11 turns still go to changes
    assert len(fair.waits["change"]) >= 1500 * 8 // 11


async def test_shares_follow_the_weights() -> None:
    order: fairness.WeightedPriority[str] = fairness.WeightedPriority()
    for i in range(270):
        for cause, prefix in (("update", "c"), ("requeue_after", "r"), ("initial", "i"),
                              ("external", "u")):
            order.push(f"{prefix}{i}", [cause])
    served = [order.pop()[0] for _ in range(270)]
    assert {p: served.count(p) for p in "ucri"} == {"u": 160, "c": 80, "r": 20, "i": 10}


async def test_a_new_trigger_moves_a_waiting_key_forward_never_back() -> None:
    clock = FakeAsyncClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, priority=fairness.PriorityConfig())
    q.add("a", INITIAL)
    q.add("b", INITIAL)
    q.add("c", INITIAL)
    q.add("b", UPDATE)        # b is wanted for a change now: ahead of a and c
    q.add("a", RESYNC)        # the same class it is in: no change
    q.add("c", UPDATE)
    q.add("c", POLL)          # a lighter class than it is in now: no change
    # b goes first; then the classes take turns: background's (a) was due, then change (c)
    assert [await q.get() for _ in range(3)] == ["b", "a", "c"]
    for key in "abc":
        q.done(key)
    q.shut_down()


async def test_within_a_class_the_order_is_fifo_and_untriggered_keys_are_changes() -> None:
    clock = FakeAsyncClock()
    q: WorkQueue[str] = WorkQueue(clock=clock, priority=fairness.PriorityConfig())
    for key in ("x", "y", "z"):
        q.add(key, INITIAL)
        clock.advance(0.1)
    q.add("plain")  # no trigger: the default class (that of a change)
    assert [await q.get() for _ in range(4)] == ["plain", "x", "y", "z"]
    q.shut_down()


def test_priority_config_is_validated() -> None:
    with pytest.raises(ValueError, match="unknown trigger cause"):
        fairness.PriorityConfig(classes={"urgent": "change"})
    with pytest.raises(ValueError, match="must be an integer from 1 to 1000"):
        fairness.PriorityConfig(weights={**fairness.DEFAULT_WEIGHTS, "change": 0})
    with pytest.raises(ValueError, match="classes without a weight"):
        fairness.PriorityConfig(classes={"resync": "lowest"})
    config = fairness.PriorityConfig(classes={"resync": "retry"})
    assert config.class_of(["resync"]) == "retry"
    assert config.class_of(["initial"]) == "change"  # left out: the default class
    assert config.class_of([]) == "change"
    assert fairness.PriorityConfig().class_of(["initial", "update", "requeue"]) == "change"


async def test_stale_entries_stay_bounded() -> None:
    order: fairness.WeightedPriority[str] = fairness.WeightedPriority()
    for i in range(1000):
        order.push(f"k{i}", ["initial"])
        order.raise_to(f"k{i}", ["update"])
        order.raise_to(f"k{i}", ["requeue"])  # lighter than change: stays
    assert len(order) == 1000
    assert order.class_lengths() == {"urgent": 0, "change": 1000, "retry": 0, "background": 0}
    assert len(order._fifos["background"]) <= 16
    assert [order.pop() for _ in range(3)] == ["k0", "k1", "k2"]
