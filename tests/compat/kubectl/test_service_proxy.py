"""Services that carry traffic: the agent's service proxy and service variables, with kubectl.

``setpoint serve`` runs its agent as root (the proxy makes the server's service CIDR local
with a route on ``lo``); each server here gets a /24 service range and a loopback pod range of
its own, so servers running beside it on this machine hand out different addresses. Three
process pods run ``python3 -m http.server``, each serving a file naming its pod.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_pods_run import agent_pid, kubectl_for, stop_cleanly
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                 reason="cluster IPs are made local with a route on lo: "
                                        "needs root and iproute2")]

NODE = "node-p"
_ranges = itertools.count()


def local_routes() -> str:
    return subprocess.run(["ip", "-4", "route", "show", "table", "local"], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def service_cidr() -> str:
    n = (os.getpid() + next(_ranges)) % 250
    return f"10.{150 + os.getpid() % 40}.{n}.0/24"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory, service_cidr: str
          ) -> Iterator[ServeProcess]:
    pods = f"127.{100 + (os.getpid() + 61) % 120}.0.0/16"
    proc = start_serve(tmp_path_factory.mktemp("serve"), extra_args=[
        "--node-name", NODE, "--pod-isolation", "none", "--pod-cidr", pods,
        "--service-cluster-ip-range", service_cidr], timeout=40)
    try:
        yield proc
    finally:
        stop_cleanly(proc, kubectl_for(proc, tmp_path_factory.mktemp("cleanup")))
        # the agent removed its route when it stopped
        assert f"local {service_cidr} dev lo" not in local_routes()


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = kubectl_for(serve, tmp_path_factory.mktemp("kubecache"))
    eventually(lambda: k.json("get", "node", NODE), timeout=60)
    return k


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:

    kubectl.run("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def web_pod(name: str, app: str, ready: bool = True) -> dict[str, Any]:
    script = ('d=$(mktemp -d) && cd "$d" && echo "$POD_NAME" > who && '
              'exec python3 -m http.server --bind "$POD_IP" 8080')
    probe = ({"tcpSocket": {"port": 8080}} if ready else {"exec": {"command": ["false"]}})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "containers": [{
                "name": "web", "image": "python:3.12", "command": ["sh", "-c", script],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "POD_NAME",
                         "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "readinessProbe": {**probe, "periodSeconds": 1}}]}}


def service(name: str, app: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": app},
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}


def who(ip: str, port: int = 80) -> str:
    with urllib.request.urlopen(f"http://{ip}:{port}/who", timeout=5) as response:
        return str(response.read().decode().strip())


def refused(ip: str, port: int = 80) -> bool:
    try:
        who(ip, port)
    except urllib.error.URLError as e:
        return isinstance(e.reason, ConnectionRefusedError)
    return False


def test_a_cluster_ip_reaches_ready_pods_round_robin(kubectl: Kubectl,
                                                     service_cidr: str) -> None:
    apply(kubectl, service("web", "web"), *(web_pod(f"web-{i}", "web") for i in range(3)))
    kubectl.run("wait", "--for=condition=Ready", "pod/web-0", "pod/web-1", "pod/web-2",
                "--timeout=90s", timeout=100)
    ip = kubectl.json("get", "service", "web")["spec"]["clusterIP"]
    assert ip.startswith(service_cidr.rsplit(".", 1)[0] + ".")
    eventually(lambda: who(ip).startswith("web-"), timeout=30)
    # the endpoints may still be arriving: until all three answer within some requests
    eventually(lambda: {who(ip) for _ in range(6)} == {"web-0", "web-1", "web-2"},
               timeout=30)
    # the service variables of a pod started now
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "env"},
                    "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{
                        "name": "env", "image": "busybox",
                        "command": ["sh", "-c", "env | grep -E '^(WEB|KUBERNETES)_' | sort"]}]}})
    eventually(lambda: kubectl.json("get", "pod", "env")["status"]["phase"] == "Succeeded",
               timeout=60)
    env = dict(line.split("=", 1) for line in kubectl.run("logs", "env").stdout.splitlines())
    assert env["WEB_SERVICE_HOST"] == ip
    assert env["WEB_SERVICE_PORT"] == env["WEB_SERVICE_PORT_HTTP"] == "80"
    assert env["WEB_PORT"] == env["WEB_PORT_80_TCP"] == f"tcp://{ip}:80"
    assert env["WEB_PORT_80_TCP_ADDR"] == ip
    assert env["WEB_PORT_80_TCP_PROTO"] == "tcp"
    kubernetes = kubectl.json("get", "service", "kubernetes", "-n", "default")
    assert env["KUBERNETES_SERVICE_HOST"] == kubernetes["spec"]["clusterIP"]
    assert env["KUBERNETES_SERVICE_PORT"] == "443"
    # from a pod: through its service variables to the cluster IP
    fetch = ('import os, urllib.request; print(urllib.request.urlopen("http://%s:%s/who" % '
             '(os.environ["WEB_SERVICE_HOST"], os.environ["WEB_SERVICE_PORT"]), '
             'timeout=10).read().decode().strip())')
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
                    "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{
                        "name": "client", "image": "python:3.12",
                        "command": ["python3", "-c", fetch]}]}})
    eventually(lambda: kubectl.json("get", "pod", "client")["status"]["phase"] == "Succeeded",
               timeout=60)
    assert kubectl.run("logs", "client").stdout.strip() in {"web-0", "web-1", "web-2"}
    kubectl.run("delete", "pod", "client")
    # deleting the Service frees its listener: the connection is refused on this machine
    kubectl.run("delete", "service", "web")
    eventually(lambda: refused(ip), timeout=30)
    kubectl.run("delete", "pod", "env")


def test_a_service_without_ready_pods_refuses(kubectl: Kubectl) -> None:
    apply(kubectl, service("never", "never"), web_pod("never-0", "never", ready=False))

    def listed_not_ready() -> bool:
        slices = kubectl.json("get", "endpointslices", "-l",
                              "kubernetes.io/service-name=never")["items"]
        eps = [e for s in slices for e in s.get("endpoints") or []]
        return bool(eps) and all(e["conditions"].get("ready") is False for e in eps)
    eventually(listed_not_ready, timeout=60)
    ip = kubectl.json("get", "service", "never")["spec"]["clusterIP"]
    assert refused(ip)
    kubectl.run("delete", "service", "never")
    kubectl.run("delete", "pod", "never-0")


def test_kubectl_expose_and_the_agent_killed_with_9(kubectl: Kubectl, serve: ServeProcess,
                                                    service_cidr: str) -> None:
    apply(kubectl, web_pod("solo", "solo"))
    kubectl.run("wait", "--for=condition=Ready", "pod/solo", "--timeout=90s", timeout=100)
    kubectl.run("expose", "pod", "solo", "--port=8000", "--target-port=8080")
    ip = kubectl.json("get", "service", "solo")["spec"]["clusterIP"]
    eventually(lambda: who(ip, 8000) == "solo", timeout=30)
    old = agent_pid(serve)
    os.kill(old, signal.SIGKILL)
    eventually(lambda: (pid := agent_pid(serve)) != old and pid, timeout=60)
    # the new agent serves it again, and its route is there once
    eventually(lambda: who(ip, 8000) == "solo", timeout=60)
    assert local_routes().count(f"local {service_cidr} dev lo") == 1
    kubectl.run("delete", "service", "solo")
    eventually(lambda: refused(ip, 8000), timeout=30)
    kubectl.run("delete", "pod", "solo")
