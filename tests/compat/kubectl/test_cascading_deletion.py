"""Cascading deletion and namespace lifecycle, driven by the real kubectl against
``setpoint serve`` (its built-in controllers on).

A three-level chain: a Widget (custom) owns a ConfigMap, which owns a Gadget (custom). The
three ``--cascade`` modes each behave as in Kubernetes; the order in which objects disappear
is read from watches on the server's REST API: the resourceVersions of their DELETED events
(the revisions of the deletions), not the order the three connections happen to deliver in.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess

pytestmark = pytest.mark.compat

GROUP = "cascade.example.com"
HOLD = "example.com/hold"


def crd_yaml(plural: str, kind: str) -> str:
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}})


@pytest.fixture(scope="module", autouse=True)
def kinds(kubectl: Kubectl) -> Iterator[None]:
    for plural, kind in (("widgets", "Widget"), ("gadgets", "Gadget")):
        kubectl.run("apply", "-f", "-", input=crd_yaml(plural, kind))
        kubectl.run("wait", "--for=condition=Established", f"crd/{plural}.{GROUP}",
                    "--timeout=10s")
    yield
    for plural in ("widgets", "gadgets"):
        kubectl.run("delete", f"crd/{plural}.{GROUP}", "--timeout=30s", check=False)


def apply(kubectl: Kubectl, obj: dict[str, Any]) -> dict[str, Any]:
    kubectl.run("apply", "-f", "-", input=json.dumps(obj))
    kind = obj["kind"].lower()
    resource = kind if obj["apiVersion"] == "v1" else f"{kind}s.{GROUP}"
    return dict(kubectl.json("get", resource, obj["metadata"]["name"],
                             "-n", obj["metadata"].get("namespace", "default")))


def ref(owner: dict[str, Any], block: bool = True) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
            "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": block, "controller": True}


def chain(kubectl: Kubectl, suffix: str, *, hold: bool = False
          ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    widget = apply(kubectl, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                             "metadata": {"name": f"w-{suffix}"}, "spec": {"size": 1}})
    cm = apply(kubectl, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": f"cm-{suffix}", "ownerReferences": [ref(widget)]},
                         "data": {"k": "v"}})
    meta: dict[str, Any] = {"name": f"g-{suffix}", "ownerReferences": [ref(cm)]}
    if hold:
        meta["finalizers"] = [HOLD]
    gadget = apply(kubectl, {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": meta})
    return widget, cm, gadget


class Deletions:
    """Watches the three kinds over the REST API (as the admin) in threads and records
    DELETED events with their resourceVersions (the deletions' revisions)."""

    PATHS = {"Widget": f"/apis/{GROUP}/v1/namespaces/default/widgets",
             "ConfigMap": "/api/v1/namespaces/default/configmaps",
             "Gadget": f"/apis/{GROUP}/v1/namespaces/default/gadgets"}

    def __init__(self, serve: ServeProcess) -> None:
        self.serve = serve
        self.deleted: list[tuple[int, str]] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> Deletions:
        for kind, path in self.PATHS.items():
            with self.serve.urlopen(path) as response:
                rv = json.loads(response.read())["metadata"]["resourceVersion"]
            response = self.serve.urlopen(
                f"{path}?watch=true&resourceVersion={rv}&timeoutSeconds=30", timeout=40)
            thread = threading.Thread(target=self._read, args=(kind, response), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _read(self, kind: str, response: Any) -> None:
        with response:
            for line in response:
                event = json.loads(line)
                if event["type"] == "DELETED":
                    metadata = event["object"]["metadata"]
                    with self._lock:
                        self.deleted.append((int(metadata["resourceVersion"]),
                                             f"{kind}/{metadata['name']}"))

    def names(self, suffix: str) -> list[str]:
        """The deleted objects of one chain, in the order of their deletions' revisions."""
        with self._lock:
            return [n for _, n in sorted(self.deleted) if n.endswith(f"-{suffix}")]


def exists(kubectl: Kubectl, resource: str, name: str, namespace: str = "default") -> bool:
    result = kubectl.run("get", resource, name, "-n", namespace, "-o", "name", check=False)
    return result.returncode == 0


def test_cascade_background_deletes_dependents_after_the_owner(
        kubectl: Kubectl, serve: ServeProcess) -> None:
    chain(kubectl, "bg")
    log = Deletions(serve).start()
    result = kubectl.run("delete", f"widgets.{GROUP}", "w-bg", "--cascade=background")
    assert f'widget.{GROUP} "w-bg" deleted' in result.stdout
    eventually(lambda: len(log.names("bg")) == 3)
    assert log.names("bg") == ["Widget/w-bg", "ConfigMap/cm-bg", "Gadget/g-bg"]


def test_cascade_foreground_waits_for_blocking_dependents(
        kubectl: Kubectl, serve: ServeProcess) -> None:
    chain(kubectl, "fg", hold=True)
    log = Deletions(serve).start()
    deleter = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "delete", f"widgets.{GROUP}",
         "w-fg", "--cascade=foreground", "--timeout=60s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=kubectl.env)
    try:
        gadget = eventually(lambda: (lambda g: g if g["metadata"].get("deletionTimestamp")
                                     else None)(kubectl.json("get", f"gadgets.{GROUP}", "g-fg")))
        assert gadget["metadata"]["finalizers"] == [HOLD]
        time.sleep(0.5)
        # the held gadget keeps the config map, which keeps the widget
        widget = kubectl.json("get", f"widgets.{GROUP}", "w-fg")
        cm = kubectl.json("get", "configmap", "cm-fg")
        assert widget["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert widget["metadata"]["deletionTimestamp"]
        assert cm["metadata"]["finalizers"] == ["foregroundDeletion"]
        assert cm["metadata"]["deletionTimestamp"]
        assert deleter.poll() is None, "kubectl delete returned while dependents remained"
        assert log.names("fg") == []
        kubectl.run("patch", f"gadgets.{GROUP}", "g-fg", "--type=json",
                    "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
        out, err = deleter.communicate(timeout=30)
    finally:
        if deleter.poll() is None:
            deleter.kill()
            deleter.communicate()
    assert deleter.returncode == 0, err
    assert f'widget.{GROUP} "w-fg" deleted' in out
    eventually(lambda: len(log.names("fg")) == 3)
    assert log.names("fg") == ["Gadget/g-fg", "ConfigMap/cm-fg", "Widget/w-fg"]


def test_cascade_orphan_keeps_the_dependents(kubectl: Kubectl) -> None:
    _, cm, _ = chain(kubectl, "or")
    result = kubectl.run("delete", f"widgets.{GROUP}", "w-or", "--cascade=orphan")
    assert f'widget.{GROUP} "w-or" deleted' in result.stdout
    assert not exists(kubectl, f"widgets.{GROUP}", "w-or")
    kept = kubectl.json("get", "configmap", "cm-or")
    assert "ownerReferences" not in kept["metadata"]
    assert "deletionTimestamp" not in kept["metadata"]
    gadget = kubectl.json("get", f"gadgets.{GROUP}", "g-or")
    assert gadget["metadata"]["ownerReferences"] == [ref(cm)]
    kubectl.run("delete", "configmap", "cm-or")
    kubectl.run("wait", "--for=delete", f"gadgets.{GROUP}/g-or", "--timeout=10s")


def test_dangling_owner_references_are_collected(kubectl: Kubectl) -> None:
    ghost = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "name": "ghost",
             "uid": "8e0ec1a8-2c5e-4c3f-9a38-000000000001"}
    kubectl.run("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "orphaned-by-a-ghost", "ownerReferences": [ghost]}}))
    kubectl.run("wait", "--for=delete", "configmap/orphaned-by-a-ghost", "--timeout=15s")


def test_invalid_owner_references_are_refused(kubectl: Kubectl) -> None:
    bad = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "bad-refs", "ownerReferences": [
               {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "1",
                "controller": True},
               {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "2",
                "controller": True}]}}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0
    assert "Only one reference can have Controller set to true" in result.stderr


KINDS_IN_NAMESPACE = 5
PER_KIND = 40


def namespace_manifest(namespace: str, held: set[int]) -> str:
    docs: list[dict[str, Any]] = []

    def meta(name: str, i: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "namespace": namespace}
        if i in held:
            out["finalizers"] = [HOLD]
        return out

    for i in range(PER_KIND):
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(f"cm-{i}", i),
                     "data": {"i": str(i)}})
        docs.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta(f"s-{i}", i),
                     "stringData": {"i": str(i)}})
        docs.append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": meta(f"l-{i}", i), "spec": {"holderIdentity": f"h{i}"}})
        docs.append({"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": meta(f"w-{i}", i),
                     "spec": {"size": i}})
        docs.append({"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": meta(f"g-{i}", i)})
    # a stream of JSON documents (kubectl validates a v1 List against OpenAPI v2, which is
    # not served)
    return "\n".join(json.dumps(doc) for doc in docs)


HELD_RESOURCES = ("configmap", "secret", "lease", f"widgets.{GROUP}", f"gadgets.{GROUP}")


def test_deleting_a_namespace_with_200_objects(kubectl: Kubectl) -> None:
    ns = "crowded"
    held = {3, 17}
    kubectl.run("create", "namespace", ns)
    # the controllers give every namespace its default ServiceAccount and the
    # kube-root-ca.crt ConfigMap; neither is held, both go with the namespace
    for published in ("configmap/kube-root-ca.crt", "serviceaccount/default"):
        kubectl.run("wait", "--for=create", published, "-n", ns, "--timeout=30s")
    kubectl.run("apply", "-f", "-", input=namespace_manifest(ns, held), timeout=120)
    counts = [len(kubectl.run("get", r, "-n", ns, "-o", "name").stdout.split())
              for r in HELD_RESOURCES]
    # 200 objects of 5 kinds, and kube-root-ca.crt
    assert counts == [PER_KIND + 1] + [PER_KIND] * (KINDS_IN_NAMESPACE - 1)
    started = time.monotonic()
    deleter = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "delete", "namespace", ns,
         "--timeout=120s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=kubectl.env)
    try:
        def only_held_left() -> dict[str, Any] | None:
            namespace = kubectl.json("get", "namespace", ns)
            conditions = {c["type"]: c for c in namespace["status"].get("conditions") or []}
            finalizers = conditions.get("NamespaceFinalizersRemaining", {})
            remaining = conditions.get("NamespaceContentRemaining", {})
            wanted = (f"Some content in the namespace has finalizers remaining: {HOLD} in "
                      f"{len(held) * KINDS_IN_NAMESPACE} resource instances")
            if finalizers.get("message") == wanted and remaining.get("status") == "True":
                return namespace
            return None

        namespace = eventually(only_held_left, timeout=60)
        assert namespace["status"]["phase"] == "Terminating"
        assert namespace["spec"]["finalizers"] == ["kubernetes"]
        conditions = {c["type"]: c for c in namespace["status"]["conditions"]}
        assert conditions["NamespaceContentRemaining"]["message"] == (
            "Some resources are remaining: configmaps. has 2 resource instances, "
            f"gadgets.{GROUP} has 2 resource instances, leases.coordination.k8s.io has 2 "
            "resource instances, secrets. has 2 resource instances, "
            f"widgets.{GROUP} has 2 resource instances")
        assert conditions["NamespaceDeletionContentFailure"]["status"] == "False"
        table = kubectl.run("get", "namespace", ns).stdout.splitlines()
        assert table[1].split()[:2] == [ns, "Terminating"]
        # creates are refused while it terminates, with Kubernetes' message
        refused = kubectl.run("create", "configmap", "late", "-n", ns, check=False)
        assert refused.returncode != 0
        assert (f'configmaps "late" is forbidden: unable to create new content in namespace '
                f"{ns} because it is being terminated") in refused.stderr
        refused = kubectl.run("apply", "-f", "-", check=False, input=json.dumps(
            {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
             "metadata": {"name": "late", "namespace": ns}}))
        assert refused.returncode != 0
        assert "because it is being terminated" in refused.stderr
        assert deleter.poll() is None, "kubectl delete returned while objects remained"
        for resource in HELD_RESOURCES:
            for name in kubectl.run("get", resource, "-n", ns, "-o", "name").stdout.split():
                kubectl.run("patch", name, "-n", ns, "--type=json",
                            "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
        out, err = deleter.communicate(timeout=60)
    finally:
        if deleter.poll() is None:
            deleter.kill()
            deleter.communicate()
    assert deleter.returncode == 0, err
    assert f'namespace "{ns}" deleted' in out
    missing = kubectl.run("get", "namespace", ns, check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr
    print(f"namespace with 200 objects: deleted in {time.monotonic() - started:.1f}s "
          "(including the test's own kubectl calls)")
