"""Jobs, CronJobs and DaemonSets through the API: defaults, the generated Job selector,
validation with Kubernetes' messages, immutability, status subresources and tables."""

from __future__ import annotations

from typing import Any

import aiohttp

from setpoint.apimachinery import cron
from tests.integration.api.helpers import request

JOBS = "/apis/batch/v1/namespaces/default/jobs"
CRONJOBS = "/apis/batch/v1/namespaces/default/cronjobs"
DAEMONSETS = "/apis/apps/v1/namespaces/default/daemonsets"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
MERGE = "application/merge-patch+json"

Obj = dict[str, Any]


def pod_template(restart: str = "Never", **labels: str) -> Obj:
    return {"metadata": {"labels": labels} if labels else {},
            "spec": {"restartPolicy": restart,
                     "containers": [{"name": "c", "image": "python3"}]}}


def job(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": pod_template(), **spec}}


def cronjob(name: str, schedule: str = "*/5 * * * *", **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule,
                     "jobTemplate": {"spec": {"template": pod_template()}}, **spec}}


def daemonset(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": pod_template("Always", app=name), **spec}}


def causes(body: Obj) -> list[tuple[str, str]]:
    return [(c.get("field", ""), c.get("message", ""))
            for c in body.get("details", {}).get("causes", [])]


async def test_a_job_is_defaulted_and_its_selector_generated(
        http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", JOBS, job("pi", completions=5))
    assert status == 201, created
    spec, uid = created["spec"], created["metadata"]["uid"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"]) == (1, 5, 6)
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid,
        "job-name": "pi", "batch.kubernetes.io/job-name": "pi"}
    assert spec["template"]["spec"]["dnsPolicy"] == "ClusterFirst"
    assert created["metadata"]["generation"] == 1
    assert "status" not in created or not created["status"].get("conditions")

    _, only, _ = await request(http, "POST", JOBS, job("one"))
    assert (only["spec"]["parallelism"], only["spec"]["completions"]) == (1, 1)


async def test_job_validation_and_immutability(http: aiohttp.ClientSession) -> None:
    bad = job("bad", parallelism=-1, completionMode="Sometimes")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    status, body, _ = await request(http, "POST", JOBS, bad)
    assert status == 422, body
    found = causes(body)
    assert ("spec.parallelism", "Invalid value: -1: must be greater than or equal to 0") \
        in found
    assert ("spec.template.spec.restartPolicy",
            'Unsupported value: "Always": supported values: "OnFailure", "Never"') in found
    assert any(f == "spec.completionMode" and m.startswith("Unsupported value")
               for f, m in found)

    status, body, _ = await request(http, "POST", JOBS, job("idx", completionMode="Indexed",
                                                            parallelism=2))
    assert status == 422
    assert ("spec.completions", "Required value: when completion mode is Indexed") \
        in causes(body)

    status, body, _ = await request(http, "POST", JOBS, job(
        "huge", completionMode="Indexed", completions=100001))
    assert status == 422
    assert ("spec.completions", "Invalid value: 100001: must be less than or equal to 100000 "
                                "when completion mode is Indexed") in causes(body)

    chosen = job("chosen", selector={"matchLabels": {"app": "x"}})
    status, body, _ = await request(http, "POST", JOBS, chosen)
    assert status == 422
    assert any(m.endswith("`selector` not auto-generated") for _, m in causes(body))

    manual = job("manual", manualSelector=True, selector={"matchLabels": {"app": "y"}})
    manual["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    status, body, _ = await request(http, "POST", JOBS, manual)
    assert status == 201, body
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "y"}

    await request(http, "POST", JOBS, job("fixed"))
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "other"}]}}}}
    status, body, _ = await request(http, "PATCH", f"{JOBS}/fixed", patch,
                                    content_type=MERGE)
    assert status == 422, body
    assert any(f == "spec.template" and m.endswith("field is immutable")
               for f, m in causes(body))


async def test_job_status_and_table(http: aiohttp.ClientSession) -> None:
    await request(http, "POST", JOBS, job("t", completions=3, parallelism=2))
    status, body, _ = await request(http, "PATCH", f"{JOBS}/t/status", {"status": {
        "succeeded": 3, "startTime": "2024-01-01T00:00:00Z",
        "completionTime": "2024-01-01T00:01:05Z",
        "conditions": [{"type": "Complete", "status": "True"}]}}, content_type=MERGE)
    assert status == 200, body
    _, table, _ = await request(http, "GET", f"{JOBS}/t", headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Status", "Completions", "Duration", "Age", "Containers", "Images",
        "Selector"]
    assert table["rows"][0]["cells"][:4] == ["t", "Complete", "3/3", "65s"]
    status, body, _ = await request(http, "PATCH", f"{JOBS}/t/status",
                                    {"status": {"active": -1}}, content_type=MERGE)
    assert status == 422


async def test_cronjob_defaults_schedule_and_time_zone(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", CRONJOBS,
                                       cronjob("nightly", "@daily", timeZone="Europe/Paris"))
    assert status == 201, causes(created)
    spec = created["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"], spec["successfulJobsHistoryLimit"],
            spec["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    assert "parallelism" not in spec["jobTemplate"]["spec"]

    for schedule, message in [
            ("61 * * * *", "end of range (61) above maximum (59): 61"),
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            ("CRON_TZ=UTC * * * * *", "cannot use TZ or CRON_TZ in schedule, use timeZone "
                                      "field instead")]:
        status, body, _ = await request(http, "POST", CRONJOBS, cronjob("c", schedule))
        assert status == 422, schedule
        assert ("spec.schedule", f"Invalid value: {schedule!r}: {message}".replace(
            "'", '"')) in causes(body), causes(body)

    status, body, _ = await request(http, "POST", CRONJOBS,
                                    cronjob("z", timeZone="Mars/Olympus"))
    assert status == 422
    assert ("spec.timeZone", 'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus') \
        in causes(body)
    status, body, _ = await request(http, "POST", CRONJOBS,
                                    cronjob("p", concurrencyPolicy="Sometimes"))
    assert status == 422
    status, body, _ = await request(http, "POST", CRONJOBS, cronjob("x" * 53))
    assert status == 422
    assert any(m.endswith("must be no more than 52 characters") for _, m in causes(body))

    _, table, _ = await request(http, "GET", f"{CRONJOBS}/nightly", headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]][:7] == [
        "Name", "Schedule", "Timezone", "Suspend", "Active", "Last Schedule", "Age"]
    assert table["rows"][0]["cells"][:6] == ["nightly", "@daily", "Europe/Paris", False, 0,
                                             "<none>"]


async def test_daemonset_defaults_validation_and_table(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", DAEMONSETS, daemonset("agent"))
    assert status == 201, created
    assert created["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert created["spec"]["revisionHistoryLimit"] == 10

    bad = daemonset("bad")
    bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    status, body, _ = await request(http, "POST", DAEMONSETS, bad)
    assert status == 422
    found = causes(body)
    assert any(f == "spec.template.metadata.labels" and
               m.endswith("`selector` does not match template `labels`") for f, m in found)
    assert ("spec.template.spec.restartPolicy",
            'Unsupported value: "Never": supported values: "Always"') in found

    status, body, _ = await request(http, "PATCH", f"{DAEMONSETS}/agent", {"spec": {
        "selector": {"matchLabels": {"app": "agent", "tier": "x"}}}}, content_type=MERGE)
    assert status == 422
    assert any(f == "spec.selector" and m.endswith("field is immutable")
               for f, m in causes(body))

    _, table, _ = await request(http, "GET", DAEMONSETS, headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]][:8] == [
        "Name", "Desired", "Current", "Ready", "Up-to-date", "Available", "Node Selector",
        "Age"]
    assert table["rows"][0]["cells"][:7] == ["agent", 0, 0, 0, 0, 0, "<none>"]


async def test_the_kinds_are_in_category_all(http: aiohttp.ClientSession) -> None:
    _, batch, _ = await request(http, "GET", "/apis/batch/v1")
    by_name = {r["name"]: r for r in batch["resources"]}
    assert by_name["jobs"]["categories"] == ["all"]
    assert by_name["cronjobs"]["shortNames"] == ["cj"]
    assert "jobs/status" in by_name
    _, apps, _ = await request(http, "GET", "/apis/apps/v1")
    assert {r["name"] for r in apps["resources"]} >= {"daemonsets", "daemonsets/status"}


async def test_a_cronjob_schedule_longer_than_the_limit_is_422(
        http: aiohttp.ClientSession) -> None:
    # the Limits table: a schedule is parsed only up to 1,024 characters
    longest = "0 0 * * *" + " " * (cron.MAX_LENGTH - 9)
    status, body, _ = await request(http, "POST", CRONJOBS, cronjob("edge", longest))
    assert status == 201, causes(body)
    status, body, _ = await request(http, "POST", CRONJOBS, cronjob("over", longest + " "))
    assert status == 422, body
    assert [path for path, _ in causes(body)] == ["spec.schedule"]
    status, _, _ = await request(http, "GET", f"{CRONJOBS}/over")
    assert status == 404
