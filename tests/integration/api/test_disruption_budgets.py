"""PodDisruptionBudgets through the API (validation, status, columns) and the eviction
subresource's rules, with budget statuses written by the test through ``/status`` (no
disruption controller runs here: what the eviction reads is exactly what the test wrote)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from tests.integration.api.helpers import request

NS = "/api/v1/namespaces/default"
PODS = f"{NS}/pods"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."

Obj = dict[str, Any]


def budget(name: str, selector: Obj | None = None, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                 "metadata": {"name": name},
                 "spec": {"selector": selector if selector is not None
                          else {"matchLabels": {"app": "web"}}, **spec}}
    return body


async def make_pod(http: aiohttp.ClientSession, name: str, *, phase: str = "Running",
                   ready: bool = True, labels: Obj | None = None) -> Obj:
    status, created, _ = await request(http, "POST", PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels if labels is not None else {"app": "web"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "app:1"}]}})
    assert status == 201, created
    created["status"] = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    status, written, _ = await request(http, "PUT", f"{PODS}/{name}/status", created)
    assert status == 200, written
    return written


async def set_status(http: aiohttp.ClientSession, name: str, **status: Any) -> Obj:
    _, current, _ = await request(http, "GET", f"{PDBS}/{name}")
    current["status"] = {"observedGeneration": current["metadata"]["generation"],
                         "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0,
                         "disruptionsAllowed": 0, **status}
    code, written, _ = await request(http, "PUT", f"{PDBS}/{name}/status", current)
    assert code == 200, written
    return written


async def evict(http: aiohttp.ClientSession, name: str, path: str = "",
                **delete_options: Any) -> tuple[int, Obj]:
    body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        body["deleteOptions"] = delete_options
    status, answer, _ = await request(http, "POST", f"{PODS}/{name}/eviction{path}", body)
    return status, answer


async def gone_or_going(http: aiohttp.ClientSession, name: str) -> bool:
    status, pod, _ = await request(http, "GET", f"{PODS}/{name}")
    return status == 404 or bool(pod["metadata"].get("deletionTimestamp"))


@pytest.mark.parametrize(("spec", "field", "message"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec",
     "minAvailable and maxUnavailable cannot be both set"),
    ({"minAvailable": -1}, "spec.minAvailable", "must be greater than or equal to 0"),
    ({"maxUnavailable": "half"}, "spec.maxUnavailable", "a valid percent string"),
    ({"minAvailable": "150%"}, "spec.minAvailable", "must not be greater than 100%"),
    ({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"},
     "spec.unhealthyPodEvictionPolicy", 'Unsupported value: "Sometimes"'),
    ({"minAvailable": 1, "selector": {"matchLabels": {"bad key!": "x"}}},
     "spec.selector.matchLabels", "name part must consist of"),
])
async def test_invalid_budgets_are_refused_as_kubernetes_does(
        http: aiohttp.ClientSession, spec: Obj, field: str, message: str) -> None:
    body = budget("bad", **spec)
    if "selector" in spec:
        body["spec"]["selector"] = spec["selector"]
    status, answer, _ = await request(http, "POST", PDBS, body)
    assert status == 422, answer
    assert answer["reason"] == "Invalid"
    causes = answer["details"]["causes"]
    assert any(c["field"] == field and message in c["message"] for c in causes), causes


async def test_a_budget_is_created_without_status_and_its_columns_are_kubectls(
        http: aiohttp.ClientSession) -> None:
    body = budget("web", minAvailable=2)
    body["status"] = {"disruptionsAllowed": 5}
    status, created, _ = await request(http, "POST", PDBS, body)
    assert status == 201, created
    assert "status" not in created or not created["status"].get("disruptionsAllowed")
    assert created["metadata"]["generation"] == 1
    assert (await request(http, "POST", PDBS, budget("pct", maxUnavailable="25%")))[0] == 201
    await set_status(http, "web", disruptionsAllowed=1)
    _, table, _ = await request(http, "GET", PDBS, headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"]
    rows = {r["cells"][0]: r["cells"][1:4] for r in table["rows"]}
    assert rows == {"web": ["2", "N/A", 1], "pct": ["N/A", "25%", 0]}
    # the spec may change; the generation moves, the status stays
    created = (await request(http, "GET", f"{PDBS}/web"))[1]
    created["spec"]["minAvailable"] = "50%"
    status, updated, _ = await request(http, "PUT", f"{PDBS}/web", created)
    assert status == 200, updated
    assert updated["metadata"]["generation"] == 2
    assert updated["status"]["disruptionsAllowed"] == 1


async def test_status_counts_may_not_be_negative(http: aiohttp.ClientSession) -> None:
    assert (await request(http, "POST", PDBS, budget("neg", minAvailable=1)))[0] == 201
    _, current, _ = await request(http, "GET", f"{PDBS}/neg")
    current["status"] = {"disruptionsAllowed": -1, "currentHealthy": 0, "desiredHealthy": 0,
                         "expectedPods": 0, "conditions": [{"type": "DisruptionAllowed",
                                                            "status": "Maybe"}]}
    status, answer, _ = await request(http, "PUT", f"{PDBS}/neg/status", current)
    assert status == 422, answer
    fields = {c["field"] for c in answer["details"]["causes"]}
    assert {"status.disruptionsAllowed", "status.conditions[0].status",
            "status.conditions[0].reason"} <= fields


async def test_discovery_names_the_short_name(http: aiohttp.ClientSession) -> None:
    _, listed, _ = await request(http, "GET", "/apis/policy/v1")
    found = {r["name"]: r for r in listed["resources"]}
    assert found["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    assert found["poddisruptionbudgets"]["namespaced"] is True
    assert "poddisruptionbudgets/status" in found


async def test_an_eviction_spends_the_budget_and_then_is_refused(
        http: aiohttp.ClientSession) -> None:
    for name in ("web-1", "web-2", "web-3"):
        await make_pod(http, name)
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=2)))[0] == 201
    await set_status(http, "web", disruptionsAllowed=1, currentHealthy=3, desiredHealthy=2,
                     expectedPods=3)
    status, answer = await evict(http, "web-1")
    assert status == 201, answer
    assert answer["status"] == "Success"
    assert await gone_or_going(http, "web-1")
    _, spent, _ = await request(http, "GET", f"{PDBS}/web")
    assert spent["status"]["disruptionsAllowed"] == 0
    assert list(spent["status"]["disruptedPods"]) == ["web-1"]
    [condition] = spent["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed", "False", "InsufficientPods")

    status, answer = await evict(http, "web-2")
    assert status == 429, answer
    assert answer["reason"] == "TooManyRequests"
    assert answer["message"] == VIOLATION
    assert answer["details"]["causes"] == [{
        "reason": "DisruptionBudget",
        "message": "The disruption budget web needs 2 healthy pods and has 3 currently"}]
    assert not await gone_or_going(http, "web-2")


async def test_the_evicted_pod_is_marked_a_disruption_target(
        http: aiohttp.ClientSession) -> None:
    await make_pod(http, "solo", labels={"app": "solo"})
    status, answer = await evict(http, "solo", gracePeriodSeconds=30)
    assert status == 201, answer
    _, pod, _ = await request(http, "GET", f"{PODS}/solo")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    target = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in target] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")]


async def test_a_budget_not_yet_observed_refuses_evictions(
        http: aiohttp.ClientSession) -> None:
    await make_pod(http, "web-1")
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=0)))[0] == 201
    await set_status(http, "web", observedGeneration=0, disruptionsAllowed=1)
    status, answer = await evict(http, "web-1")
    assert status == 429, answer
    assert answer["details"]["causes"][0]["message"] == (
        "The disruption budget web is still being processed by the server.")
    assert answer["details"]["retryAfterSeconds"] == 10


async def test_two_budgets_for_one_pod_are_a_server_error(http: aiohttp.ClientSession) -> None:
    await make_pod(http, "web-1")
    for name in ("a", "b"):
        assert (await request(http, "POST", PDBS, budget(name, maxUnavailable=1)))[0] == 201
        await set_status(http, name, disruptionsAllowed=1)
    status, answer = await evict(http, "web-1")
    assert status == 500, answer
    assert answer["message"] == ("This pod has more than one PodDisruptionBudget, which the "
                                 "eviction subresource does not support.")
    assert answer["status"] == "Failure"
    assert not await gone_or_going(http, "web-1")


async def test_pods_that_need_no_budget(http: aiohttp.ClientSession) -> None:
    """Pending, finished, and (with an empty selector, which evictions ignore) unselected
    pods go even though the budget allows nothing."""
    await make_pod(http, "pending", phase="Pending", ready=False)
    await make_pod(http, "done", phase="Succeeded", ready=False)
    await make_pod(http, "other", labels={"app": "other"})
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=5)))[0] == 201
    assert (await request(http, "POST", PDBS, budget("all", selector={},
                                                     minAvailable=5)))[0] == 201
    await set_status(http, "web", disruptionsAllowed=0)
    await set_status(http, "all", disruptionsAllowed=0)
    for name in ("pending", "done", "other"):
        status, answer = await evict(http, name)
        assert status == 201, (name, answer)
        assert await gone_or_going(http, name)
    _, untouched, _ = await request(http, "GET", f"{PDBS}/web")
    assert "disruptedPods" not in untouched["status"]


async def test_unready_pods_go_when_the_budget_is_met_or_always_allowed(
        http: aiohttp.ClientSession) -> None:
    await make_pod(http, "web-1", ready=False)
    await make_pod(http, "web-2", ready=False)
    await make_pod(http, "job-1", ready=False, labels={"app": "job"})
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=2)))[0] == 201
    # met (3 healthy of the 2 wanted) though nothing may be disrupted: the unready pod goes
    # without spending the budget
    await set_status(http, "web", currentHealthy=3, desiredHealthy=2, disruptionsAllowed=0)
    assert (await evict(http, "web-1"))[0] == 201
    assert await gone_or_going(http, "web-1")
    # not met: the unready pod is protected by the default IfHealthyBudget policy
    await set_status(http, "web", currentHealthy=1, desiredHealthy=2, disruptionsAllowed=0)
    status, answer = await evict(http, "web-2")
    assert status == 429, answer
    # AlwaysAllow lets unready pods go whatever the budget says
    assert (await request(http, "POST", PDBS, budget(
        "job", selector={"matchLabels": {"app": "job"}}, minAvailable=2,
        unhealthyPodEvictionPolicy="AlwaysAllow")))[0] == 201
    await set_status(http, "job", currentHealthy=0, desiredHealthy=2, disruptionsAllowed=0)
    assert (await evict(http, "job-1"))[0] == 201
    assert await gone_or_going(http, "job-1")
    _, job, _ = await request(http, "GET", f"{PDBS}/job")
    assert "disruptedPods" not in job["status"]


async def test_dry_run_checks_and_writes_nothing(http: aiohttp.ClientSession) -> None:
    await make_pod(http, "web-1")
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=0)))[0] == 201
    before = await set_status(http, "web", currentHealthy=1, disruptionsAllowed=1)
    status, answer = await evict(http, "web-1", "?dryRun=All")
    assert status == 201, answer
    status, answer = await evict(http, "web-1", dryRun=["All"])
    assert status == 201, answer
    assert not await gone_or_going(http, "web-1")
    _, after, _ = await request(http, "GET", f"{PDBS}/web")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    _, pod, _ = await request(http, "GET", f"{PODS}/web-1")
    assert all(c["type"] != "DisruptionTarget" for c in pod["status"]["conditions"])
    await set_status(http, "web", currentHealthy=1, disruptionsAllowed=0)
    assert (await evict(http, "web-1", "?dryRun=All"))[0] == 429


async def test_a_stale_precondition_is_a_conflict(http: aiohttp.ClientSession) -> None:
    await make_pod(http, "web-1", labels={"app": "solo"})
    status, answer = await evict(http, "web-1", preconditions={"resourceVersion": "1"})
    assert status == 409, answer
    assert not await gone_or_going(http, "web-1")


async def test_concurrent_evictions_never_spend_more_than_the_budget(
        http: aiohttp.ClientSession) -> None:
    names = [f"web-{i}" for i in range(8)]
    for name in names:
        await make_pod(http, name)
    assert (await request(http, "POST", PDBS, budget("web", minAvailable=6)))[0] == 201
    await set_status(http, "web", currentHealthy=8, desiredHealthy=6, expectedPods=8,
                     disruptionsAllowed=2)
    answers = await asyncio.gather(*(evict(http, name) for name in names))
    codes = sorted(code for code, _ in answers)
    assert codes == [201, 201, 429, 429, 429, 429, 429, 429], answers
    _, spent, _ = await request(http, "GET", f"{PDBS}/web")
    granted = {name for name, (code, _) in zip(names, answers, strict=True) if code == 201}
    assert set(spent["status"]["disruptedPods"]) == granted
    assert spent["status"]["disruptionsAllowed"] == 0
    for name in names:
        assert await gone_or_going(http, name) == (name in granted)
