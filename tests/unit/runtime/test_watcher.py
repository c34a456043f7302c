"""The watcher state machine as tables of (state, input) -> (events, state, action)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.runtime import watcher as w


def obj(name: str, rv: str | None = None, namespace: str = "default") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if rv is not None:
        metadata["resourceVersion"] = rv
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def page(*items: dict[str, Any], rv: str | None = "10",
         cont: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if rv is not None:
        metadata["resourceVersion"] = rv
    if cont is not None:
        metadata["continue"] = cont
    return {"kind": "ConfigMapList", "metadata": metadata, "items": list(items)}


def event(kind: str, o: dict[str, Any]) -> w.WatchEventReceived:
    return w.WatchEventReceived({"type": kind, "object": o})


def status(code: int, reason: str, **details: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
            "reason": reason, "message": reason, "details": details}


A, B, C = obj("a", "8"), obj("b", "9"), obj("c", "11")
TOO_LARGE = errors.Timeout("Too large resource version",
                           details={"causes": [{"reason": "ResourceVersionTooLarge"}]})


def backoff(then: w.ListPage | w.StartWatch, retry_after: float | None = None) -> w.Backoff:
    return w.Backoff(then, "", retry_after)


def shape(action: w.Action) -> w.Action:
    """The action without its human-readable reason."""
    return dataclasses.replace(action, reason="") if isinstance(action, w.Backoff) else action


TABLE: list[tuple[str, w.State, w.Input, tuple[w.WatcherEvent, ...], w.State, w.Action]] = [
    # --- listing
    ("one page", w.Empty(), w.ListResult(page(A, B)),
     (w.Init(), w.InitApply(A), w.InitApply(B), w.InitDone()), w.InitListed("10"),
     w.StartWatch("10")),
    ("empty list", w.Empty(), w.ListResult(page(rv="5")),
     (w.Init(), w.InitDone()), w.InitListed("5"), w.StartWatch("5")),
    ("first of several pages", w.Empty(), w.ListResult(page(A, cont="t1")),
     (w.Init(), w.InitApply(A)), w.InitListing("t1"), w.ListPage("", "t1")),
    ("a middle page", w.InitListing("t1"), w.ListResult(page(B, cont="t2")),
     (w.InitApply(B),), w.InitListing("t2"), w.ListPage("", "t2")),
    ("the last page", w.InitListing("t2"), w.ListResult(page(C, rv="12")),
     (w.InitApply(C), w.InitDone()), w.InitListed("12"), w.StartWatch("12")),
    ("pages of a consistent relist stay consistent", w.Empty(True),
     w.ListResult(page(A, cont="t1")), (w.Init(), w.InitApply(A)), w.InitListing("t1", True),
     w.ListPage("", "t1")),
    ("a list without a resourceVersion is retried", w.Empty(), w.ListResult(page(A, rv=None)),
     (), w.Empty(), backoff(w.ListPage("0"))),
    ("a failed first list is retried as it was", w.Empty(),
     w.ListFailed(errors.ServiceUnavailable("down")), (), w.Empty(), backoff(w.ListPage("0"))),
    ("a failed consistent list stays consistent", w.Empty(True),
     w.ListFailed(errors.InternalError("boom")), (), w.Empty(True), backoff(w.ListPage(""))),
    ("a failed page is retried with its token", w.InitListing("t1"),
     w.ListFailed(errors.InternalError("boom")), (), w.InitListing("t1"),
     backoff(w.ListPage("", "t1"))),
    ("an expired continue token restarts the list", w.InitListing("t1"),
     w.ListFailed(errors.Expired("continue too old")), (), w.Empty(True),
     backoff(w.ListPage(""))),
    ("a 410 on the first list makes it consistent", w.Empty(),
     w.ListFailed(errors.Gone("gone")), (), w.Empty(True), backoff(w.ListPage(""))),
    ("Retry-After is passed on", w.Empty(),
     w.ListFailed(errors.TooManyRequests("slow down", retry_after=7)), (), w.Empty(),
     backoff(w.ListPage("0"), retry_after=7.0)),
    ("a resync while listing waits for InitDone", w.InitListing("t1"), w.ResyncDue(), (),
     w.InitListing("t1"), w.Continue()),
    ("a resync before the first page", w.Empty(), w.ResyncDue(), (), w.Empty(), w.Continue()),
    # --- watching
    ("the first event", w.InitListed("10"), event("ADDED", C), (w.Apply(C),),
     w.Watching("11"), w.NextEvent()),
    ("a modification", w.Watching("11"), event("MODIFIED", obj("c", "12")),
     (w.Apply(obj("c", "12")),), w.Watching("12"), w.NextEvent()),
    ("a deletion", w.Watching("12"), event("DELETED", obj("c", "13")),
     (w.Delete(obj("c", "13")),), w.Watching("13"), w.NextEvent()),
    ("a bookmark only moves the resourceVersion", w.Watching("13"),
     event("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "20"}}), (),
     w.Watching("20"), w.NextEvent()),
    ("a bookmark as the first event", w.InitListed("10"),
     event("BOOKMARK", {"metadata": {"resourceVersion": "15"}}), (), w.Watching("15"),
     w.NextEvent()),
    ("an event without a resourceVersion keeps the last", w.Watching("13"),
     event("ADDED", obj("d")), (w.Apply(obj("d")),), w.Watching("13"), w.NextEvent()),
    ("an unknown event type is skipped", w.Watching("13"), event("SOMETHING", obj("d", "14")),
     (), w.Watching("14"), w.NextEvent()),
    ("a malformed event re-watches", w.Watching("13"),
     w.WatchEventReceived({"type": "ADDED", "object": "nope"}), (), w.InitListed("13"),
     backoff(w.StartWatch("13"))),
    ("an ERROR 410 event relists, consistently", w.Watching("13"),
     event("ERROR", status(410, "Expired")), (), w.Empty(True), backoff(w.ListPage(""))),
    ("an ERROR 410 as the first event relists", w.InitListed("10"),
     event("ERROR", status(410, "Gone")), (), w.Empty(True), backoff(w.ListPage(""))),
    ("another ERROR event re-watches from the last rv", w.Watching("13"),
     event("ERROR", status(500, "InternalError")), (), w.InitListed("13"),
     backoff(w.StartWatch("13"))),
    ("an ERROR event naming a too-large rv relists", w.Watching("13"),
     event("ERROR", status(504, "Timeout", causes=[{"reason": "ResourceVersionTooLarge"}])),
     (), w.Empty(True), backoff(w.ListPage(""))),
    ("a raised Expired relists", w.Watching("13"), w.WatchFailed(errors.Expired("old")), (),
     w.Empty(True), backoff(w.ListPage(""))),
    ("a raised too-large rv relists", w.Watching("13"), w.WatchFailed(TOO_LARGE), (),
     w.Empty(True), backoff(w.ListPage(""))),
    ("a broken connection re-watches", w.Watching("13"),
     w.WatchFailed(errors.ServiceUnavailable("connection lost")), (), w.InitListed("13"),
     backoff(w.StartWatch("13"))),
    ("a failure to open the watch re-watches", w.InitListed("10"),
     w.WatchFailed(OSError("refused")), (), w.InitListed("10"), backoff(w.StartWatch("10"))),
    ("a throttled watch honours Retry-After", w.InitListed("10"),
     w.WatchFailed(errors.TooManyRequests("slow", retry_after=3)), (), w.InitListed("10"),
     backoff(w.StartWatch("10"), retry_after=3.0)),
    ("the server's timeout re-watches at once", w.Watching("13"), w.WatchEnded(), (),
     w.InitListed("13"), w.StartWatch("13")),
    ("a silent stream re-watches at once", w.Watching("13"), w.InactivityTimeout(), (),
     w.InitListed("13"), w.StartWatch("13")),
    ("a stream that ends before any event backs off", w.InitListed("10"), w.WatchEnded(), (),
     w.InitListed("10"), backoff(w.StartWatch("10"))),
    ("a stream silent from the start backs off", w.InitListed("10"), w.InactivityTimeout(),
     (), w.InitListed("10"), backoff(w.StartWatch("10"))),
    ("a resync while watching", w.Watching("13"), w.ResyncDue(), (w.Resync(),),
     w.Watching("13"), w.Continue()),
    ("a resync while opening a watch", w.InitListed("10"), w.ResyncDue(), (w.Resync(),),
     w.InitListed("10"), w.Continue()),
]


@pytest.mark.parametrize(("state", "inp", "events", "new_state", "action"),
                         [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_step(state: w.State, inp: w.Input, events: tuple[w.WatcherEvent, ...],
              new_state: w.State, action: w.Action) -> None:
    result = w.step(state, inp)
    assert result.events == events
    assert result.state == new_state
    assert shape(result.action) == action


IMPOSSIBLE: list[tuple[w.State, w.Input]] = [
    (w.Empty(), event("ADDED", A)),
    (w.Empty(), w.WatchEnded()),
    (w.InitListing("t"), w.InactivityTimeout()),
    (w.InitListed("1"), w.ListResult(page())),
    (w.Watching("1"), w.ListFailed(errors.InternalError("x"))),
]


@pytest.mark.parametrize(("state", "inp"), IMPOSSIBLE,
                         ids=[f"{type(i).__name__} in {type(s).__name__}" for s, i in IMPOSSIBLE])
def test_an_input_a_state_never_gets_is_a_bug(state: w.State, inp: w.Input) -> None:
    with pytest.raises(ValueError, match="cannot happen"):
        w.step(state, inp)


def test_every_backoff_says_why() -> None:
    for _, state, inp, _, _, _ in TABLE:
        action = w.step(state, inp).action
        if isinstance(action, w.Backoff):
            assert action.reason


@pytest.mark.parametrize(("consistent", "step"), [
    (False, w.Step((), w.Empty(False), w.ListPage("0"))),
    (True, w.Step((), w.Empty(True), w.ListPage(""))),
])
def test_initial(consistent: bool, step: w.Step) -> None:
    assert w.initial(consistent) == step


# --- resourceVersion rules -------------------------------------------------------------


def test_list_resource_versions() -> None:
    assert w.list_resource_version(consistent=False) == "0"  # any, from a cache
    assert w.list_resource_version(consistent=True) == ""  # most recent, a quorum read
    assert w.page_resource_version() == ""


@pytest.mark.parametrize(("page_", "rv"), [
    (page(rv="42"), "42"), (page(rv=None), None), (page(rv=""), None),
    ({"metadata": {"resourceVersion": 42}}, "42"), ({}, None),
])
def test_watch_resource_version(page_: dict[str, Any], rv: str | None) -> None:
    assert w.watch_resource_version(page_) == rv


@pytest.mark.parametrize(("o", "rv"), [
    (obj("x", "7"), "7"), (obj("x"), "3"), ({"metadata": None}, "3"), ({}, "3"),
])
def test_event_resource_version(o: dict[str, Any], rv: str) -> None:
    assert w.event_resource_version(o, "3") == rv


@pytest.mark.parametrize(("error", "relist"), [
    (errors.Expired("x"), True),
    (errors.Gone("x"), True),
    (errors.ApiError("x", code=410, reason="Expired"), True),
    (errors.from_status(status(410, "Expired")), True),
    (TOO_LARGE, True),
    (errors.Timeout("x"), False),
    (errors.ServiceUnavailable("x"), False),
    (errors.Conflict("x"), False),
    (OSError("x"), False),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v))
def test_requires_relist(error: Exception, relist: bool) -> None:
    assert w.requires_relist(error) is relist


# --- whole runs ------------------------------------------------------------------------


def run(inputs: list[w.Input], consistent: bool = False) -> tuple[
        list[w.WatcherEvent], w.State, list[w.Action]]:
    _, state, action = w.initial(consistent)
    events: list[w.WatcherEvent] = []
    actions = [action]
    for inp in inputs:
        out = w.step(state, inp)
        events.extend(out.events)
        state = out.state
        actions.append(shape(out.action))
    return events, state, actions


def test_a_run_with_paging_a_410_and_a_relist() -> None:
    events, state, actions = run([
        w.ListResult(page(A, cont="t")),
        w.ListResult(page(B, rv="10")),
        event("ADDED", C),
        event("BOOKMARK", {"metadata": {"resourceVersion": "30"}}),
        w.WatchEnded(),
        event("ERROR", status(410, "Expired")),
        w.ListResult(page(B, rv="40")),
    ])
    assert events == [w.Init(), w.InitApply(A), w.InitApply(B), w.InitDone(), w.Apply(C),
                      w.Init(), w.InitApply(B), w.InitDone()]
    assert state == w.InitListed("40")
    assert actions == [w.ListPage("0"), w.ListPage("", "t"), w.StartWatch("10"),
                       w.NextEvent(), w.NextEvent(), w.StartWatch("30"),
                       backoff(w.ListPage("")), w.StartWatch("40")]


def test_a_list_failing_midway_starts_again_with_init() -> None:
    events, state, _ = run([
        w.ListResult(page(A, cont="t")),
        w.ListFailed(errors.Expired("token expired")),
        w.ListResult(page(B, rv="20")),
    ])
    assert events == [w.Init(), w.InitApply(A), w.Init(), w.InitApply(B), w.InitDone()]
    assert state == w.InitListed("20")


def test_states_and_events_are_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.Watching("1").resource_version = "2"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.Apply(A).object = B  # type: ignore[misc]
