"""The Node status an agent reports, from a given sample of its machine."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from setpoint.node import machine

FACTS = machine.MachineFacts(cpus=4, memory_total=8 * 2**30, memory_available=4 * 2**30,
                             disk_total=100 * 2**30, disk_free=50 * 2**30, pids=300,
                             pid_max=4_194_304, machine_id="m", boot_id="b", kernel="6.1",
                             os_image="Debian", architecture="amd64")
IDENTITY = machine.NodeIdentity(name="worker-1", address="10.0.0.5", hostname="worker-1.lan",
                                port=10250, max_pods=110,
                                runtime_version="setpoint-process://1.32.0-setpoint",
                                labels={"tier": "gold"})
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def by_type(conditions: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {c["type"]: c for c in conditions}


def test_the_node_reports_its_capacity_addresses_endpoint_and_system_info() -> None:
    node = machine.node_object(IDENTITY, FACTS, T0)
    status = node["status"]
    assert status["capacity"] == {"cpu": "4", "memory": "8388608Ki", "pods": "110",
                                  "ephemeral-storage": "104857600Ki"}
    assert status["allocatable"] == status["capacity"]
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.0.0.5"},
                                   {"type": "Hostname", "address": "worker-1.lan"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    info = status["nodeInfo"]
    assert (info["machineID"], info["bootID"], info["kernelVersion"], info["osImage"],
            info["architecture"], info["operatingSystem"]) == (
        "m", "b", "6.1", "Debian", "amd64", "linux")
    assert info["kubeletVersion"] == machine.AGENT_VERSION
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "worker-1"
    assert node["metadata"]["labels"]["tier"] == "gold"


def test_conditions_are_the_kubelets_and_keep_their_transition_time() -> None:
    first = machine.conditions(FACTS, T0)
    assert [c["type"] for c in first] == ["MemoryPressure", "DiskPressure", "PIDPressure",
                                          "Ready"]
    ready = by_type(first)["Ready"]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True", "KubeletReady", "kubelet is posting ready status")
    assert by_type(first)["MemoryPressure"]["reason"] == "KubeletHasSufficientMemory"
    later = T0 + timedelta(minutes=1)
    starved = replace(FACTS, memory_available=10 * 2**20, disk_free=2**30)
    second = by_type(machine.conditions(starved, later, first))
    assert second["MemoryPressure"]["status"] == "True"
    assert second["MemoryPressure"]["reason"] == "KubeletHasInsufficientMemory"
    assert second["MemoryPressure"]["lastTransitionTime"] == "2026-01-01T00:01:00Z"
    assert second["DiskPressure"]["status"] == "True"
    # unchanged: the heartbeat moves, the transition does not
    assert second["Ready"]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert second["Ready"]["lastHeartbeatTime"] == "2026-01-01T00:01:00Z"


def test_the_probe_reads_this_machine(tmp_path: Path) -> None:
    facts = machine.Probe(tmp_path).sample()
    assert facts.cpus >= 1
    assert facts.memory_total > facts.memory_available > 0
    assert facts.disk_total >= facts.disk_free > 0
    assert facts.pids >= 1


def test_the_route_address_to_loopback_is_loopback() -> None:
    assert machine.route_address("127.0.0.1", 6443) == "127.0.0.1"
