"""Why a reconcile ran: triggers merged by the queue, raised by handlers, seen by the
reconcile, counted by metrics and remembered (bounded) by the history."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from setpoint.runtime import engine, ratelimit
from setpoint.runtime import handlers as h
from setpoint.runtime import history as rthistory
from setpoint.runtime import informercache as rtcache
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime import triggers as t
from setpoint.runtime import watcher as w
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.queue import WorkQueue
from setpoint.runtime.reconcile import FuncReconciler, Request, Result

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

A = Request("default", "a")
ADD = t.Trigger(t.CAUSE_ADD, "for Book", "default/a")
CHILD = t.Trigger(t.CAUSE_UPDATE, "owns ConfigMap", "default/a-index")


def test_a_trigger_is_validated_and_bounded() -> None:
    with pytest.raises(ValueError, match="unknown trigger cause"):
        t.Trigger("because")
    long = t.Trigger(t.CAUSE_EXTERNAL, detail="x" * 1000)
    assert len(long.detail) == t.MAX_DETAIL
    assert str(CHILD) == "update by owns ConfigMap of default/a-index"
    assert CHILD.as_dict() == {"cause": "update", "watch": "owns ConfigMap",
                               "object": "default/a-index"}


async def test_the_queue_merges_the_triggers_of_a_pending_key(clock: FakeAsyncClock) -> None:
    q: WorkQueue[Request] = WorkQueue(clock=clock)
    q.add(A, ADD)
    q.add(A, CHILD)
    q.add(A, ADD)  # the same reason again: merged, counted
    q.add(A)       # no reason given: counted nowhere
    assert len(q) == 1
    key = await q.get()
    assert q.triggers(key) == (ADD, CHILD)
    assert q.merged_adds(key) == 3
    # an add while the key is held belongs to the next round, not this one
    q.add(A, t.Trigger(t.CAUSE_DELETE, "for Book", "default/a"))
    assert q.triggers(key) == (ADD, CHILD)
    q.done(key)
    assert q.triggers(key) == ()
    again = await q.get()
    assert q.triggers(again) == (t.Trigger(t.CAUSE_DELETE, "for Book", "default/a"),)
    q.done(again)


async def test_distinct_triggers_per_key_are_bounded(clock: FakeAsyncClock) -> None:
    q: WorkQueue[Request] = WorkQueue(clock=clock)
    for i in range(1000):
        q.add(A, t.Trigger(t.CAUSE_UPDATE, "owns Pod", f"default/pod-{i}"))
    key = await q.get()
    kept = q.triggers(key)
    assert len(kept) == t.MAX_TRIGGERS
    assert kept[0].object == "default/pod-0"
    assert q.merged_adds(key) == 1000
    q.done(key)


async def test_delayed_triggers_arrive_with_the_delay(clock: FakeAsyncClock) -> None:
    q: WorkQueue[Request] = WorkQueue(clock=clock)
    later = t.Trigger(t.CAUSE_REQUEUE_AFTER, detail="5s")
    q.add_after(A, 5.0, later)
    q.add_after(A, 3.0, t.Trigger(t.CAUSE_REQUEUE_AFTER, detail="3s"))  # earliest wins
    await clock.tick(3.0)
    key = await q.get()
    assert set(q.triggers(key)) == {later, t.Trigger(t.CAUSE_REQUEUE_AFTER, detail="3s")}
    q.done(key)
    q.add_after(A, 1.0, later)
    q.shut_down()
    assert q._delayed_triggers == {}


def make(clock: FakeAsyncClock, func: Any, registry: rtmetrics.MetricsRegistry,
         history: rthistory.ReconcileHistory | None = None) -> engine.Engine:
    return engine.Engine("books", FuncReconciler(func), workers=1, clock=clock,
                         rate_limiter=ratelimit.ItemExponentialBackoff(0.5, 60.0),
                         metrics=registry, history=history)


async def test_the_reconcile_sees_its_triggers_and_the_engine_adds_its_own(
        clock: FakeAsyncClock) -> None:
    seen: list[tuple[t.Trigger, ...]] = []
    outcomes = iter([Result.after(30), RuntimeError("upstream down"), Result(requeue=True),
                     Result.done()])

    async def reconcile(request: Request) -> Result:
        seen.append(t.current_triggers())
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    registry = rtmetrics.MetricsRegistry()
    history = rthistory.ReconcileHistory()
    e = make(clock, reconcile, registry, history)
    e.enqueue(A, ADD)
    e.enqueue(A, CHILD)
    assert await e.process(await e.queue.get()) == "requeue_after"
    await clock.tick(30)
    assert await e.process(await e.queue.get()) == "error"
    await clock.tick(0.5)
    assert await e.process(await e.queue.get()) == "requeue"
    await clock.tick(60)
    assert await e.process(await e.queue.get()) == "success"
    assert seen == [
        (ADD, CHILD),
        (t.Trigger(t.CAUSE_REQUEUE_AFTER, detail="30s"),),
        (t.Trigger(t.CAUSE_RETRY, detail="RuntimeError"),),
        (t.Trigger(t.CAUSE_REQUEUE),),
    ]
    assert t.current_triggers() == ()  # reset after each reconcile
    by_cause = registry.get("controller_runtime_reconcile_triggers_total")
    assert isinstance(by_cause, rtmetrics.Counter)
    assert {c: by_cause.value("books", c) for c in t.CAUSES} == {
        "initial": 0, "add": 1, "update": 1, "delete": 0, "resync": 0, "requeue_after": 1,
        "requeue": 1, "retry": 1, "external": 0, "poll": 0, "reconcile_now": 0}
    assert "controller_runtime_reconcile_triggers_total" in registry.render()
    entries = history.of("books", "default/a")
    assert [x["result"] for x in entries] == ["requeue_after", "error", "requeue", "success"]
    assert entries[0]["triggers"] == [ADD.as_dict(), CHILD.as_dict()]
    assert entries[0]["merged"] == 2
    assert entries[1]["error"] == "RuntimeError: upstream down"
    e.shut_down()


def test_the_history_is_bounded_in_objects_and_entries() -> None:
    history = rthistory.ReconcileHistory(rthistory.HistoryConfig(max_objects=3, per_object=2))

    def entry(result: str) -> rthistory.Entry:
        return rthistory.Entry("2026-01-01T00:00:00+00:00", (ADD,), 1, result, 0.01,
                               "E" * 10_000 if result == "error" else "")

    for name in ("a", "b", "c"):
        history.record("books", f"default/{name}", entry("success"))
    history.record("books", "default/a", entry("error"))  # a is now the most recent
    history.record("books", "default/a", entry("requeue"))
    history.record("books", "default/d", entry("success"))  # forgets b, the least recent
    assert len(history) == 3
    assert history.of("books", "default/b") == []
    assert [x["result"] for x in history.of("books", "default/a")] == ["error", "requeue"]
    assert len(history.of("books", "default/a")[0]["error"]) == rthistory.MAX_ERROR
    assert history.controllers() == {"books": 3}
    assert set(history.latest("books")) == {"default/a", "default/c", "default/d"}
    with pytest.raises(ValueError, match="max_objects"):
        rthistory.HistoryConfig(max_objects=0)


def cm(name: str, rv: str = "1", owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "Book",
                                    "name": owner, "uid": f"uid-{owner}", "controller": True}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def test_the_queueing_handler_says_which_watch_event_and_object() -> None:
    added: list[tuple[Request, t.Trigger]] = []
    cache = rtcache.Cache()
    for event in (w.Init(), w.InitApply(cm("old", owner="dune")), w.InitDone("1")):
        cache.apply(event)
    handler = h.QueueingHandler(h.EnqueueOwner(group="example.com", kind="Book"),
                                lambda r, trig: added.append((r, trig)),
                                watch="owns ConfigMap")
    handler.initial = True
    cache.subscribe(handler)
    handler.initial = False
    cache.apply(w.Apply(cm("new", owner="dune")))
    cache.apply(w.Apply(cm("new", "2", owner="dune")))
    cache.apply(w.Resync())
    cache.apply(w.Delete(cm("new", "3", owner="dune")))
    dune = Request("ns", "dune")
    assert [(r, trig.cause, trig.object) for r, trig in added] == [
        (dune, "initial", "ns/old"), (dune, "add", "ns/new"), (dune, "update", "ns/new"),
        (dune, "update", "ns/new"),  # the old and the new side of an update
        (dune, "resync", "ns/new"), (dune, "resync", "ns/old"), (dune, "delete", "ns/new")]
    assert {trig.watch for _, trig in added} == {"owns ConfigMap"}


async def test_triggers_reach_a_blocking_reconcile_in_its_thread(
        clock: FakeAsyncClock) -> None:
    import concurrent.futures

    from setpoint.runtime import builder

    seen: list[tuple[t.Trigger, ...]] = []

    def reconcile(request: Request, ctx: Any) -> None:
        seen.append(t.current_triggers())

    controller = builder.Controller(for_=("example.com/v1", "Book"), reconcile=reconcile)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        e = engine.Engine("books", controller.reconciler(None, pool),  # type: ignore[arg-type]
                          clock=clock)
        e.enqueue(A, ADD)
        assert await e.process(await e.queue.get()) == "success"
        e.shut_down()
    assert seen == [(ADD,)]
    await asyncio.sleep(0)
