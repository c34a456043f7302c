"""The STATUS, READY and RESTARTS of ``kubectl get pods``, as Kubernetes' printer computes
them, and the rows of nodes, services, endpoints and endpoint slices."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from setpoint.registry import endpointslices, nodes, podprinting, services

NOW = datetime(2026, 1, 1, 1, 0, 0, tzinfo=UTC)


def pod(status: dict[str, Any], *, init: int = 0, containers: int = 1,
        deleted: bool = False, sidecar: bool = False, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleted:
        meta["deletionTimestamp"] = "2026-01-01T00:59:00Z"
    inits: list[dict[str, Any]] = [{"name": f"i{i}", "image": "x"} for i in range(init)]
    if sidecar and inits:
        inits[0]["restartPolicy"] = "Always"
    return {"metadata": meta,
            "spec": {"containers": [{"name": f"c{i}", "image": "x"} for i in range(containers)],
                     "initContainers": inits, **spec},
            "status": status}


def running(ready: bool = True, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": "c0", "ready": ready, "restartCount": restarts,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}, **extra}


def waiting(reason: str, restarts: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": "c0", "ready": False, "restartCount": restarts,
            "state": {"waiting": {"reason": reason}}, **extra}


def terminated(code: int, reason: str = "", signal: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": code}
    if reason:
        state["reason"] = reason
    if signal:
        state["signal"] = signal
    return {"name": "c0", "ready": False, "restartCount": 0, "state": {"terminated": state}}


CASES = [
    ("pending", pod({"phase": "Pending"}), "0/1", "Pending", "0"),
    ("creating", pod({"phase": "Pending", "containerStatuses": [waiting(
        "ContainerCreating")]}), "0/1", "ContainerCreating", "0"),
    ("running", pod({"phase": "Running", "containerStatuses": [running()]}), "1/1", "Running",
     "0"),
    ("running not ready", pod({"phase": "Running", "containerStatuses": [running(False)]}),
     "0/1", "Running", "0"),
    ("crash loop", pod({"phase": "Running", "containerStatuses": [waiting(
        "CrashLoopBackOff", 3, lastState={"terminated": {
            "exitCode": 1, "finishedAt": "2026-01-01T00:55:00Z"}})]}),
     "0/1", "CrashLoopBackOff", "3 (5m ago)"),
    ("completed", pod({"phase": "Succeeded", "containerStatuses": [terminated(
        0, "Completed")]}), "0/1", "Completed", "0"),
    ("exit code", pod({"phase": "Failed", "containerStatuses": [terminated(3)]}), "0/1",
     "ExitCode:3", "0"),
    ("signal", pod({"phase": "Failed", "containerStatuses": [terminated(137, signal=9)]}),
     "0/1", "Signal:9", "0"),
    ("terminating", pod({"phase": "Running", "containerStatuses": [running()]}, deleted=True),
     "1/1", "Terminating", "0"),
    ("finished pods do not terminate", pod({"phase": "Succeeded"}, deleted=True), "0/1",
     "Succeeded", "0"),
    ("node lost", pod({"phase": "Running", "reason": "NodeLost"}, deleted=True), "0/1",
     "Unknown", "0"),
    ("evicted", pod({"phase": "Failed", "reason": "Evicted"}), "0/1", "Evicted", "0"),
    ("init pending", pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i0", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
    ]}, init=1), "0/1", "Init:0/1", "0"),
    ("second init running", pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i0", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}},
        {"name": "i1", "restartCount": 0, "state": {"running": {}}}]}, init=2),
     "0/1", "Init:1/2", "0"),
    ("init crash loop", pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i0", "restartCount": 2, "state": {"waiting": {
            "reason": "CrashLoopBackOff"}}}]}, init=1), "0/1", "Init:CrashLoopBackOff", "2"),
    ("init failed", pod({"phase": "Failed", "initContainerStatuses": [
        {"name": "i0", "restartCount": 0, "state": {"terminated": {"exitCode": 2}}}]}, init=1),
     "0/1", "Init:ExitCode:2", "0"),
    ("sidecar started", pod({"phase": "Running", "initContainerStatuses": [
        {"name": "i0", "restartCount": 1, "started": True, "ready": True,
         "state": {"running": {}}}], "containerStatuses": [running()],
        "conditions": [{"type": "Initialized", "status": "True"}]}, init=1, sidecar=True),
     "2/2", "Running", "1"),
    ("gated", pod({"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
     "0/1", "SchedulingGated", "0"),
    ("one of two completed, one running", pod({"phase": "Running", "containerStatuses": [
        {**running(), "name": "c0"}, {**terminated(0, "Completed"), "name": "c1"}],
        "conditions": [{"type": "Ready", "status": "False"}]}, containers=2),
     "1/2", "NotReady", "0"),
    ("one of two completed, ready", pod({"phase": "Running", "containerStatuses": [
        {**running(), "name": "c0"}, {**terminated(0, "Completed"), "name": "c1"}],
        "conditions": [{"type": "Ready", "status": "True"}]}, containers=2),
     "1/2", "Running", "0"),
]


@pytest.mark.parametrize(("obj", "ready", "status", "restarts"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_pod_rows(obj: dict[str, Any], ready: str, status: str, restarts: str) -> None:
    row = podprinting.pod_row(obj, NOW)
    assert (row["Ready"], row["Status"], row["Restarts"]) == (ready, status, restarts)
    assert row["Age"] == "60m"


def test_wide_pod_cells() -> None:
    obj = pod({"phase": "Running", "podIPs": [{"ip": "10.0.0.9"}], "nominatedNodeName": "n2",
               "conditions": [{"type": "gate-a", "status": "True"},
                              {"type": "gate-b", "status": "False"}]},
              nodeName="n1", readinessGates=[{"conditionType": "gate-a"},
                                             {"conditionType": "gate-b"}])
    row = podprinting.pod_row(obj, NOW)
    assert [row[k] for k in ("IP", "Node", "Nominated Node", "Readiness Gates")] == [
        "10.0.0.9", "n1", "n2", "1/2"]


def test_malformed_pods_print_something() -> None:
    for junk in ({}, {"status": []}, {"spec": {"containers": "x"}, "status": {
            "containerStatuses": [None, 3, {"state": "x"}]}}):
        row = podprinting.pod_row(junk, NOW)
        assert row["Ready"].endswith("/0")


@pytest.mark.parametrize(("labels", "conditions", "unschedulable", "status", "roles"), [
    ({}, [{"type": "Ready", "status": "True"}], False, "Ready", "<none>"),
    ({"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""},
     [{"type": "Ready", "status": "False"}], True, "NotReady,SchedulingDisabled",
     "control-plane,worker"),
    ({"kubernetes.io/role": "edge"}, [], False, "Unknown", "edge"),
])
def test_node_rows(labels: dict[str, str], conditions: list[Any], unschedulable: bool,
                   status: str, roles: str) -> None:
    obj = {"metadata": {"name": "n", "labels": labels},
           "spec": {"unschedulable": unschedulable}, "status": {"conditions": conditions}}
    row = nodes.node_row(obj, NOW)
    assert (row["Status"], row["Roles"]) == (status, roles)
    assert row["Internal-IP"] == "<none>"
    assert row["OS-Image"] == "<unknown>"


def test_service_rows() -> None:
    lb = {"metadata": {"name": "lb"}, "spec": {
        "type": "LoadBalancer", "clusterIPs": ["10.96.0.9"], "externalIPs": ["1.2.3.4"],
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"},
                  {"port": 53, "protocol": "UDP"}], "selector": {"b": "2", "a": "1"}},
        "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}}
    row = services.service_row(lb, NOW)
    assert [row[k] for k in ("Type", "Cluster-IP", "External-IP", "Port(s)", "Selector")] == [
        "LoadBalancer", "10.96.0.9", "5.6.7.8,1.2.3.4", "80:30080/TCP,53/UDP", "a=1,b=2"]
    pending = {"spec": {"type": "LoadBalancer"}, "status": {}}
    assert services.external_ip(pending) == "<pending>"
    external = {"spec": {"type": "ExternalName", "externalName": "example.com"}}
    assert services.service_row(external, NOW)["External-IP"] == "example.com"
    assert services.service_row(external, NOW)["Cluster-IP"] == "<none>"


def test_endpoint_cells() -> None:
    many = {"subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 5)],
                         "ports": [{"port": 80}]}]}
    assert services.format_endpoints(many) == \
        "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more..."
    assert services.format_endpoints({}) == "<none>"
    assert services.format_endpoints({"subsets": [{"addresses": [{"ip": "fe80::1"}],
                                                   "ports": [{"port": 80}]}]}) == "[fe80::1]:80"
    assert endpointslices.format_ports([{"port": 80}, {"name": "x"}, {}]) == "80,x,*"
    assert endpointslices.format_endpoints([]) == "<unset>"
