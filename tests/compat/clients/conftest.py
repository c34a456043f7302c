"""Fixtures for the Python clients' compatibility tests: a ``setpoint serve`` per module.

Each test module imports its client with ``pytest.importorskip``, so a module is skipped (with
the reason) only when that client is not installed.
"""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from setpoint.testing.waiting import eventually_blocking as eventually  # noqa: F401 (re-exported)
from tests.conftest import ServeProcess, start_serve

GROUP = "example.com"

#: a namespaced custom resource with every list kind, status and scale subresources
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "shortNames": ["wd"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas"}},
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "size": {"type": "integer"},
                    "replicas": {"type": "integer"},
                    "color": {"type": "string"},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set",
                             "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"],
                                        "properties": {"name": {"type": "string"},
                                                       "port": {"type": "integer"}}}}}},
                "status": {"type": "object",
                           "x-kubernetes-preserve-unknown-fields": True}}}},
        }],
    },
}


def widget(name: str, size: int = 1, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, **spec}}


def http(serve: ServeProcess, method: str, path: str, body: Any = None,
         content_type: str = "application/json") -> tuple[int, Any]:
    """One JSON request to ``serve`` as its admin (TLS and the client certificate of the admin
    kubeconfig); the status code and the decoded body, errors included."""
    data = json.dumps(body).encode() if body is not None else None
    try:
        with serve.urlopen(path, data=data, method=method,
                           headers={"Content-Type": content_type}) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def install_crd(serve: ServeProcess, crd: dict[str, Any], plural_path: str) -> None:
    """Create ``crd`` (unless it exists) and wait until ``plural_path`` is served."""
    status, body = http(serve, "POST", "/apis/apiextensions.k8s.io/v1/"
                        "customresourcedefinitions", crd)
    assert status in (201, 409), body
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if http(serve, "GET", plural_path)[0] == 200:
            return
        time.sleep(0.02)
    raise AssertionError(f"{plural_path} was not served in time")


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = start_serve(tmp_path_factory.mktemp("serve"), storage="memory")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def widgets(serve: ServeProcess) -> str:
    """The widgets CRD, installed; the collection path in the default namespace."""
    path = f"/apis/{GROUP}/v1/namespaces/default/widgets"
    install_crd(serve, WIDGET_CRD, path)
    return path
