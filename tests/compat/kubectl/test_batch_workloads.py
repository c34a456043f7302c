"""Jobs, CronJobs and DaemonSets with the real kubectl against ``setpoint serve`` and its own
node agent running real processes: a Job of 5 completions 2 at a time completes, a failing
Job reaches its backoff limit, a CronJob makes Jobs (``kubectl create job --from`` and, on
the real clock, its every-minute schedule), a DaemonSet follows a node joining and leaving.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import eventually
from tests.compat.kubectl.test_pods_run import apply, kubectl_for, start, stop_cleanly

pytestmark = [pytest.mark.compat, pytest.mark.slow]

Obj = dict[str, Any]


def job(name: str, code: int, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "main", "image": "python:3",
                                "command": ["python3", "-c",
                                            f"import sys; print('done'); sys.exit({code})"]}]}},
                **spec}}


def cronjob(name: str) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid",
                     "successfulJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 2,
                         "containers": [{"name": "tick", "image": "busybox",
                                         "command": ["sh", "-c", "echo tick"]}]}}}}}}


def daemonset(name: str) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 2,
                                           "containers": [{"name": "d", "image": "busybox",
                                                           "command": ["sleep", "3600"]}]}}}}


def joining_node(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "2", "memory": "2Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def test_jobs_cronjobs_and_daemonsets(tmp_path: Path) -> None:
    serve = start(tmp_path / "d")
    kubectl = kubectl_for(serve, tmp_path / "cache")
    try:
        eventually(lambda: kubectl.json("get", "node", "node-a"), timeout=60)
        eventually(lambda: kubectl.json("get", "serviceaccount", "default"), timeout=30)
        created = time.time()
        apply(kubectl, cronjob("every-minute"), job("five", 0, completions=5, parallelism=2),
              job("fails", 1, backoffLimit=0), daemonset("node-agent"))

        kubectl.run("wait", "--for=condition=complete", "job/five", "--timeout=120s",
                    timeout=130)
        five = kubectl.json("get", "job", "five")
        assert five["status"]["succeeded"] == 5
        assert five["status"].get("failed", 0) == 0
        pods = kubectl.json("get", "pods", "-l", "batch.kubernetes.io/job-name=five")["items"]
        assert len(pods) == 5
        assert kubectl.run("logs", pods[0]["metadata"]["name"]).stdout.strip() == "done"
        table = kubectl.run("get", "job", "five").stdout.split("\n")
        assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
        assert table[1].split()[:3] == ["five", "Complete", "5/5"]

        kubectl.run("wait", "--for=condition=failed", "job/fails", "--timeout=120s",
                    timeout=130)
        failed = [c for c in kubectl.json("get", "job", "fails")["status"]["conditions"]
                  if c["type"] == "Failed"]
        assert failed[0]["reason"] == "BackoffLimitExceeded"

        # a Job made from the CronJob's template by kubectl itself
        kubectl.run("create", "job", "--from=cronjob/every-minute", "by-hand")
        kubectl.run("wait", "--for=condition=complete", "job/by-hand", "--timeout=120s",
                    timeout=130)
        by_hand = kubectl.json("get", "job", "by-hand")
        assert by_hand["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        header = kubectl.run("get", "cronjob").stdout.split("\n")[0].split()
        assert header == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST",
                          "SCHEDULE", "AGE"]

        # the DaemonSet: a pod on node-a; a node joins, it gets one; it leaves, it goes
        def desired(n: int) -> bool:
            ds = kubectl.json("get", "daemonset", "node-agent")
            status = ds.get("status", {})
            return status.get("desiredNumberScheduled") == n and \
                status.get("currentNumberScheduled") == n
        eventually(lambda: desired(1), timeout=60)
        kubectl.run("apply", "-f", "-", input=json.dumps(joining_node("node-b")))
        eventually(lambda: desired(2), timeout=60)
        nodes = sorted(p["spec"].get("nodeName") or "" for p in kubectl.json(
            "get", "pods", "-l", "app=node-agent")["items"])
        assert "node-a" in nodes
        ds_table = kubectl.run("get", "ds", "node-agent").stdout.split("\n")
        assert ds_table[0].split()[:6] == ["NAME", "DESIRED", "CURRENT", "READY",
                                           "UP-TO-DATE", "AVAILABLE"]
        assert ds_table[1].split()[1] == "2"
        kubectl.run("delete", "node", "node-b")
        eventually(lambda: desired(1), timeout=60)
        eventually(lambda: len(kubectl.json("get", "pods", "-l", "app=node-agent")[
            "items"]) == 1, timeout=60)
        rollout = kubectl.run("rollout", "status", "daemonset/node-agent", "--timeout=90s",
                              timeout=100)
        assert 'daemon set "node-agent" successfully rolled out' in rollout.stdout
        everything = kubectl.run("get", "all").stdout
        for shown in ("job.batch/five", "cronjob.batch/every-minute",
                      "daemonset.apps/node-agent"):
            assert shown in everything, everything

        # the schedule itself, on the real clock: a Job within a minute or so of creation
        def scheduled() -> list[Obj]:
            return [j for j in kubectl.json("get", "jobs")["items"]
                    if j["metadata"]["name"].startswith("every-minute-")]
        found = eventually(scheduled, timeout=max(10.0, created + 130 - time.time()),
                           interval=1.0)
        annotation = found[0]["metadata"]["annotations"][
            "batch.kubernetes.io/cronjob-scheduled-timestamp"]
        assert annotation.endswith("+00:00")
        cj = eventually(lambda: kubectl.json("get", "cronjob", "every-minute")["status"].get(
            "lastScheduleTime") and kubectl.json("get", "cronjob", "every-minute"),
                        timeout=30)
        assert cj["status"]["lastScheduleTime"]
        kubectl.run("delete", "cronjob", "every-minute", "--cascade=foreground",
                    "--wait=true", timeout=120)
        assert scheduled() == []
    finally:
        stop_cleanly(serve, kubectl)
