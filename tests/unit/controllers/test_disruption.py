"""The disruption controller's arithmetic: Kubernetes' int-or-percent rounding (up), the
desired healthy count, the granted evictions kept and forgotten, the status and its
condition, and the eviction side's check-and-spend."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.apimachinery import errors, timeutil
from setpoint.controllers import disruption
from setpoint.registry import eviction

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
counts = st.integers(min_value=0, max_value=10_000)
percents = st.integers(min_value=0, max_value=100)


def pod(name: str, *, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    return {"metadata": meta, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


@given(expected=counts, percent=percents)
def test_a_max_unavailable_percentage_is_rounded_up(expected: int, percent: int) -> None:
    desired = disruption.desired_healthy({"maxUnavailable": f"{percent}%"}, expected)
    assert desired == max(expected - math.ceil(percent * expected / 100), 0)
    assert 0 <= desired <= expected


@given(expected=counts, percent=percents)
def test_a_min_available_percentage_is_rounded_up(expected: int, percent: int) -> None:
    desired = disruption.desired_healthy({"minAvailable": f"{percent}%"}, expected)
    assert desired == math.ceil(percent * expected / 100)
    assert desired <= expected


@given(expected=counts, unavailable=counts)
def test_an_integer_max_unavailable_never_wants_fewer_than_zero(expected: int,
                                                                unavailable: int) -> None:
    assert disruption.desired_healthy({"maxUnavailable": unavailable}, expected) == max(
        expected - unavailable, 0)


@given(current=counts, desired=counts, expected=counts)
def test_disruptions_allowed_is_the_surplus_when_pods_are_expected(
        current: int, desired: int, expected: int) -> None:
    budget = {"metadata": {"generation": 3}, "status": {}}
    status = disruption.budget_status(budget, current=current, desired=desired,
                                      expected=expected, disrupted={}, now=NOW)
    wanted = max(current - desired, 0) if expected > 0 else 0
    assert status["disruptionsAllowed"] == wanted
    assert status["observedGeneration"] == 3
    [condition] = status["conditions"]
    assert condition["status"] == ("True" if wanted > 0 else "False")
    assert condition["reason"] == ("SufficientPods" if wanted > 0 else "InsufficientPods")
    assert condition["observedGeneration"] == 3


def test_the_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    budget = {"metadata": {"generation": 1}, "status": {}}
    first = disruption.budget_status(budget, current=3, desired=2, expected=3, disrupted={},
                                     now=NOW)
    later = disruption.budget_status({**budget, "status": first}, current=4, desired=2,
                                     expected=4, disrupted={}, now=NOW + timedelta(hours=1))
    assert later["conditions"][0]["lastTransitionTime"] == \
        first["conditions"][0]["lastTransitionTime"]
    flipped = disruption.budget_status({**budget, "status": later}, current=2, desired=2,
                                       expected=4, disrupted={}, now=NOW + timedelta(hours=2))
    assert flipped["conditions"][0]["lastTransitionTime"] == timeutil.format_time(
        NOW + timedelta(hours=2))


def test_granted_evictions_are_kept_until_their_pods_go_or_time_runs_out() -> None:
    recent = timeutil.format_time(NOW - timedelta(seconds=30))
    old = timeutil.format_time(NOW - timedelta(seconds=300))
    budget = {"status": {"disruptedPods": {"a": recent, "b": old, "c": recent,
                                           "gone": recent}}}
    pods = [pod("a"), pod("b"), pod("c", deleting=True), pod("d")]
    kept, recheck = disruption.disrupted_map(budget, pods, NOW, 120.0)
    assert kept == {"a": recent}
    assert recheck == pytest.approx(90.0)
    # a pod still recorded is not healthy, a pod being deleted is not either
    assert disruption.count_healthy(pods, kept) == 2  # b and d


def test_the_fail_safe_allows_nothing_and_says_why() -> None:
    budget = {"metadata": {"generation": 2}, "status": {
        "disruptionsAllowed": 3, "observedGeneration": 1, "currentHealthy": 4}}
    status = disruption.fail_safe(budget, 'found no controllers for pod "x"', NOW)
    assert status["disruptionsAllowed"] == 0
    assert status["currentHealthy"] == 4
    [condition] = status["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False", "SyncFailed", 'found no controllers for pod "x"')


@given(allowed=st.integers(min_value=1, max_value=50), spent=st.integers(min_value=1,
                                                                          max_value=60))
def test_spending_takes_one_at_a_time_and_then_refuses(allowed: int, spent: int) -> None:
    budget: dict[str, Any] = {"metadata": {"name": "b", "generation": 1}, "status": {
        "observedGeneration": 1, "disruptionsAllowed": allowed, "desiredHealthy": 2,
        "currentHealthy": 2 + allowed}}
    granted = 0
    refusals: list[errors.TooManyRequests] = []
    for i in range(spent):
        try:
            eviction.spend(budget, f"p{i}", "2026-01-01T00:00:00Z")
        except errors.TooManyRequests as e:
            refusals.append(e)
            continue
        granted += 1
    assert len(refusals) == spent - granted
    assert all(e.details["causes"] == [{
        "reason": "DisruptionBudget",
        "message": f"The disruption budget b needs 2 healthy pods and has {2 + allowed} "
                   "currently"}] for e in refusals)
    assert granted == min(allowed, spent)
    assert budget["status"]["disruptionsAllowed"] == allowed - granted
    assert len(budget["status"]["disruptedPods"]) == granted


def test_a_budget_with_too_many_granted_evictions_is_forbidden() -> None:
    budget = {"metadata": {"name": "b", "generation": 1}, "status": {
        "observedGeneration": 1, "disruptionsAllowed": 1,
        "disruptedPods": {f"p{i}": "2026-01-01T00:00:00Z"
                          for i in range(eviction.MAX_DISRUPTED_PODS + 1)}}}
    with pytest.raises(errors.Forbidden, match="DisruptedPods map too big"):
        eviction.check_budget(budget)


@given(labels=st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]),
                              max_size=2))
def test_evictions_ignore_empty_selectors_and_the_controller_does_not(
        labels: dict[str, str]) -> None:
    empty = {"spec": {"selector": {}}}
    missing: dict[str, Any] = {"spec": {}}
    assert not eviction.budget_selects(empty, labels)
    assert not eviction.budget_selects(missing, labels)
    assert disruption.selects(empty, labels)
    assert not disruption.selects(missing, labels)
    chosen = {"spec": {"selector": {"matchLabels": {"app": "a"}}}}
    assert eviction.budget_selects(chosen, labels) == disruption.selects(chosen, labels) == (
        labels.get("app") == "a")


def target_pod(status: str = "True", reason: str = "EvictionByEvictionAPI", *,
               age: float = 0.0, phase: str = "Running", deleting: bool = False
               ) -> dict[str, Any]:
    pod_obj = pod("p", deleting=deleting)
    pod_obj["status"]["phase"] = phase
    pod_obj["status"]["conditions"].append({
        "type": "DisruptionTarget", "status": status, "reason": reason,
        "message": "Eviction API: evicting",
        "lastTransitionTime": timeutil.format_time(NOW - timedelta(seconds=age))})
    return pod_obj


@pytest.mark.parametrize(("pod_obj", "wait"), [
    (target_pod(age=30), 90.0),
    (target_pod(age=300), 0.0),
    (target_pod(status="False", age=300), None),
    (target_pod(reason="TerminationByKubelet", age=300), None),
    (target_pod(phase="Failed", age=300), None),
    (target_pod(deleting=True, age=300), None),
    (pod("plain"), None),
])
def test_a_disruption_target_goes_stale_after_the_timeout(pod_obj: dict[str, Any],
                                                          wait: float | None) -> None:
    assert disruption.stale_target(pod_obj, NOW, 120.0) == (
        pytest.approx(wait) if wait is not None else None)


def test_a_stale_target_is_reset_to_false_and_the_rest_kept() -> None:
    reset = disruption.reset_target(target_pod(age=300), NOW)
    ready, target = reset["status"]["conditions"]
    assert ready == {"type": "Ready", "status": "True"}
    assert target == {"type": "DisruptionTarget", "status": "False", "lastProbeTime": None,
                      "lastTransitionTime": timeutil.format_time(NOW)}
    assert reset["status"]["phase"] == "Running"
