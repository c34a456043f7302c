"""Pods in network namespaces of their own reach a Service's cluster IP, with kubectl.

``setpoint serve --pod-isolation namespaces`` (root and iproute2 only): each pod has its own
network namespace with an address from the pod CIDR on the host bridge, and its default route
is the bridge. The service proxy makes the service range local to the machine, so a
connection from a pod to a cluster IP is delivered to the proxy on this host and forwarded to
an endpoint's pod address over the same bridge; nothing is forwarded or translated to the
outside, and IP forwarding is left as it was. Each server gets a pod /24 and a service /24 of
its own (servers in other test workers share this machine and the ``setpoint0`` bridge).
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_pods_run import kubectl_for, pod_processes, stop_cleanly
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                 reason="network namespaces and local routes: needs root "
                                        "and iproute2")]

NODE = "node-ns"
_ranges = itertools.count()


def ip_forward() -> str:
    return Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()


@pytest.fixture(scope="module")
def ranges() -> tuple[str, str]:
    """A pod /24 and a service /24 no other server on this machine uses."""
    n = (os.getpid() + next(_ranges)) % 250
    return f"10.{120 + os.getpid() % 20}.{n}.0/24", f"10.{170 + os.getpid() % 20}.{n}.0/24"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, ranges: tuple[str, str]
          ) -> Iterator[ServeProcess]:
    pods, services = ranges
    forwarding = ip_forward()
    proc = start_serve(tmp_path_factory.mktemp("serve"), extra_args=[
        "--node-name", NODE, "--pod-isolation", "namespaces", "--pod-cidr", pods,
        "--service-cluster-ip-range", services], timeout=40)
    try:
        yield proc
    finally:
        stop_cleanly(proc, kubectl_for(proc, tmp_path_factory.mktemp("cleanup")))
        # the runtime and the proxy never turned forwarding on (packets stay on this machine)
        assert ip_forward() == forwarding


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = kubectl_for(serve, tmp_path_factory.mktemp("kubecache"))
    eventually(lambda: k.json("get", "node", NODE), timeout=60)
    return k


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def server_pod(name: str) -> dict[str, Any]:
    """``python3 -m http.server 8080`` on every address of its namespace, serving a file
    that names its pod."""
    script = ('d=$(mktemp -d) && cd "$d" && echo "$POD_NAME" > who && '
              'exec python3 -m http.server 8080')
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "echo"}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "containers": [{
                "name": "web", "image": "python:3.12", "command": ["sh", "-c", script],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "POD_NAME",
                         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "readinessProbe": {"httpGet": {"path": "/who", "port": 8080},
                                   "periodSeconds": 1}}]}}


def client_pod(name: str, ip: str) -> dict[str, Any]:
    fetch = (f'import urllib.request; print(urllib.request.urlopen("http://{ip}/who", '
             'timeout=10).read().decode().strip())')
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{
                "name": "client", "image": "python:3.12",
                "command": ["python3", "-c", fetch]}]}}


def phase(kubectl: Kubectl, name: str) -> str:
    return str(kubectl.json("get", "pod", name)["status"].get("phase", ""))


def test_a_pod_in_its_own_network_namespace_reaches_a_cluster_ip(
        kubectl: Kubectl, ranges: tuple[str, str]) -> None:
    pods, services = ranges
    apply(kubectl, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
                    "spec": {"selector": {"app": "echo"},
                             "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
          *(server_pod(f"echo-{i}") for i in range(3)))
    kubectl.run("wait", "--for=condition=Ready", "pod/echo-0", "pod/echo-1", "pod/echo-2",
                "--timeout=90s", timeout=100)
    # three servers on the same port, each in its own namespace with an address of the range
    addresses = {p["status"]["podIP"] for p in kubectl.json(
        "get", "pods", "-l", "app=echo")["items"]}
    assert len(addresses) == 3
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network(pods) for a in addresses)
    ip = kubectl.json("get", "service", "echo")["spec"]["clusterIP"]
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(services)
    eventually(lambda: len(kubectl.json("get", "endpoints", "echo").get(
        "subsets", [{}])[0].get("addresses", [])) == 3, timeout=30)

    # a client pod, from its own namespace: through the bridge to the proxy on the host
    apply(kubectl, client_pod("client", ip))
    eventually(lambda: phase(kubectl, "client") in ("Succeeded", "Failed"), timeout=60)
    answer = kubectl.run("logs", "client").stdout.strip()
    assert phase(kubectl, "client") == "Succeeded", answer
    assert answer in {"echo-0", "echo-1", "echo-2"}
    client = kubectl.json("get", "pod", "client")
    assert ipaddress.ip_address(client["status"]["podIP"]) in ipaddress.ip_network(pods)
    assert pod_processes(client["metadata"]["uid"]) == set()  # it exited: nothing is left
    kubectl.run("delete", "pod", "client")

    # round robin: more clients, and more than one server answers them
    answers: set[str] = set()
    for i in range(4):
        apply(kubectl, client_pod(f"client-{i}", ip))
    for i in range(4):
        eventually(lambda i=i: phase(kubectl, f"client-{i}") in ("Succeeded", "Failed"),
                   timeout=60)
        assert phase(kubectl, f"client-{i}") == "Succeeded"
        answers.add(kubectl.run("logs", f"client-{i}").stdout.strip())
    assert answers <= {"echo-0", "echo-1", "echo-2"}
    assert len(answers) >= 2
    kubectl.run("delete", "pods", "-l", "app=echo", "--wait=true", timeout=60)
    kubectl.run("delete", "service", "echo")
