"""A kopf operator, unchanged, run by kopf's own ``KopfRunner`` against ``setpoint serve``.

The operator has create, update and delete handlers (so kopf puts its finalizer on each
object), status patches, a timer and a daemon. It runs standalone, with its custom resource
defined only after the operator started (kopf finds new CRDs through their watch and
discovery), and again with kopf's peering CRDs in place and peering required.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.clients.conftest import eventually, http, install_crd
from tests.conftest import ServeProcess

kopf = pytest.importorskip("kopf", reason="kopf is not installed")

from kopf.testing import KopfRunner  # noqa: E402

pytestmark = pytest.mark.compat

GROUP = "kopf.example.com"
PLURAL = "kopfthings"
THINGS = f"/apis/{GROUP}/v1/namespaces/default/{PLURAL}"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "kopfthing", "kind": "KopfThing"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                "status": {"type": "object",
                           "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


def peering_crd(kind: str, plural: str, scope: str) -> dict[str, Any]:
    """kopf's peering resources, as its documentation defines them."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kopf.dev"},
        "spec": {
            "group": "kopf.dev", "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                              "status": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}}}],
        },
    }


class Record:
    """What the handlers saw, shared between kopf's thread and the test."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def add(self, what: str, name: str) -> None:
        with self.lock:
            self.calls.append((what, name))

    def of(self, name: str) -> list[str]:
        with self.lock:
            return [what for what, n in self.calls if n == name]


def operator(record: Record) -> Any:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: Any, **_: Any) -> None:
        settings.posting.level = logging.INFO
        # a sync daemon notices its stop flag within its wait; give it that long before kopf
        # falls back to polling for it (once a minute by default)
        settings.background.instant_exit_timeout = 1.0
        record.add("startup", "")

    @kopf.on.create(GROUP, "v1", PLURAL, registry=registry, id="created")
    def created(name: str, body: Any, spec: Any, patch: Any, **_: Any) -> dict[str, Any]:
        record.add("create", name)
        kopf.info(body, reason="Created", message=f"{name} has size {spec.get('size')}")
        patch.status["phase"] = "Created"
        return {"size": spec.get("size")}

    @kopf.on.update(GROUP, "v1", PLURAL, registry=registry, id="updated")
    def updated(name: str, spec: Any, patch: Any, **_: Any) -> None:
        record.add("update", name)
        patch.status["phase"] = "Updated"
        patch.status["size"] = spec.get("size")

    @kopf.on.delete(GROUP, "v1", PLURAL, registry=registry, id="deleted")
    def deleted(name: str, **_: Any) -> None:
        record.add("delete", name)

    @kopf.timer(GROUP, "v1", PLURAL, interval=0.2, registry=registry, id="tick")
    def tick(name: str, status: Any, patch: Any, **_: Any) -> None:
        record.add("timer", name)
        patch.status["ticks"] = int(status.get("ticks") or 0) + 1

    @kopf.daemon(GROUP, "v1", PLURAL, registry=registry, id="watcher")
    def watcher(name: str, stopped: Any, **_: Any) -> None:
        record.add("daemon-started", name)
        while not stopped:
            stopped.wait(0.05)
        record.add("daemon-stopped", name)

    return registry


@pytest.fixture
def kubeconfig(serve: ServeProcess, monkeypatch: pytest.MonkeyPatch) -> ServeProcess:
    monkeypatch.setenv("KUBECONFIG", str(serve.kubeconfig))
    return serve


def get(serve: ServeProcess, name: str) -> Any:
    status, body = http(serve, "GET", f"{THINGS}/{name}")
    return body if status == 200 else None


def exercise(serve: ServeProcess, record: Record, name: str) -> None:
    """Create, update and delete one object; check what kopf did at each step."""
    status, body = http(serve, "POST", THINGS, {
        "apiVersion": f"{GROUP}/v1", "kind": "KopfThing", "metadata": {"name": name},
        "spec": {"size": 1}})
    assert status == 201, body
    obj = eventually(lambda: (o := get(serve, name)) and (o.get("status") or {}).get(
        "phase") == "Created" and (o["status"].get("ticks") or 0) >= 2 and o, timeout=20)
    assert obj["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
    assert obj["status"]["created"] == {"size": 1}
    assert "kopf.zalando.org/last-handled-configuration" in obj["metadata"]["annotations"]
    assert record.of(name)[:1] != ["update"]
    patched = patch(serve, name, {"spec": {"size": 2}})
    assert patched["metadata"]["generation"] == 2
    obj = eventually(lambda: (o := get(serve, name)) and o["status"].get("phase") == "Updated"
                     and o, timeout=20)
    assert obj["status"]["size"] == 2
    status, body = http(serve, "DELETE", f"{THINGS}/{name}")
    assert status == 200, body
    eventually(lambda: get(serve, name) is None, timeout=20)
    calls = record.of(name)
    assert calls.count("create") == 1
    assert calls.count("update") == 1
    assert calls.count("delete") == 1
    assert calls.count("timer") >= 2
    assert calls.count("daemon-started") == 1
    assert "daemon-stopped" in calls
    assert calls.index("daemon-stopped") < calls.index("delete")
    # kopf posted the handler's event through the core Events API
    events = eventually(lambda: http(serve, "GET", "/api/v1/namespaces/default/events"
                                     f"?fieldSelector=involvedObject.name%3D{name}")[1]["items"])
    assert [(e["reason"], e["message"], e["reportingComponent"]) for e in events] == [
        ("Created", f"{name} has size 1", "kopf")]


def patch(serve: ServeProcess, name: str, body: Any) -> Any:
    status, patched = http(serve, "PATCH", f"{THINGS}/{name}", body,
                           content_type="application/merge-patch+json")
    assert status == 200, patched
    return patched


@contextlib.contextmanager
def run_kopf(args: list[str], record: Record) -> Iterator[KopfRunner]:
    with KopfRunner(["run", "--verbose", *args], registry=operator(record),
                    timeout=60) as runner:
        yield runner
    collect_sockets_left_in_tls_shutdown()
    assert runner.exception is None
    assert runner.exit_code == 0
    assert "Traceback" not in runner.output


def collect_sockets_left_in_tls_shutdown() -> None:
    """Collect the sockets kopf's finished event loop left behind, here rather than in
    whichever test the garbage collector next runs in.

    On its way out kopf closes its open watch responses, which for TLS starts the
    close_notify exchange, and ends its event loop a few milliseconds later, before the
    server's answer is read: those connections' sockets are never closed and only the
    garbage collector finds them (with a ResourceWarning). That is kopf's and aiohttp's
    teardown, not the server's (it answers the close_notify at once). Only such "unclosed"
    ResourceWarnings are absorbed; anything else goes to the usual hook.
    """
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not (isinstance(unraisable.exc_value, ResourceWarning)
                and str(unraisable.exc_value).startswith("unclosed")):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        gc.collect()
    finally:
        sys.unraisablehook = previous


def test_standalone_operator_picks_up_a_crd_created_after_it_started(
        kubeconfig: ServeProcess) -> None:
    serve = kubeconfig
    record = Record()
    with run_kopf(["-A", "--standalone"], record) as runner:
        eventually(lambda: record.of(""))
        time.sleep(0.5)  # kopf is watching CRDs by now
        # the resource does not exist yet: kopf sees the CRD's watch event and rediscovers
        install_crd(serve, CRD, THINGS)
        exercise(serve, record, "solo")
    assert "Unresolved resources cannot be served" in runner.output


def test_operator_with_peering(kubeconfig: ServeProcess) -> None:
    serve = kubeconfig
    install_crd(serve, CRD, THINGS)
    install_crd(serve, peering_crd("ClusterKopfPeering", "clusterkopfpeerings", "Cluster"),
                "/apis/kopf.dev/v1/clusterkopfpeerings")
    install_crd(serve, peering_crd("KopfPeering", "kopfpeerings", "Namespaced"),
                "/apis/kopf.dev/v1/namespaces/default/kopfpeerings")
    peering_path = "/apis/kopf.dev/v1/clusterkopfpeerings"
    status, body = http(serve, "POST", peering_path, {
        "apiVersion": "kopf.dev/v1", "kind": "ClusterKopfPeering",
        "metadata": {"name": "default"}})
    assert status == 201, body
    record = Record()
    with run_kopf(["-A", "--peering=default"], record):
        peers = eventually(lambda: (http(serve, "GET", peering_path + "/default")[1].get("status")
                                    or {}), timeout=20)
        assert len(peers) == 1
        (peer,) = copy.deepcopy(list(peers.values()))
        assert peer["priority"] == 0
        exercise(serve, record, "peered")
    # on exit kopf takes its own entry out of the peering object: no leftovers
    eventually(lambda: not (http(serve, "GET", peering_path + "/default")[1].get("status") or {}),
               timeout=10)
