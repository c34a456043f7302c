"""The scheduler and the Service controllers as kubectl shows them, against ``setpoint
serve`` (its controllers in their own process, as it runs them by default). Nodes are
created with kubectl (no agent here), with a long heartbeat grace period so that they stay
Ready for the test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    proc = start_serve(tmp_path_factory.mktemp("serve"),
                       extra_args=["--node-monitor-grace-period", "3600", "--no-agent"])
    yield proc
    proc.stop()


def node(name: str, cpu: str) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata:
  name: {name}
status:
  capacity: {{cpu: "{cpu}", memory: 8Gi, pods: "20"}}
  allocatable: {{cpu: "{cpu}", memory: 8Gi, pods: "20"}}
  conditions:
  - {{type: Ready, status: "True", reason: KubeletReady, message: ready}}
"""


def pod(name: str, cpu: str, labels: str = "{}") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {labels}}}
spec:
  containers:
  - name: app
    image: python3
    ports: [{{name: http, containerPort: 8080}}]
    resources: {{requests: {{cpu: "{cpu}"}}}}
"""


def wide_node(kubectl: Kubectl, name: str) -> str:
    out = kubectl.run("get", "pod", name, "-o", "wide", "--no-headers").stdout.split()
    # NAME READY STATUS RESTARTS AGE IP NODE NOMINATED-NODE READINESS-GATES
    return out[6] if len(out) > 6 and out[6] != "<none>" else ""


def test_get_wide_describe_cordon_and_endpoints(kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl.run("apply", "-f", "-", input=node("small", "1") + "---" + node("big", "4"))
    kubectl.run("apply", "-f", "-", input=pod("web", "500m", "{app: web}"))
    assert eventually(lambda: wide_node(kubectl, "web") == "big", timeout=30)
    header = kubectl.run("get", "pod", "web", "-o", "wide").stdout.splitlines()[0]
    assert header.split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]

    # a pod that fits nowhere: describe shows why
    kubectl.run("apply", "-f", "-", input=pod("huge", "16"))

    def described() -> str:
        out = kubectl.run("describe", "pod", "huge").stdout
        return out if "FailedScheduling" in out else ""
    out = eventually(described, timeout=30)
    assert "0/2 nodes are available: 2 Insufficient cpu." in out
    assert "PodScheduled False" in " ".join(out.split())

    # cordon: new pods avoid the node; uncordon: it takes them again
    kubectl.run("cordon", "big")
    kubectl.run("apply", "-f", "-", input=pod("cordoned", "100m"))
    assert eventually(lambda: wide_node(kubectl, "cordoned") == "small", timeout=30)
    kubectl.run("uncordon", "big")
    kubectl.run("apply", "-f", "-", input=pod("uncordoned", "100m"))
    assert eventually(lambda: wide_node(kubectl, "uncordoned") == "big", timeout=30)

    # a Service over the web pod: once the pod reports an IP and readiness (what its agent
    # would write), kubectl shows its endpoints and slice
    kubectl.run("expose", "pod", "web", "--port", "80", "--target-port", "http")
    kubectl.run("patch", "pod", "web", "--subresource", "status", "--type", "merge", "-p",
                '{"status": {"phase": "Running", "podIP": "10.244.0.7", "podIPs": '
                '[{"ip": "10.244.0.7"}], "conditions": [{"type": "Ready", '
                '"status": "True"}]}}')

    def endpoints() -> str:
        out = kubectl.run("get", "endpoints", "web", "--no-headers", check=False).stdout
        return out if "10.244.0.7:8080" in out else ""
    assert eventually(endpoints, timeout=30)

    def slices() -> str:
        out = kubectl.run("get", "endpointslices", "-l", "kubernetes.io/service-name=web",
                          "--no-headers").stdout
        return out if "10.244.0.7" in out else ""
    line = eventually(slices, timeout=30)
    assert "IPv4" in line
    assert "8080" in line
