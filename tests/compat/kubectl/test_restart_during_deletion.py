"""``setpoint serve`` killed (SIGKILL) in the middle of a foreground deletion and of a
namespace deletion, then started again on the same data directory: both finish, because
their state lives in the API objects (finalizers, deletion timestamps, conditions), not in
the controllers' memory."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_cascading_deletion import GROUP, HOLD, crd_yaml, ref
from tests.conftest import ServeProcess, start_serve

pytestmark = pytest.mark.compat


class Restartable:
    """One ``setpoint serve`` on a data directory that survives its process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.process: ServeProcess = start_serve(data_dir)

    def kill_and_restart(self) -> None:
        self.process.process.send_signal(signal.SIGKILL)
        self.process.process.wait(timeout=10)
        self.process = start_serve(self.data_dir)


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[Restartable]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    restartable = Restartable(tmp_path / "data")
    yield restartable
    restartable.process.stop()


@pytest.fixture
def kubectl(plane: Restartable, tmp_path: Path) -> Kubectl:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    # the kubeconfig is rewritten in place (with the new port) on every start
    return Kubectl(plane.process.kubeconfig, tmp_path / "kubecache", env)


def install(kubectl: Kubectl) -> None:
    for plural, kind in (("widgets", "Widget"), ("gadgets", "Gadget")):
        kubectl.run("apply", "-f", "-", input=crd_yaml(plural, kind))
        kubectl.run("wait", "--for=condition=Established", f"crd/{plural}.{GROUP}",
                    "--timeout=10s")


def apply(kubectl: Kubectl, obj: dict[str, Any], resource: str) -> dict[str, Any]:
    kubectl.run("apply", "-f", "-", input=json.dumps(obj))
    namespace = obj["metadata"].get("namespace", "default")
    return dict(kubectl.json("get", resource, obj["metadata"]["name"], "-n", namespace))


def gone(kubectl: Kubectl, *args: str) -> bool:
    result = kubectl.run("get", *args, check=False)
    return result.returncode != 0 and "NotFound" in result.stderr


def test_a_foreground_deletion_finishes_after_a_kill(plane: Restartable,
                                                      kubectl: Kubectl) -> None:
    install(kubectl)
    widget = apply(kubectl, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                             "metadata": {"name": "w"}}, f"widgets.{GROUP}")
    # twenty config maps, each owning a gadget; one gadget held by a finalizer
    for i in range(20):
        cm = apply(kubectl, {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": f"cm-{i}", "ownerReferences": [ref(widget)]}},
                   "configmap")
        meta: dict[str, Any] = {"name": f"g-{i}", "ownerReferences": [ref(cm)]}
        if i == 7:
            meta["finalizers"] = [HOLD]
        apply(kubectl, {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": meta},
              f"gadgets.{GROUP}")
    kubectl.run("delete", f"widgets.{GROUP}", "w", "--cascade=foreground", "--wait=false")

    def only_the_held_branch_left() -> bool:
        names = kubectl.run("get", "configmaps", "-o", "name").stdout.split()
        return [n for n in names if n.startswith("configmap/cm-")] == ["configmap/cm-7"]

    eventually(only_the_held_branch_left, timeout=30)
    plane.kill_and_restart()
    # after the restart the deletion is still under way, as the API objects say
    widget_now = kubectl.json("get", f"widgets.{GROUP}", "w")
    assert widget_now["metadata"]["finalizers"] == ["foregroundDeletion"]
    cm = kubectl.json("get", "configmap", "cm-7")
    assert cm["metadata"]["finalizers"] == ["foregroundDeletion"]
    kubectl.run("patch", f"gadgets.{GROUP}", "g-7", "--type=json",
                "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    kubectl.run("wait", "--for=delete", f"widgets.{GROUP}/w", "--timeout=30s")
    assert gone(kubectl, "configmap", "cm-7")
    assert kubectl.run("get", f"gadgets.{GROUP}", "-o", "name").stdout.split() == []


def test_a_namespace_deletion_finishes_after_a_kill(plane: Restartable,
                                                     kubectl: Kubectl) -> None:
    install(kubectl)
    ns = "doomed"
    kubectl.run("create", "namespace", ns)
    docs = []
    for i in range(30):
        meta: dict[str, Any] = {"name": f"o-{i}", "namespace": ns}
        if i % 10 == 0:
            meta["finalizers"] = [HOLD]
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
        docs.append({"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": meta})
    kubectl.run("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))
    kubectl.run("delete", "namespace", ns, "--wait=false")

    def only_held_left() -> bool:
        left = [n for r in ("configmaps", f"widgets.{GROUP}")
                for n in kubectl.run("get", r, "-n", ns, "-o", "name").stdout.split()]
        return len(left) == 6

    eventually(only_held_left, timeout=30)
    plane.kill_and_restart()
    namespace = kubectl.json("get", "namespace", ns)
    assert namespace["status"]["phase"] == "Terminating"
    refused = kubectl.run("create", "configmap", "late", "-n", ns, check=False)
    assert refused.returncode != 0
    assert "because it is being terminated" in refused.stderr
    for resource in ("configmaps", f"widgets.{GROUP}"):
        for name in kubectl.run("get", resource, "-n", ns, "-o", "name").stdout.split():
            kubectl.run("patch", name, "-n", ns, "--type=json",
                        "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    kubectl.run("wait", "--for=delete", f"namespace/{ns}", "--timeout=30s")
    assert gone(kubectl, "namespace", ns)
