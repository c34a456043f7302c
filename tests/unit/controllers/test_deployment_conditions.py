"""The Progressing condition: progress moves its lastUpdateTime (the deadline starts over),
no progress for progressDeadlineSeconds is ProgressDeadlineExceeded, transitions keep
Kubernetes' reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from setpoint.controllers.deployment import DeploymentReconciler

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def deployment(conditions: list[dict[str, Any]], deadline: int = 600) -> dict[str, Any]:
    return {"metadata": {"name": "d", "generation": 1},
            "spec": {"replicas": 3, "progressDeadlineSeconds": deadline,
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
            "status": {"conditions": conditions}}


NEW = {"metadata": {"name": "d-abc"}, "spec": {"replicas": 2},
       "status": {"replicas": 2, "availableReplicas": 1}}


def progress(d: dict[str, Any], status: dict[str, Any], old_status: dict[str, Any],
             now: datetime) -> tuple[list[dict[str, Any]], float]:
    conditions = [dict(c) for c in d["status"]["conditions"]]
    wait = DeploymentReconciler()._progress(d, NEW, [], 3, False, status, old_status,
                                            conditions, now)
    return conditions, wait


def test_progress_refreshes_the_deadline() -> None:
    first, wait = progress(deployment([]), {"replicas": 2}, {}, T0)
    [condition] = first
    assert (condition["status"], condition["reason"]) == ("True", "ReplicaSetUpdated")
    assert wait == 600
    later = T0 + timedelta(seconds=500)
    second, _ = progress(deployment(first), {"replicas": 3}, {"replicas": 2}, later)
    assert second[0]["lastUpdateTime"] == "2026-01-01T00:08:20Z"
    assert second[0]["lastTransitionTime"] == condition["lastTransitionTime"]
    # no progress since: the deadline counts from the last progress, not the first
    still, wait = progress(deployment(second), {"replicas": 3}, {"replicas": 3},
                           later + timedelta(seconds=300))
    assert still[0]["reason"] == "ReplicaSetUpdated"
    assert 299 < wait < 301
    exceeded, wait = progress(deployment(second), {"replicas": 3}, {"replicas": 3},
                              later + timedelta(seconds=601))
    assert (exceeded[0]["status"], exceeded[0]["reason"]) == ("False",
                                                              "ProgressDeadlineExceeded")
    assert exceeded[0]["message"] == 'ReplicaSet "d-abc" has timed out progressing.'
    assert wait == 0


def test_paused_and_resumed() -> None:
    paused = deployment([])
    paused["spec"]["paused"] = True
    conditions, _ = progress(paused, {}, {}, T0)
    assert (conditions[0]["status"], conditions[0]["reason"]) == ("Unknown",
                                                                  "DeploymentPaused")
    resumed, _ = progress(deployment(conditions), {}, {}, T0 + timedelta(seconds=5))
    assert resumed[0]["reason"] in ("DeploymentResumed", "ReplicaSetUpdated")
