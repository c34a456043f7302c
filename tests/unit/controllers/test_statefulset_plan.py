"""The StatefulSet controller's decisions: which ordinal is created, which pod goes, in what
order (the pure :func:`plan`), the pods it makes and the status it counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import timeutil
from setpoint.controllers.statefulset import (
    BURST,
    Plan,
    ordinal_of,
    plan,
    pod_for,
    revision_name,
    running_and_ready,
    set_status,
)

Obj = dict[str, Any]
NOW = datetime(2026, 1, 1, tzinfo=UTC)
REV = "web-new"


def spec(replicas: int = 3, **extra: Any) -> Obj:
    return {"replicas": replicas, "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            **extra}


def pod(ordinal: int, *, ready: bool = True, revision: str = REV, phase: str = "Running",
        deleting: bool = False, ready_for: float = 3600) -> Obj:
    meta: Obj = {"name": f"web-{ordinal}", "labels": {"controller-revision-hash": revision}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    since = timeutil.format_time(NOW - timedelta(seconds=ready_for))
    return {"metadata": meta, "status": {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False",
         "lastTransitionTime": since}]}}


def pods(*items: Obj) -> dict[int, Obj]:
    return {int(p["metadata"]["name"].split("-")[1]): p for p in items}


def test_ordered_ready_creates_the_lowest_missing_ordinal_only() -> None:
    assert plan(spec(), {}, REV) == Plan(create=(0,))
    assert plan(spec(), pods(pod(0)), REV) == Plan(create=(1,))
    assert plan(spec(), pods(pod(0), pod(1)), REV) == Plan(create=(2,))
    assert plan(spec(), pods(pod(0), pod(1), pod(2)), REV) == Plan()


def test_ordered_ready_waits_for_the_previous_pod_to_be_running_and_ready() -> None:
    assert plan(spec(), pods(pod(0, ready=False)), REV) == Plan()
    assert plan(spec(), pods(pod(0, phase="Pending", ready=False)), REV) == Plan()
    # Ready but not Running (a stale condition) is not enough either
    assert plan(spec(), pods(pod(0, phase="Pending")), REV) == Plan()
    # a pod that is going is waited for, then made again
    assert plan(spec(), pods(pod(0, deleting=True)), REV) == Plan()


def test_a_failed_pod_is_deleted_to_be_created_again() -> None:
    assert plan(spec(), pods(pod(0), pod(1, phase="Failed", ready=False)), REV) == \
        Plan(delete=("web-1",))


def test_ordered_ready_scales_down_from_the_highest_ordinal_one_at_a_time() -> None:
    current = pods(pod(0), pod(1), pod(2), pod(3))
    assert plan(spec(replicas=1), current, REV) == Plan(delete=("web-3",))
    del current[3]
    assert plan(spec(replicas=1), current, REV) == Plan(delete=("web-2",))
    # the next goes only once the previous one is gone
    current[2] = pod(2, deleting=True)
    assert plan(spec(replicas=1), current, REV) == Plan()
    # and not while a wanted pod is unhealthy
    assert plan(spec(replicas=1), pods(pod(0, ready=False), pod(1)), REV) == Plan()


def test_parallel_creates_and_deletes_at_once() -> None:
    parallel = spec(replicas=3, podManagementPolicy="Parallel")
    assert plan(parallel, {}, REV) == Plan(create=(0, 1, 2))
    assert plan(parallel, pods(pod(1, ready=False)), REV) == Plan(create=(0, 2))
    assert plan(spec(replicas=1, podManagementPolicy="Parallel"),
                pods(pod(0), pod(1, ready=False), pod(2)), REV) == \
        Plan(delete=("web-2", "web-1"))


def test_parallel_creations_are_bounded_per_reconcile() -> None:
    huge = spec(replicas=2**31 - 1, podManagementPolicy="Parallel")
    assert plan(huge, {}, REV).create == tuple(range(BURST))


def test_rolling_update_goes_from_the_highest_ordinal_down_one_at_a_time() -> None:
    old = [pod(0, revision="web-old"), pod(1, revision="web-old"),
           pod(2, revision="web-old")]
    assert plan(spec(), pods(*old), REV) == Plan(delete=("web-2",))
    # web-2 is back at the new revision but not ready yet: wait
    assert plan(spec(), pods(old[0], old[1], pod(2, ready=False)), REV) == Plan()
    assert plan(spec(), pods(old[0], old[1], pod(2)), REV) == Plan(delete=("web-1",))
    assert plan(spec(), pods(old[0], pod(1), pod(2)), REV) == Plan(delete=("web-0",))
    assert plan(spec(), pods(pod(0), pod(1), pod(2)), REV) == Plan()


def test_rolling_update_honours_the_partition() -> None:
    partitioned = spec(updateStrategy={"type": "RollingUpdate",
                                       "rollingUpdate": {"partition": 2}})
    old = pods(pod(0, revision="web-old"), pod(1, revision="web-old"),
               pod(2, revision="web-old"))
    assert plan(partitioned, old, REV) == Plan(delete=("web-2",))
    old[2] = pod(2)
    assert plan(partitioned, old, REV) == Plan()


def test_on_delete_never_deletes_for_an_update() -> None:
    on_delete = spec(updateStrategy={"type": "OnDelete"})
    assert plan(on_delete, pods(pod(0, revision="web-old")), REV) == Plan(create=(1,))
    assert plan(on_delete, pods(pod(0, revision="web-old"), pod(1), pod(2)), REV) == Plan()


def test_ordinals_start_shifts_the_names() -> None:
    shifted = spec(replicas=2, ordinals={"start": 5})
    assert plan(shifted, {}, REV) == Plan(create=(5,))
    assert plan(shifted, pods(pod(5), pod(6), pod(0)), REV) == Plan(delete=("web-0",))


def test_ordinal_of_accepts_only_the_sets_own_names() -> None:
    assert ordinal_of("web", "web-0") == 0
    assert ordinal_of("web", "web-12") == 12
    for name in ("web-", "web-01", "web-x", "web-1-2", "webs-1", "web--1", "web-\u0661"):
        assert ordinal_of("web", name) is None, name


@given(st.text(max_size=30))
def test_ordinal_of_never_raises(name: str) -> None:
    found = ordinal_of("web", name)
    assert found is None or name == f"web-{found}"


def test_a_pod_carries_its_identity() -> None:
    statefulset: Obj = {"metadata": {"name": "web", "namespace": "default", "uid": "u1"},
                   "spec": {"serviceName": "nginx",
                            "template": {"metadata": {"labels": {"app": "web"}},
                                         "spec": {"containers": [{"name": "c", "image": "i"}]}},
                            "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}}
    made = pod_for(statefulset, 2, revision_name(statefulset))
    assert made["metadata"]["name"] == "web-2"
    assert made["metadata"]["labels"] == {
        "app": "web", "controller-revision-hash": revision_name(statefulset),
        "statefulset.kubernetes.io/pod-name": "web-2", "apps.kubernetes.io/pod-index": "2"}
    assert made["spec"]["hostname"] == "web-2"
    assert made["spec"]["subdomain"] == "nginx"
    assert made["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert made["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert revision_name(statefulset).startswith("web-")
    changed = {**statefulset, "spec": {**statefulset["spec"], "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i2"}]}}}}
    assert revision_name(changed) != revision_name(statefulset)


def test_status_counts_and_the_current_revision_follows_a_finished_update() -> None:
    sts = {"metadata": {"name": "web", "generation": 4},
           "spec": spec(replicas=3, minReadySeconds=10),
           "status": {"currentRevision": "web-old"}}
    items = [pod(0, revision="web-old"), pod(1), pod(2, ready_for=4),
             pod(3, deleting=True)]
    status, wait = set_status(sts, items, REV, NOW)
    assert status == {"replicas": 3, "readyReplicas": 3, "availableReplicas": 2,
                      "currentReplicas": 1, "updatedReplicas": 2,
                      "currentRevision": "web-old", "updateRevision": REV,
                      "observedGeneration": 4}
    assert wait == 6
    status, _ = set_status(sts, [pod(0), pod(1), pod(2)], REV, NOW)
    assert status["currentRevision"] == REV
    assert status["currentReplicas"] == 3


@st.composite
def situations(draw: st.DrawFn) -> tuple[Obj, dict[int, Obj]]:
    strategy: Obj = draw(st.sampled_from([
        {"type": "OnDelete"},
        {"type": "RollingUpdate",
         "rollingUpdate": {"partition": draw(st.integers(0, 6))}}]))
    chosen = spec(replicas=draw(st.integers(0, 5)),
                  podManagementPolicy=draw(st.sampled_from(["OrderedReady", "Parallel"])),
                  updateStrategy=strategy)
    present = draw(st.dictionaries(st.integers(0, 7), st.tuples(
        st.booleans(), st.sampled_from(["Running", "Pending", "Failed"]), st.booleans(),
        st.sampled_from([REV, "web-old"])), max_size=8))
    return chosen, {o: pod(o, ready=r, phase=ph, deleting=d, revision=rev)
                    for o, (r, ph, d, rev) in present.items()}


@given(situations())
def test_plan_properties(situation: tuple[Obj, dict[int, Obj]]) -> None:
    chosen, current = situation
    decided = plan(chosen, current, REV)
    wanted = range(chosen["replicas"])
    ordered = chosen["podManagementPolicy"] == "OrderedReady"
    # only missing wanted ordinals are created
    assert all(o in wanted and o not in current for o in decided.create)
    by_name = {p["metadata"]["name"]: (o, p) for o, p in current.items()}
    for name in decided.delete:
        ordinal, victim = by_name[name]
        assert not victim["metadata"].get("deletionTimestamp")
        if ordinal in wanted:  # a wanted pod goes only when finished or outdated
            assert victim["status"]["phase"] == "Failed" or (
                victim["metadata"]["labels"]["controller-revision-hash"] != REV
                and chosen["updateStrategy"]["type"] == "RollingUpdate"
                and ordinal >= chosen["updateStrategy"]["rollingUpdate"]["partition"])
    if ordered:
        assert len(decided.create) + len(decided.delete) <= 1
        for o in decided.create:  # every lower ordinal is there, Running and Ready
            assert all(running_and_ready(current[lower]) for lower in range(o))
        for name in decided.delete:
            ordinal, _ = by_name[name]
            if ordinal not in wanted:  # scale down: the highest goes first
                assert ordinal == max(o for o in current if o not in wanted)
