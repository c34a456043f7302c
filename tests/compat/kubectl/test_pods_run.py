"""Pods that run: ``setpoint serve``'s own node agent, real processes, the real kubectl.

The server runs its agent (``--pod-isolation none``: a loopback address per pod, no
namespaces, as an unprivileged agent does); pods are bound by ``spec.nodeName`` in their
manifests. Processes are checked against the process table by the marker every container
process carries (``SETPOINT_CONTAINER=<agent>/<pod uid>/<container>``), never by name.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]

NODE = "node-a"


def pod_processes(uid: str) -> set[int]:
    """Pids of every process of the pod ``uid`` (by the marker in their environment)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        for var in env.split(b"\0"):
            if var.startswith(b"SETPOINT_CONTAINER=") and f"/{uid}/".encode() in var:
                found.add(int(entry))
    return found


def agent_pid(serve: ServeProcess) -> int:
    """The pid of the node agent ``serve`` started (its child running ``setpoint agent``)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == serve.process.pid and b"agent" in argv and b"setpoint" in argv:
            return int(entry)
    raise AssertionError("no agent process")


_cidrs = itertools.count()


def start(tmp: Path, *extra: str) -> ServeProcess:
    """A server with its agent; its pods get loopback addresses of their own (another
    server on this machine must not hand out the same ones)."""
    cidr = f"127.{100 + (os.getpid() + next(_cidrs)) % 120}.0.0/16"
    return start_serve(tmp, extra_args=["--node-name", NODE, "--pod-isolation", "none",
                                        "--pod-cidr", cidr, *extra], timeout=40)


def stop_cleanly(serve: ServeProcess, kubectl: Kubectl) -> None:
    """Delete every pod, stop the server, and make sure no process of a pod is left."""
    uids: list[str] = []
    try:
        uids = [p["metadata"]["uid"] for p in kubectl.json("get", "pods", "-A")["items"]]
        kubectl.run("delete", "pods", "--all", "-A", "--wait=true", timeout=120,
                    check=False)
    finally:
        serve.stop()
        leftover = {pid for uid in uids for pid in pod_processes(uid)}
        for pid in leftover:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert leftover == set()


def kubectl_for(serve: ServeProcess, cache: Path) -> Kubectl:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    return Kubectl(serve.kubeconfig, cache, env)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = start(tmp_path_factory.mktemp("serve"))
    try:
        yield proc
    finally:
        stop_cleanly(proc, kubectl_for(proc, tmp_path_factory.mktemp("cleanup")))


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = kubectl_for(serve, tmp_path_factory.mktemp("kubecache"))
    eventually(lambda: k.json("get", "node", NODE), timeout=60)
    return k


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    container = {"name": spec.pop("container", "app"), "image": "busybox",
                 "command": ["sh", "-c", script], **spec.pop("extra", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5,
                     "containers": [container], **spec}}


def wait_ready(kubectl: Kubectl, name: str) -> dict[str, Any]:
    kubectl.run("wait", "--for=condition=Ready", f"pod/{name}", "--timeout=90s", timeout=100)
    result: dict[str, Any] = kubectl.json("get", "pod", name)
    return result


def test_the_node_registers_heartbeats_and_acts_as_itself(kubectl: Kubectl,
                                                          serve: ServeProcess) -> None:
    node = kubectl.json("get", "node", NODE)
    conditions = {c["type"]: c for c in node["status"]["conditions"]}
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Ready"]["reason"] == "KubeletReady"
    assert {t: conditions[t]["status"] for t in ("MemoryPressure", "DiskPressure",
                                                 "PIDPressure")} == dict.fromkeys(
        ("MemoryPressure", "DiskPressure", "PIDPressure"), "False")
    assert int(node["status"]["capacity"]["cpu"]) >= 1
    assert node["status"]["capacity"]["pods"] == "110"
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == "true"
    lease = kubectl.json("get", "lease", NODE, "-n", "kube-node-lease")
    assert lease["spec"]["holderIdentity"] == NODE
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    # the lease is renewed: its resourceVersion moves without anyone else writing it
    first = lease["metadata"]["resourceVersion"]
    eventually(lambda: kubectl.json("get", "lease", NODE, "-n", "kube-node-lease")
               ["metadata"]["resourceVersion"] != first, timeout=30, interval=1)
    # the agent's identity, and what RBAC gives it and does not
    node_kubeconfig = serve.data_dir / "agent" / "kubeconfig"
    agent = Kubectl(node_kubeconfig, kubectl.cache_dir.parent / "agent-cache", kubectl.env)
    whoami = agent.json("auth", "whoami")
    assert whoami["status"]["userInfo"]["username"] == f"system:node:{NODE}"
    assert "system:nodes" in whoami["status"]["userInfo"]["groups"]
    can = agent.run("auth", "can-i", "update", "pods", "--subresource=status")
    assert can.stdout.strip() == "yes"
    assert agent.run("auth", "can-i", "create", "namespaces",
                     check=False).stdout.strip() == "no"
    assert agent.run("auth", "can-i", "create", "pods", "--subresource=exec",
                     check=False).stdout.strip() == "no"


def test_env_from_a_configmap_a_secret_volume_logs_and_exec(kubectl: Kubectl) -> None:
    apply(kubectl,
          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"},
           "data": {"greeting": "hello-from-configmap"}},
          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
           "stringData": {"password": "s3cret"}},
          pod("web", "echo greeting=$GREETING; echo password=$(cat /etc/creds/password); "
                     "echo to-stderr >&2; exec sleep 3600",
              extra={"env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {
                  "name": "settings", "key": "greeting"}}}],
                  "volumeMounts": [{"name": "creds", "mountPath": "/etc/creds"}]},
              volumes=[{"name": "creds", "secret": {"secretName": "creds"}}]))
    status = wait_ready(kubectl, "web")["status"]
    assert status["phase"] == "Running"
    assert status["podIP"].startswith("127.")
    assert status["podIP"] != status["hostIP"]
    assert status["containerStatuses"][0]["started"] is True
    assert {c["type"] for c in status["conditions"]} >= {
        "PodScheduled", "Initialized", "ContainersReady", "Ready"}
    logs = eventually(lambda: (out := kubectl.run("logs", "web").stdout)
                      and "password=s3cret" in out and out, timeout=30)
    assert "greeting=hello-from-configmap" in logs
    assert "to-stderr" in logs
    assert kubectl.run("logs", "web", "--tail=1").stdout.strip() in ("to-stderr",
                                                                     "password=s3cret")
    assert "greeting=" in kubectl.run("logs", "web", "-c", "app", "--since=1h").stdout
    assert kubectl.run("exec", "web", "--", "cat", "/etc/creds/password").stdout == "s3cret"
    failed = kubectl.run("exec", "web", "--", "sh", "-c", "exit 7", check=False)
    assert failed.returncode == 7
    piped = kubectl.run("exec", "-i", "web", "--", "sh", "-c", "tr a-z A-Z",
                        input="through stdin\n")
    assert piped.stdout == "THROUGH STDIN\n"
    wrong = kubectl.run("logs", "web", "-c", "nope", check=False)
    assert wrong.returncode != 0
    assert "container nope is not valid for pod web" in wrong.stderr


def test_port_forward_and_cp(kubectl: Kubectl, tmp_path: Path) -> None:
    apply(kubectl, pod("server", 'cd /tmp && exec python3 -m http.server --bind "$POD_IP" 8080',
                       extra={"readinessProbe": {"tcpSocket": {"port": 8080},
                                                 "periodSeconds": 1}}))
    wait_ready(kubectl, "server")
    forward = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
         str(kubectl.cache_dir), "port-forward", "pod/server", ":8080"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env)
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8080
        port = int(line.split("127.0.0.1:")[1].split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
            assert response.status == 200
            assert b"Directory listing" in response.read()
    finally:
        forward.terminate()
        forward.communicate(timeout=10)
    local = tmp_path / "payload.txt"
    local.write_text("copied with kubectl cp\n")
    kubectl.run("cp", str(local), "server:/tmp/payload.txt")
    assert kubectl.run("exec", "server", "--", "cat", "/tmp/payload.txt").stdout == \
        "copied with kubectl cp\n"
    back = tmp_path / "back.txt"
    kubectl.run("cp", "server:/tmp/payload.txt", str(back))
    assert back.read_text() == "copied with kubectl cp\n"


def read_until(fd: int, done: Callable[[str], bool], limit: float = 60) -> str:
    """What ``fd`` gives until ``done(text so far)`` (or its end, or ``limit`` seconds: the
    caller's assertion then shows what came)."""
    text = ""
    deadline = time.monotonic() + limit
    while not done(text) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # a pseudo-terminal whose other end has closed
            break
        if not chunk:
            break
        text += chunk.decode(errors="replace")
    return text


def kubectl_argv(kubectl: Kubectl, *args: str) -> list[str]:
    return ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
            str(kubectl.cache_dir), *args]


def following(kubectl: Kubectl, *args: str, done: Callable[[str], bool]) -> str:
    """Run a kubectl command that keeps streaming (``logs -f``, ``attach``) until its output
    satisfies ``done``, then stop it."""
    proc = subprocess.Popen(kubectl_argv(kubectl, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=kubectl.env)
    try:
        assert proc.stdout is not None
        return read_until(proc.stdout.fileno(), done)
    finally:
        proc.terminate()
        proc.communicate(timeout=10)


def test_kubectl_run_follow_logs_by_label_exec_it_and_attach(kubectl: Kubectl,
                                                              serve: ServeProcess) -> None:
    ticker = "i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.3; done"
    for name in ("talker", "talker2"):
        kubectl.run("run", name, "--image=busybox", "--labels=app=talk", "--restart=Never",
                    "--command", "--", "sh", "-c", ticker)
    for name in ("talker", "talker2"):
        assert wait_ready(kubectl, name)["spec"]["nodeName"] == NODE  # the scheduler's
    # logs -f: lines keep coming while the container writes them
    followed = following(kubectl, "logs", "-f", "talker", done=lambda t: "tick 5\n" in t)
    assert [f"tick {i}" for i in range(6)] == followed.splitlines()[:6]
    # logs -l: every pod of the selector, each line prefixed with its pod and container
    both = kubectl.run("logs", "-l", "app=talk", "--prefix", "--tail=2").stdout.splitlines()
    assert {line.split()[0] for line in both} == {"[pod/talker/talker]",
                                                  "[pod/talker2/talker2]"}
    assert all(" tick " in line for line in both)
    # attach: the container's output from the moment it attaches
    attached = following(kubectl, "attach", "talker",
                         done=lambda t: len([x for x in t.splitlines()
                                             if x.startswith("tick ")]) >= 3)
    ticks = [int(x.split()[1]) for x in attached.splitlines() if x.startswith("tick ")]
    assert len(ticks) >= 3
    assert ticks == list(range(ticks[0], ticks[0] + len(ticks)))
    # exec -it: a pseudo-terminal on both sides, input typed into it
    controller, terminal = os.openpty()
    proc = subprocess.Popen(
        kubectl_argv(kubectl, "exec", "-it", "talker", "--", "sh", "-c",
                     "test -t 0 && test -t 1 && echo on-a-terminal; read line; "
                     "echo got:$line"),
        stdin=terminal, stdout=terminal, stderr=terminal, env=kubectl.env)
    os.close(terminal)
    try:
        assert "on-a-terminal" in read_until(controller, lambda t: "on-a-terminal" in t)
        os.write(controller, b"typed\r")
        assert "got:typed" in read_until(controller, lambda t: "got:typed" in t)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
    # get all: the pods and the kubernetes Service
    everything = kubectl.run("get", "all").stdout
    assert "pod/talker " in everything
    assert "pod/talker2 " in everything
    assert "service/kubernetes " in everything
    # describe node: its capacity, its conditions and the pods it runs
    node = kubectl.run("describe", "node", NODE).stdout
    assert node.splitlines()[0].split() == ["Name:", NODE]
    for section in ("Capacity:", "Allocatable:", "Conditions:", "Non-terminated Pods:",
                    "Allocated resources:", "System Info:"):
        assert section in node
    ready = next(line for line in node.splitlines() if line.split()[:1] == ["Ready"])
    assert ready.split()[1] == "True"
    assert any(line.split()[:2] == ["default", "talker"] for line in node.splitlines())
    # cluster-info: where the control plane runs
    info = kubectl.run("cluster-info").stdout
    assert "Kubernetes control plane" in info
    assert serve.url.split("//", 1)[1] in info
    kubectl.run("delete", "pods", "-l", "app=talk", "--wait=true", timeout=60)


def test_a_pod_talks_to_the_api_with_its_projected_service_account_token(
        kubectl: Kubectl, serve: ServeProcess) -> None:
    """The token, CA and namespace the server projects into a pod (``kube-api-access-*``)
    are real: the pod's process asks the API server who it is, verifying its certificate
    with the projected CA."""
    script = ("import json, os, ssl, sys, urllib.request; d = sys.argv[1]; "
              "ctx = ssl.create_default_context(cafile=d + '/ca.crt'); "
              "req = urllib.request.Request(os.environ['SERVER'] + "
              "'/apis/authentication.k8s.io/v1/selfsubjectreviews', method='POST', "
              "data=b'{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":"
              "\"SelfSubjectReview\"}', headers={'Content-Type': 'application/json', "
              "'Authorization': 'Bearer ' + open(d + '/token').read()}); "
              "user = json.load(urllib.request.urlopen(req, context=ctx, timeout=20)); "
              "print(user['status']['userInfo']['username'], open(d + '/namespace').read())")
    apply(kubectl, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "whoami"},
                    "spec": {"nodeName": NODE, "restartPolicy": "Never", "containers": [{
                        "name": "whoami", "image": "python:3.12",
                        "command": ["python3", "-c", script,
                                    "/var/run/secrets/kubernetes.io/serviceaccount"],
                        "env": [{"name": "SERVER", "value": serve.url}]}]}})
    pod_obj = kubectl.json("get", "pod", "whoami")
    assert any(v["name"].startswith("kube-api-access-") for v in pod_obj["spec"]["volumes"])
    eventually(lambda: kubectl.json("get", "pod", "whoami")["status"].get("phase")
               in ("Succeeded", "Failed"), timeout=60)
    out = kubectl.run("logs", "whoami").stdout
    assert out.split() == ["system:serviceaccount:default:default", "default"], out
    kubectl.run("delete", "pod", "whoami")


def test_restarts_crashloop_and_previous_logs(kubectl: Kubectl) -> None:
    apply(kubectl, pod("once", "if [ -e /data/ran ]; then exec sleep 3600; fi; "
                               "touch /data/ran; echo first run; exit 1",
                       extra={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                       volumes=[{"name": "data", "emptyDir": {}}]),
          pod("failing", "echo failing; exit 2"))
    status = eventually(lambda: (p := kubectl.json("get", "pod", "once"))
                        and p["status"]["containerStatuses"][0]["restartCount"] == 1
                        and "running" in p["status"]["containerStatuses"][0]["state"]
                        and p["status"], timeout=60, interval=0.5)
    last = status["containerStatuses"][0]["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (1, "Error")
    assert kubectl.run("logs", "once", "--previous").stdout == "first run\n"

    def crashlooping() -> bool:
        state = kubectl.json("get", "pod", "failing")["status"]["containerStatuses"][0]
        return state.get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"

    eventually(crashlooping, timeout=60, interval=0.5)
    table = kubectl.run("get", "pod", "failing").stdout
    assert "CrashLoopBackOff" in table
    events = kubectl.run("get", "events", "--field-selector",
                         "involvedObject.name=failing").stdout
    assert "BackOff" in events


def test_deleting_a_pod_stops_every_process_of_it(kubectl: Kubectl) -> None:
    apply(kubectl, pod("doomed", "sleep 3600 & sleep 3600 & trap 'exit 0' TERM; "
                                 "while true; do sleep 1; done"))
    uid = wait_ready(kubectl, "doomed")["metadata"]["uid"]
    assert len(eventually(lambda: len(pod_processes(uid)) >= 3 and pod_processes(uid))) >= 3
    kubectl.run("delete", "pod", "doomed", "--wait=true", timeout=60)
    assert kubectl.run("get", "pod", "doomed", check=False).returncode != 0
    assert pod_processes(uid) == set()


def test_the_agent_killed_with_9_adopts_its_pods_and_cleans_up_deleted_ones(
        kubectl: Kubectl, serve: ServeProcess) -> None:
    apply(kubectl, pod("keeper", "exec sleep 3600"), pod("leaver", "exec sleep 3600"))
    keeper = wait_ready(kubectl, "keeper")["metadata"]["uid"]
    leaver = wait_ready(kubectl, "leaver")["metadata"]["uid"]
    kept = eventually(lambda: pod_processes(keeper))
    left = eventually(lambda: pod_processes(leaver))
    old_agent = agent_pid(serve)
    os.kill(old_agent, signal.SIGKILL)
    # while no agent runs: a forced delete, which only the next agent can clean up after
    kubectl.run("delete", "pod", "leaver", "--grace-period=0", "--force")
    new_agent = eventually(lambda: (pid := agent_pid(serve)) != old_agent and pid,
                           timeout=60)
    assert new_agent != old_agent
    eventually(lambda: pod_processes(leaver) == set(), timeout=60)
    assert not left & pod_processes(leaver)
    # the kept pod, once the new agent serves it: the very same processes, not restarted
    eventually(lambda: kubectl.run("exec", "keeper", "--", "echo", "reachable",
                                   check=False).stdout == "reachable\n", timeout=60)
    assert pod_processes(keeper) == kept
    status = kubectl.json("get", "pod", "keeper")["status"]
    assert status["containerStatuses"][0]["restartCount"] == 0
    kubectl.run("delete", "pod", "keeper", "--wait=true", timeout=60)
    assert pod_processes(keeper) == set()


def test_serve_stopped_leaves_pods_to_the_next_one(tmp_path: Path) -> None:
    """SIGTERM of ``setpoint serve`` stops its agent and leaves the pods' processes running;
    the next ``setpoint serve`` on the same data directory adopts them."""
    first = start(tmp_path / "d")
    kubectl = kubectl_for(first, tmp_path / "cache")
    try:
        eventually(lambda: kubectl.json("get", "node", NODE), timeout=60)
        apply(kubectl, pod("survivor", "exec sleep 3600"))
        uid = wait_ready(kubectl, "survivor")["metadata"]["uid"]
        processes = eventually(lambda: pod_processes(uid))
    except BaseException:
        stop_cleanly(first, kubectl)
        raise
    assert first.stop(leave_pods=True) == 0
    assert pod_processes(uid) == processes
    second = start(tmp_path / "d")
    kubectl = kubectl_for(second, tmp_path / "cache2")
    try:
        eventually(lambda: kubectl.run("exec", "survivor", "--", "true",
                                       check=False).returncode == 0, timeout=60)
        now = pod_processes(uid)
        assert now == processes, {pid: Path(f"/proc/{pid}/cmdline").read_bytes()
                                  for pid in now}
        kubectl.run("delete", "pod", "survivor", "--wait=true", timeout=60)
        assert pod_processes(uid) == set()
    finally:
        stop_cleanly(second, kubectl)


def test_agent_stop_pods_ends_what_a_stopped_server_left_running(tmp_path: Path) -> None:
    """``setpoint agent --stop-pods`` on the data directory's agent root stops the pods a
    stopped server left for the next agent, and removes them."""
    first = start(tmp_path / "d")
    kubectl = kubectl_for(first, tmp_path / "cache")
    try:
        eventually(lambda: kubectl.json("get", "node", NODE), timeout=60)
        apply(kubectl, pod("orphan", "exec sleep 3600"))
        uid = wait_ready(kubectl, "orphan")["metadata"]["uid"]
        processes = eventually(lambda: pod_processes(uid))
    except BaseException:
        stop_cleanly(first, kubectl)
        raise
    assert first.stop(leave_pods=True) == 0
    try:
        assert pod_processes(uid) == processes  # left running, for the next agent
        result = subprocess.run(
            [sys.executable, "-m", "setpoint", "agent", "--stop-pods", "--root-dir",
             str(tmp_path / "d" / "agent")], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        assert "stopped 1 pods" in result.stderr
        assert pod_processes(uid) == set()
        assert not any((tmp_path / "d" / "agent" / "pods").glob(f"**/{uid}*"))
    finally:
        for pid in pod_processes(uid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_second_node_joined_with_setpoint_agent_gets_pods_scheduled(
        kubectl: Kubectl, serve: ServeProcess, tmp_path: Path) -> None:
    """``setpoint agent`` joins another node to the server; the scheduler binds a pod that
    only fits there, and that node's agent runs it."""
    cidr = f"127.{100 + (os.getpid() + next(_cidrs)) % 120}.0.0/16"
    log = (tmp_path / "agent.log").open("wb")
    agent = subprocess.Popen(
        [sys.executable, "-m", "setpoint", "agent", "--kubeconfig", str(serve.kubeconfig),
         "--name", "node-b", "--root-dir", str(tmp_path / "agent"), "--port", "0",
         "--isolation", "none", "--pod-cidr", cidr, "--service-proxy", "off"],
        stdout=log, stderr=subprocess.STDOUT)
    uid = ""
    try:
        node = eventually(lambda: kubectl.json("get", "node", "node-b"), timeout=60)
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "node-b"
        elsewhere = pod("elsewhere", "exec sleep 3600",
                        nodeSelector={"kubernetes.io/hostname": "node-b"})
        del elsewhere["spec"]["nodeName"]  # left to the scheduler
        apply(kubectl, elsewhere)
        ready = wait_ready(kubectl, "elsewhere")
        uid = ready["metadata"]["uid"]
        assert ready["spec"]["nodeName"] == "node-b"
        assert eventually(lambda: pod_processes(uid))
        kubectl.run("delete", "pod", "elsewhere", "--wait=true", timeout=60)
        assert pod_processes(uid) == set()
    finally:
        agent.terminate()
        agent.wait(timeout=30)
        log.close()
        subprocess.run([sys.executable, "-m", "setpoint", "agent", "--stop-pods",
                        "--root-dir", str(tmp_path / "agent")], timeout=120, check=False)
        kubectl.run("delete", "node", "node-b", "--wait=false", check=False)


def test_simulated_pods_run_without_processes(tmp_path: Path) -> None:
    serve = start(tmp_path / "d", "--pod-runtime", "simulate")
    kubectl = kubectl_for(serve, tmp_path / "cache")
    try:
        eventually(lambda: kubectl.json("get", "node", NODE), timeout=60)
        apply(kubectl, *(pod(f"sim-{i}", "this never runs") for i in range(20)))
        for i in range(20):
            status = wait_ready(kubectl, f"sim-{i}")["status"]
            assert status["phase"] == "Running"
            assert pod_processes(kubectl.json("get", "pod", f"sim-{i}")["metadata"]["uid"]) \
                == set()
        assert kubectl.json("get", "node", NODE)["status"]["nodeInfo"][
            "containerRuntimeVersion"].startswith("setpoint-simulated://")
        kubectl.run("delete", "pods", "--all", "--wait=true", timeout=60)
        assert kubectl.json("get", "pods")["items"] == []
    finally:
        stop_cleanly(serve, kubectl)
