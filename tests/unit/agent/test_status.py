"""Pod status as the kubelet reports it: phase, conditions, container statuses, QoS."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from setpoint.agent import records as rc
from setpoint.agent import status as st

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def pod(policy: str = "Always", inits: tuple[str, ...] = (), containers: tuple[str, ...] = ("b",
        "a"), **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"restartPolicy": policy,
                     "initContainers": [{"name": n, "image": "busybox"} for n in inits],
                     "containers": [{"name": n, "image": "busybox"} for n in containers],
                     **spec}}


def record(p: dict[str, Any]) -> rc.PodRecord:
    rec = rc.PodRecord(p, start_time=T0)
    rec.sandbox_ready = True
    return rec


def run(rec: rc.PodRecord, *names: str) -> None:
    for n in names:
        rec.containers[n].run(T0, rc.container_id("u", n, 0))


def exit_(rec: rc.PodRecord, name: str, code: int) -> None:
    rec.containers[name].terminate(T0 + timedelta(seconds=5), code,
                                   "Completed" if code == 0 else "Error")


def cond(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == ctype)


def test_a_new_pod_is_pending_with_containers_creating() -> None:
    rec = rc.PodRecord(pod(), start_time=T0)
    s = st.pod_status(rec, now=T0)
    assert s["phase"] == "Pending"
    assert [c["type"] for c in s["conditions"]] == [
        "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    assert cond(s, "PodReadyToStartContainers")["status"] == "False"
    assert cond(s, "Ready") == {"type": "Ready", "status": "False", "lastProbeTime": None,
                                "lastTransitionTime": "2024-05-01T12:00:00Z",
                                "reason": "ContainersNotReady",
                                "message": "containers with unready status: [b a]"}
    assert [c["name"] for c in s["containerStatuses"]] == ["a", "b"]  # sorted by name
    assert s["containerStatuses"][0] == {
        "name": "a", "state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {},
        "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
        "started": False}
    assert s["qosClass"] == "BestEffort"
    assert s["startTime"] == "2024-05-01T12:00:00Z"
    assert "initContainerStatuses" not in s


def test_running_and_ready() -> None:
    rec = record(pod())
    rec.pod_ip, rec.host_ip = "10.0.0.2", "192.168.0.1"
    run(rec, "a", "b")
    for c in rec.containers.values():
        c.ready = c.started = True
    s = st.pod_status(rec, now=T0 + timedelta(seconds=3))
    assert s["phase"] == "Running"
    assert all(c["status"] == "True" for c in s["conditions"])
    assert s["podIP"] == "10.0.0.2"
    assert s["podIPs"] == [{"ip": "10.0.0.2"}]
    assert s["hostIPs"] == [{"ip": "192.168.0.1"}]
    a = s["containerStatuses"][0]
    assert a["state"] == {"running": {"startedAt": "2024-05-01T12:00:00Z"}}
    assert a["containerID"].startswith("setpoint://")
    # lastTransitionTime moves only when the status flips
    ready = cond(s, "Ready")["lastTransitionTime"]
    assert ready == "2024-05-01T12:00:03Z"
    s2 = st.pod_status(rec, now=T0 + timedelta(seconds=60))
    assert cond(s2, "Ready")["lastTransitionTime"] == ready


@pytest.mark.parametrize(("policy", "codes", "terminal", "phase"), [
    ("Always", (0, 0), False, "Running"),       # both restart
    ("Always", (0, 1), True, "Failed"),         # killed: terminal by exit codes
    ("Always", (0, 0), True, "Succeeded"),
    ("OnFailure", (0, 0), False, "Succeeded"),
    ("OnFailure", (0, 1), False, "Running"),    # the failed one restarts
    ("Never", (0, 0), False, "Succeeded"),
    ("Never", (0, 1), False, "Failed"),
], ids=str)
def test_phase_when_all_stopped(policy: str, codes: tuple[int, int], terminal: bool,
                                phase: str) -> None:
    rec = record(pod(policy))
    run(rec, "a", "b")
    exit_(rec, "a", codes[0])
    exit_(rec, "b", codes[1])
    rec.terminal = terminal
    s = st.pod_status(rec, now=T0)
    assert s["phase"] == phase
    if phase in ("Succeeded", "Failed"):
        reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
        assert cond(s, "ContainersReady")["reason"] == reason
        assert cond(s, "Ready")["reason"] == reason


def test_crash_loop_keeps_the_pod_running() -> None:
    rec = record(pod(containers=("a",)))
    run(rec, "a")
    exit_(rec, "a", 2)
    rec.containers["a"].wait("CrashLoopBackOff", "back-off 10s restarting failed container=a "
                             "pod=p_ns(u)")
    s = st.pod_status(rec, now=T0)
    assert s["phase"] == "Running"
    a = s["containerStatuses"][0]
    assert a["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert a["lastState"]["terminated"]["exitCode"] == 2
    assert a["lastState"]["terminated"]["reason"] == "Error"


def test_init_containers() -> None:
    rec = record(pod(inits=("i1", "i2"), containers=("c",)))
    s = st.pod_status(rec, now=T0)
    assert s["phase"] == "Pending"
    assert [c["name"] for c in s["initContainerStatuses"]] == ["i1", "i2"]  # spec order
    assert s["initContainerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert s["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    assert cond(s, "Initialized") == {
        "type": "Initialized", "status": "False", "lastProbeTime": None,
        "lastTransitionTime": "2024-05-01T12:00:00Z", "reason": "ContainersNotInitialized",
        "message": "containers with incomplete status: [i1 i2]"}
    run(rec, "i1")
    exit_(rec, "i1", 0)
    rec.containers["i1"].ready = True
    s = st.pod_status(rec, now=T0)
    assert cond(s, "Initialized")["message"] == "containers with incomplete status: [i2]"
    run(rec, "i2")
    exit_(rec, "i2", 0)
    rec.containers["i2"].ready = True
    run(rec, "c")
    s = st.pod_status(rec, now=T0)
    assert s["phase"] == "Running"
    assert cond(s, "Initialized")["status"] == "True"


def test_a_failed_init_container_fails_a_never_pod() -> None:
    rec = record(pod("Never", inits=("i1",), containers=("c",)))
    run(rec, "i1")
    exit_(rec, "i1", 3)
    assert st.phase(rec) == "Failed"
    rec2 = record(pod("Always", inits=("i1",), containers=("c",)))
    run(rec2, "i1")
    exit_(rec2, "i1", 3)
    assert st.phase(rec2) == "Pending"  # it will be restarted


def test_readiness_gates_and_foreign_conditions() -> None:
    p = pod(containers=("a",), readinessGates=[{"conditionType": "example.com/ok"}])
    p["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "False"}]}
    rec = record(p)
    run(rec, "a")
    rec.containers["a"].ready = True
    s = st.pod_status(rec, now=T0)
    assert s["conditions"][0] == {"type": "DisruptionTarget", "status": "False"}
    assert cond(s, "ContainersReady")["status"] == "True"
    assert cond(s, "Ready")["reason"] == "ReadinessGatesNotReady"
    assert cond(s, "Ready")["message"] == ("corresponding condition of pod readiness gate "
                                           "'example.com/ok' does not exist.")
    p["status"]["conditions"].append({"type": "example.com/ok", "status": "True"})
    assert cond(st.pod_status(rec, now=T0), "Ready")["status"] == "True"


@pytest.mark.parametrize(("resources", "qos"), [
    ([{}], "BestEffort"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1000m",
                                                             "memory": "1Gi"}}], "Guaranteed"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}], "Burstable"),
    ([{"requests": {"cpu": "1"}}], "Burstable"),
    ([{"limits": {"cpu": "1", "memory": "1Gi"}}, {}], "Burstable"),
])
def test_qos_class(resources: list[dict[str, Any]], qos: str) -> None:
    p = {"spec": {"containers": [{"name": f"c{i}", "resources": r}
                                 for i, r in enumerate(resources)]}}
    assert st.qos_class(p) == qos


def test_volume_mounts_in_container_status() -> None:
    p = pod(containers=("a",))
    p["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "v", "mountPath": "/data"}, {"name": "s", "mountPath": "/s", "readOnly": True}]
    s = st.pod_status(record(p), now=T0)
    assert s["containerStatuses"][0]["volumeMounts"] == [
        {"name": "v", "mountPath": "/data"},
        {"name": "s", "mountPath": "/s", "readOnly": True, "recursiveReadOnly": "Disabled"}]


def test_records_round_trip_through_json() -> None:
    rec = record(pod(inits=("i",), containers=("a",)))
    run(rec, "i")
    exit_(rec, "i", 0)
    run(rec, "a")
    exit_(rec, "a", 1)
    rec.containers["a"].wait("CrashLoopBackOff", "m")
    rec.containers["a"].restart_count = 3
    rec.containers["a"].backoff.restarted(exited_at=5, now=5)
    rec.pod_ip = "10.0.0.9"
    st.pod_status(rec, now=T0)
    again = rc.PodRecord.from_json(rec.to_json())
    assert again.to_json() == rec.to_json()
    assert st.pod_status(again, now=T0) == st.pod_status(rec, now=T0)
