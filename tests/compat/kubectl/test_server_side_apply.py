"""``kubectl apply --server-side`` (and its conflicts) against setpoint, with the real kubectl."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl

pytestmark = pytest.mark.compat

CRD = "customresourcedefinition/books.christianb93.github.com"


@pytest.fixture(scope="module", autouse=True)
def books_crd(kubectl: Kubectl) -> Iterator[None]:
    kubectl.apply(MANIFESTS / "crd-v1.yaml")
    kubectl.run("wait", "--for=condition=Established", CRD, "--timeout=10s")
    return


def book(name: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": "christianb93.github.com/v1", "kind": "Book",
                       "metadata": {"name": name},
                       "spec": {"title": name.title(), "author": "Anon", **spec}})


def managers(obj: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {e["manager"]: (e["operation"], e["fieldsV1"])
            for e in obj["metadata"].get("managedFields", [])}


def get(kubectl: Kubectl, *args: str) -> Any:
    """``kubectl get -o json``, managedFields included (kubectl hides them by default)."""
    return json.loads(kubectl.run("get", *args, "-o", "json", "--show-managed-fields").stdout)


def test_server_side_apply_creates_and_updates(kubectl: Kubectl) -> None:
    created = kubectl.run("apply", "--server-side", "-f", "-", input=book("ssa-one"))
    assert "book.christianb93.github.com/ssa-one serverside-applied" in created.stdout
    obj = get(kubectl, "book", "ssa-one")
    assert managers(obj) == {"kubectl": ("Apply", {"f:spec": {
        "f:author": {}, "f:title": {}}})}
    kubectl.run("apply", "--server-side", "-f", "-", input=book("ssa-one", pages=10))
    obj = kubectl.json("get", "book", "ssa-one")
    assert obj["spec"]["pages"] == 10
    # a field left out of the configuration is removed
    kubectl.run("apply", "--server-side", "-f", "-", input=book("ssa-one"))
    assert "pages" not in kubectl.json("get", "book", "ssa-one")["spec"]


def test_conflicts_are_reported_and_forced(kubectl: Kubectl) -> None:
    kubectl.run("create", "-f", "-", input=book("ssa-two"))
    failed = kubectl.run("apply", "--server-side", "--field-manager=other", "-f", "-",
                         input=book("ssa-two", author="Someone"), check=False)
    assert failed.returncode != 0
    assert ('Apply failed with 1 conflict: conflict with "kubectl-create" using '
            'christianb93.github.com/v1: .spec.author') in failed.stderr
    kubectl.run("apply", "--server-side", "--field-manager=other", "--force-conflicts",
                "-f", "-", input=book("ssa-two", author="Someone"))
    obj = get(kubectl, "book", "ssa-two")
    assert obj["spec"]["author"] == "Someone"
    assert managers(obj)["other"] == ("Apply", {"f:spec": {"f:author": {}, "f:title": {}}})


def test_server_side_apply_takes_over_a_client_side_apply(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=book("ssa-three"))
    kubectl.run("apply", "--server-side", "-f", "-", input=book("ssa-three", author="New"))
    obj = kubectl.json("get", "book", "ssa-three")
    assert obj["spec"]["author"] == "New"
    last = json.loads(obj["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["author"] == "New"
    # and client-side apply still works on top
    kubectl.run("apply", "-f", "-", input=book("ssa-three", author="Newer"))
    assert kubectl.json("get", "book", "ssa-three")["spec"]["author"] == "Newer"


def test_server_side_apply_of_a_configmap(kubectl: Kubectl) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa-cm"},
          "data": {"a": "1"}}
    kubectl.run("apply", "--server-side", "-f", "-", input=json.dumps(cm))
    cm["data"] = {"b": "2"}
    kubectl.run("apply", "--server-side", "--field-manager=second", "-f", "-",
                input=json.dumps(cm))
    obj = get(kubectl, "configmap", "ssa-cm")
    assert obj["data"] == {"a": "1", "b": "2"}
    assert managers(obj)["second"] == ("Apply", {"f:data": {"f:b": {}}})


def test_diff_server_side(kubectl: Kubectl) -> None:
    kubectl.run("apply", "--server-side", "-f", "-", input=book("ssa-diff"))
    same = kubectl.run("diff", "--server-side", "-f", "-", input=book("ssa-diff"),
                       check=False)
    assert same.returncode == 0, same.stderr
    changed = kubectl.run("diff", "--server-side", "-f", "-",
                          input=book("ssa-diff", pages=3), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "+  pages: 3" in changed.stdout
    assert "pages" not in kubectl.json("get", "book", "ssa-diff")["spec"]
