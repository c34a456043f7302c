"""Job accounting: finished pods are counted once, through the tracking finalizer."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.controllers import jobpods
from setpoint.controllers.jobpods import TRACKING_FINALIZER

Obj = dict[str, Any]


def pod(uid: str, phase: str = "Running", *, finalizer: bool = True, index: int | None = None,
        deleting: bool = False, ready: bool = False, restarts: int = 0) -> Obj:
    meta: Obj = {"name": uid, "uid": uid,
                 "finalizers": [TRACKING_FINALIZER] if finalizer else []}
    if index is not None:
        meta["annotations"] = {jobpods.INDEX_ANNOTATION: str(index)}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta, "status": {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        "containerStatuses": [{"restartCount": restarts}]}}


def test_finished_pods_are_listed_then_counted_once_released() -> None:
    pods = [pod("a", "Succeeded"), pod("b", "Failed"), pod("c", ready=True, restarts=2),
            pod("d", deleting=True)]
    first = jobpods.tally({}, pods)
    assert first.uncounted_succeeded == ["a"]
    assert sorted(first.uncounted_failed) == ["b", "d"]
    assert [p["metadata"]["uid"] for p in first.active] == ["c"]
    assert (first.ready, first.restarts, first.new_failure) == (1, 2, True)
    assert {p["metadata"]["uid"] for p in first.release} == {"a", "b", "d"}
    status = {"uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b", "d"]}}
    # the finalizer is not gone yet: nothing moves, nothing is listed twice
    again = jobpods.tally(status, pods)
    assert (again.newly_succeeded, again.newly_failed) == (0, 0)
    assert again.uncounted_succeeded == ["a"]
    assert again.new_failure is False
    # released (or gone): counted, and no longer listed
    released = [pod("a", "Succeeded", finalizer=False), pod("c")]
    last = jobpods.tally(status, released)
    assert (last.newly_succeeded, last.newly_failed) == (1, 2)
    assert last.uncounted_succeeded == last.uncounted_failed == []
    assert last.release == []


def test_pods_without_the_finalizer_are_never_counted_again() -> None:
    done = jobpods.tally({}, [pod("a", "Succeeded", finalizer=False)])
    assert done.uncounted_succeeded == []
    assert done.newly_succeeded == 0


def test_completed_indexes() -> None:
    status = {"uncountedTerminatedPods": {"succeeded": ["x", "y"]}}
    counted = jobpods.tally(status, [pod("x", "Succeeded", finalizer=False, index=3)])
    assert counted.newly_completed_indexes == {3}
    assert jobpods.format_indexes({0, 1, 2, 4, 7, 8}) == "0-2,4,7-8"
    assert jobpods.parse_indexes("0-2,4,7-8,junk,9-", 8) == {0, 1, 2, 4, 7}
    assert jobpods.missing_indexes(5, {0, 2}, [pod("p", index=1)], 2) == [3, 4]


@given(st.sets(st.integers(0, 200)))
def test_indexes_round_trip(indexes: set[int]) -> None:
    assert jobpods.parse_indexes(jobpods.format_indexes(indexes), 201) == indexes


def test_wanted_pods_and_backoff() -> None:
    assert jobpods.wanted_active({"parallelism": 2, "completions": 5}, 4, 0) == 1
    assert jobpods.wanted_active({"parallelism": 2, "completions": 5}, 5, 0) == 0
    assert jobpods.wanted_active({"parallelism": 3}, 0, 0) == 3
    assert jobpods.wanted_active({"parallelism": 3}, 1, 0) == 0
    assert jobpods.wanted_active({"parallelism": 4, "completions": 3,
                                  "completionMode": "Indexed"}, 0, 1) == 2
    assert [jobpods.backoff_delay(n) for n in range(5)] == [0.0, 10.0, 20.0, 40.0, 80.0]
    assert jobpods.backoff_delay(100) == jobpods.MAX_BACKOFF


def test_expectations_hold_until_the_cache_shows_the_writes() -> None:
    from setpoint.controllers.job import Expectations

    expect = Expectations()
    expect.created("ns/j", "j-abc")
    expect.deleted("ns/j", "j-old")
    old = pod("j-old")
    old["metadata"]["name"] = "j-old"
    assert not expect.satisfied("ns/j", [old])  # neither write shows yet
    new = pod("j-abc")
    new["metadata"]["name"] = "j-abc"
    assert not expect.satisfied("ns/j", [old, new])  # the deletion does not show yet
    assert expect.satisfied("ns/j", [new])
    assert expect.satisfied("ns/other", [])
