"""``setpoint serve`` with a malformed owner graph: the server keeps answering, its built-in
controllers keep working, and SIGTERM ends it."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServeProcess, start_serve

Obj = dict[str, Any]

UID = "00000000-0000-4000-8000-0000000000aa"


def call(serve: ServeProcess, method: str, path: str, body: Obj | None = None,
         timeout: float = 10.0) -> tuple[int, Obj]:
    data = json.dumps(body).encode() if body is not None else None
    try:
        with serve.urlopen(path, data=data, method=method,
                           headers={"Content-Type": "application/json"}, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def wait_until(check: Any, what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout}s")


def namespace(name: str, owners: list[Obj] | None = None) -> Obj:
    meta: Obj = {"name": name}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def configmap(name: str, owners: list[Obj] | None = None, ns: str = "default") -> Obj:
    meta: Obj = {"name": name, "namespace": ns}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def ref(kind: str, name: str, uid: str, api_version: str = "v1") -> Obj:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}


def invalid_namespace_events(serve: ServeProcess, name: str) -> list[Obj]:
    status, listed = call(serve, "GET", "/api/v1/namespaces/default/events?fieldSelector="
                          f"involvedObject.name%3D{name}", timeout=5)
    assert status == 200, listed
    return [e for e in listed["items"] if e["reason"] == "OwnerRefInvalidNamespace"]


def collects(serve: ServeProcess, name: str) -> None:
    """An owner and its dependent: the dependent goes when the owner is deleted."""
    status, owner = call(serve, "POST", "/api/v1/namespaces/default/configmaps",
                         configmap(f"{name}-owner"))
    assert status == 201, owner
    status, dep = call(serve, "POST", "/api/v1/namespaces/default/configmaps", configmap(
        f"{name}-dep", [ref("ConfigMap", f"{name}-owner", owner["metadata"]["uid"])]))
    assert status == 201, dep
    status, _ = call(serve, "DELETE", f"/api/v1/namespaces/default/configmaps/{name}-owner")
    assert status == 200
    wait_until(lambda: call(serve, "GET", "/api/v1/namespaces/default/configmaps/"
                            f"{name}-dep", timeout=5)[0] == 404, f"{name}-dep collected")


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended since listed
            continue
        found.extend(int(c) for c in text)
    return found


def controller_managers(pid: int) -> list[int]:
    """Children of ``pid`` running the controller manager (a child just forked, still
    showing the server's command line before it executes its own, is not one yet)."""
    found = []
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError):  # it exited since it was listed
            continue
        if b"controller-manager" in cmdline:
            found.append(child)
    return found


def controller_process(serve: ServeProcess) -> int:
    """The pid of ``serve``'s controller manager (it may start just after /readyz)."""
    pids: list[int] = wait_until(lambda: controller_managers(serve.process.pid),
                                 "the controller manager process")
    assert len(pids) == 1
    return pids[0]


def gone(pid: int) -> bool:
    """The process has exited (a zombie not reaped by its new parent counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


MODES = pytest.mark.parametrize("mode", ["process", "inline"])


@MODES
def test_a_cluster_scoped_object_naming_one_uid_as_two_namespaced_owners(
        tmp_path: Path, mode: str) -> None:
    serve = start_serve(tmp_path / "data", extra_args=["--controllers-mode", mode])
    try:
        status, created = call(serve, "POST", "/api/v1/namespaces", namespace(
            "confused", [ref("ConfigMap", "a", UID), ref("ConfigMap", "b", UID)]))
        assert status == 201, created
        # the collector looked at it and reported it, as Kubernetes does
        wait_until(lambda: invalid_namespace_events(serve, "confused"),
                   "an OwnerRefInvalidNamespace event")
        # and carries on collecting; the server answers
        collects(serve, "after")
        with serve.urlopen("/readyz", timeout=5) as r:
            assert r.status == 200
        # a cluster-scoped object cannot have a namespaced owner: it is left alone
        status, kept = call(serve, "GET", "/api/v1/namespaces/confused")
        assert status == 200
        assert "deletionTimestamp" not in kept["metadata"]
        assert serve.stop(signal.SIGTERM) == 0, serve.log.read_text()
    finally:
        serve.stop(signal.SIGKILL)


def test_the_controllers_run_in_a_child_process_that_ends_with_the_server(
        tmp_path: Path) -> None:
    serve = start_serve(tmp_path / "data")
    try:
        child = controller_process(serve)
        collects(serve, "through-the-child")
        assert serve.stop(signal.SIGINT) == 0, serve.log.read_text()
        assert gone(child)
    finally:
        serve.stop(signal.SIGKILL)


def test_after_kill_9_of_the_server_no_controller_process_remains(tmp_path: Path) -> None:
    serve = start_serve(tmp_path / "data")
    child = controller_process(serve)
    serve.process.kill()
    serve.process.wait()
    wait_until(lambda: gone(child), f"the controller manager (pid {child}) gone")


def test_a_controller_process_that_dies_is_started_again(tmp_path: Path) -> None:
    serve = start_serve(tmp_path / "data")
    try:
        first = controller_process(serve)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: controller_managers(serve.process.pid) not in ([], [first]),
                   "a new controller manager process")
        second = controller_process(serve)
        assert second != first
        collects(serve, "after-restart")
        assert serve.stop(signal.SIGTERM) == 0, serve.log.read_text()
        assert gone(second)
    finally:
        serve.stop(signal.SIGKILL)
