"""The rolling-update arithmetic, under any pace of pods becoming available: never more than
replicas + maxSurge pods asked for, never fewer than replicas - maxUnavailable available, and
the rollout always finishes; fenceposts, hashes and deletion order as Kubernetes has them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.controllers import rollout
from setpoint.controllers.rollout import Sets

amounts = st.one_of(st.integers(0, 12), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@given(desired=st.integers(0, 40), surge=amounts, unavailable=amounts,
       old_sets=st.integers(1, 3), pace=st.lists(st.integers(0, 5), max_size=60))
@settings(max_examples=300, deadline=None)
def test_a_rollout_stays_within_its_bounds_and_finishes(
        desired: int, surge: Any, unavailable: Any, old_sets: int, pace: list[int]) -> None:
    most_surge, most_unavailable = rollout.fenceposts(surge, unavailable, desired)
    # before: the replicas spread over fully available old ReplicaSets
    olds = [desired // old_sets + (1 if i < desired % old_sets else 0) for i in range(old_sets)]
    old_available = list(olds)
    new, new_available = 0, 0
    pace = [*pace, *[1] * (desired * 4 + 10)]  # then at least one pod a round
    for ready_now in pace:
        # the controller's step: grow the new ReplicaSet, or else shrink the old ones
        grown = rollout.new_replicas(desired, most_surge, Sets(new, new_available),
                                     [Sets(r, a) for r, a in zip(olds, old_available,
                                                                 strict=True)])
        if grown != new:
            new = grown
        else:
            olds = rollout.scale_down_old(desired, most_unavailable, Sets(new, new_available),
                                          [Sets(r, a) for r, a in zip(olds, old_available,
                                                                      strict=True)])
        # the ReplicaSets delete unavailable pods first: old pods are all available
        old_available = [min(a, r) for a, r in zip(old_available, olds, strict=True)]
        new_available = min(new_available, new)
        assert new + sum(olds) <= desired + most_surge
        assert new_available + sum(old_available) >= min(desired - most_unavailable,
                                                          desired)
        if new == desired and new_available == desired and not any(olds):
            break
        # the world: some new pods become available
        new_available = min(new, new_available + ready_now)
    else:
        raise AssertionError(f"not finished after {len(pace)} rounds")


def test_fenceposts_round_as_kubernetes() -> None:
    assert rollout.fenceposts("25%", "25%", 10) == (3, 2)
    assert rollout.fenceposts("25%", "25%", 1) == (1, 0)
    assert rollout.fenceposts(0, 0, 5) == (0, 1)
    assert rollout.fenceposts("0%", "0%", 5) == (0, 1)
    assert rollout.fenceposts(2, "100%", 3) == (2, 3)


def test_new_replicas_never_exceed_desired() -> None:
    assert rollout.new_replicas(3, 1, Sets(5, 5), []) == 3
    assert rollout.new_replicas(3, 1, Sets(0, 0), [Sets(3, 3)]) == 1
    assert rollout.new_replicas(3, 10, Sets(0, 0), [Sets(3, 3)]) == 3


def test_template_hash_ignores_its_own_label_and_counts_collisions() -> None:
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}
    labelled = {**template, "metadata": {"labels": {"app": "web", "pod-template-hash": "zz"}}}
    first = rollout.template_hash(template)
    assert first == rollout.template_hash(labelled)
    assert first != rollout.template_hash(template, 1)
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert rollout.same_template(template, labelled)


def _pod(name: str, *, node: str = "n", phase: str = "Running", ready: str | None = None,
         restarts: int = 0, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    conditions = [] if ready is None else [{"type": "Ready", "status": "True",
                                            "lastTransitionTime": ready}]
    return {"metadata": {"name": name, "creationTimestamp": created},
            "spec": {"nodeName": node},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"restartCount": restarts}]}}


def test_deletion_order() -> None:
    pods = [
        _pod("ready-long", ready="2026-01-01T00:00:00Z"),
        _pod("ready-recent", ready="2026-01-01T01:00:00Z"),
        _pod("not-ready", restarts=0),
        _pod("not-ready-restarting", restarts=3),
        _pod("pending", phase="Pending"),
        _pod("unscheduled", node="", phase="Pending"),
        _pod("ready-recent-newer", ready="2026-01-01T01:00:00Z",
             created="2026-01-01T00:30:00Z"),
    ]
    assert [p["metadata"]["name"] for p in rollout.deletion_order(pods)] == [
        "unscheduled", "pending", "not-ready-restarting", "not-ready", "ready-recent-newer",
        "ready-recent", "ready-long"]
