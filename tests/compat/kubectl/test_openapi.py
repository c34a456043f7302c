"""The kubectl commands that read the server's OpenAPI: explain (v3, and v2 through its protobuf
form), apply of a ``kind: List`` (validated client-side against v2), client-side apply with
strategic merge patches built from the published patch strategies, and diff."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.compat.conftest import Kubectl

pytestmark = pytest.mark.compat

GROUP = "openapi.example.com"
CRD = f"gizmos.{GROUP}"

GIZMO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD},
    "spec": {
        "group": GROUP, "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
        "versions": [{
            "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "description": "A Gizmo does one thing well.",
                "properties": {
                    "spec": {"type": "object", "description": "What the gizmo should do.",
                             "required": ["mode"],
                             "properties": {
                                 "mode": {"type": "string", "enum": ["fast", "slow"],
                                          "description": "How fast it runs."},
                                 "size": {"x-kubernetes-int-or-string": True},
                                 "note": {"type": "string", "nullable": True},
                                 "parts": {"type": "array", "items": {"type": "string"}},
                                 "extra": {"type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}},
                    "status": {"type": "object",
                               "properties": {"ready": {"type": "boolean"}}}}}},
        }],
    },
}


@pytest.fixture(scope="module", autouse=True)
def gizmo_crd(kubectl: Kubectl) -> Iterator[None]:
    kubectl.run("apply", "-f", "-", input=json.dumps(GIZMO_CRD))
    kubectl.run("wait", "--for=condition=Established", f"crd/{CRD}", "--timeout=10s")
    yield
    kubectl.run("delete", f"crd/{CRD}", "--timeout=30s", check=False)


def no_warnings(stderr: str) -> None:
    assert "warning" not in stderr.lower(), stderr


@pytest.mark.parametrize(("field", "expected"), [
    ("configmap.data", "Data contains the configuration data. Each key must consist of"),
    ("secret.type", "Used to facilitate programmatic handling of secret data."),
    ("namespace.spec.finalizers", "Finalizers is an opaque list of values that must be empty"),
    ("lease.spec.holderIdentity", "holderIdentity contains the identity of the holder of a"),
    ("configmap.metadata.ownerReferences",
     "List of objects depended by this object. If ALL objects in the list have"),
    ("crd.spec.versions.schema",
     "schema describes the schema used for validation, pruning, and defaulting"),
    ("crd.spec.versions.schema.openAPIV3Schema",
     "openAPIV3Schema is the OpenAPI v3 schema to use for validation and pruning."),
    ("gizmo.spec.mode", "How fast it runs."),
    ("job.spec.backoffLimit", "Specifies the number of retries before marking this job failed."),
    ("cronjob.spec.schedule", "The schedule in Cron format"),
    ("daemonset.spec.updateStrategy",
     "An update strategy to replace existing DaemonSet pods with new pods."),
    ("statefulset.spec.podManagementPolicy",
     "podManagementPolicy controls how pods are created during initial scale up"),
], ids=lambda v: v if "." in v and " " not in v else "")
def test_explain_prints_the_published_descriptions(kubectl: Kubectl, field: str,
                                                   expected: str) -> None:
    result = kubectl.run("explain", field)
    assert expected in " ".join(result.stdout.split()), result.stdout
    no_warnings(result.stderr)


def test_explain_of_both_event_kinds(kubectl: Kubectl) -> None:
    core = kubectl.run("explain", "events", "--api-version=v1").stdout
    assert "involvedObject\t<ObjectReference> -required-" in core
    events = kubectl.run("explain", "events", "--api-version=events.k8s.io/v1").stdout
    assert "GROUP:      events.k8s.io" in events
    assert "regarding\t<ObjectReference>" in events


def test_explain_recursive_walks_nested_schemas(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "namespace", "--recursive").stdout
    lines = out.splitlines()
    assert "    managedFields\t<[]ManagedFieldsEntry>" in lines
    assert "      fieldsV1\t<FieldsV1>" in lines
    assert "      blockOwnerDeletion\t<boolean>" in lines
    assert "    phase\t<string>" in lines
    crd = kubectl.run("explain", "crd.spec.versions.schema.openAPIV3Schema",
                      "--recursive").stdout
    assert "  x-kubernetes-validations\t<[]ValidationRule>" in crd.splitlines()


def test_explain_through_openapi_v2_reads_the_protobuf_document(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "configmap.metadata.ownerReferences",
                      "--output=plaintext-openapiv2").stdout
    assert "RESOURCE: ownerReferences <[]Object>" in out
    assert "OwnerReference contains enough information to let you identify" in " ".join(
        out.split())
    gizmo = kubectl.run("explain", "gizmo.spec", "--output=plaintext-openapiv2").stdout
    assert "What the gizmo should do." in gizmo
    assert "mode\t<string> -required-" in gizmo


def gizmo(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gizmo",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"mode": "fast", **spec}}


def configmap(name: str, data: dict[str, str], **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", **metadata}, "data": data}


def test_apply_of_a_list_and_the_get_output_round_trip(kubectl: Kubectl) -> None:
    items = [configmap("list-a", {"a": "1"}), configmap("list-b", {"b": "2"}),
             gizmo("list-g", size="50%", parts=["x"], extra={"any": {"thing": 1}})]
    manifest = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    created = kubectl.run("apply", "-f", "-", input=manifest)
    assert created.stdout.split("\n")[:3] == ["configmap/list-a created",
                                               "configmap/list-b created",
                                               f"gizmo.{GROUP}/list-g created"]
    no_warnings(created.stderr)
    again = kubectl.run("apply", "-f", "-", input=manifest)
    assert "configmap/list-a unchanged" in again.stdout
    assert f"gizmo.{GROUP}/list-g unchanged" in again.stdout

    exported = kubectl.run("get", "configmap/list-a", "configmap/list-b", "gizmo/list-g",
                           "-o", "yaml").stdout
    assert yaml.safe_load(exported)["kind"] == "List"
    round_trip = kubectl.run("apply", "-f", "-", input=exported)
    assert f"gizmo.{GROUP}/list-g" in round_trip.stdout
    no_warnings(round_trip.stderr)
    assert kubectl.json("get", "gizmo", "list-g")["spec"]["size"] == "50%"
    assert kubectl.json("get", "configmap", "list-b")["data"] == {"b": "2"}


def test_a_list_is_validated_client_side_against_the_published_schemas(
        kubectl: Kubectl) -> None:
    bad = {"apiVersion": "v1", "kind": "List",
           "items": [configmap("list-bad", {"a": "1"}) | {"unknownField": 1}]}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0
    assert 'unknown field "unknownField"' in result.stderr
    missing = {"apiVersion": "v1", "kind": "List",
               "items": [{**gizmo("list-bad"), "spec": {"size": 1}}]}
    result = kubectl.run("apply", "-f", "-", input=json.dumps(missing), check=False)
    assert result.returncode != 0
    assert 'missing required field "mode"' in result.stderr


def test_client_side_apply_patches_a_list_field_strategically(kubectl: Kubectl) -> None:
    first = configmap("smp", {"k": "1"}, finalizers=["example.com/a", "example.com/b"])
    kubectl.run("apply", "-f", "-", input=json.dumps(first))
    second = configmap("smp", {"k": "2"}, finalizers=["example.com/a", "example.com/c"])
    result = kubectl.run("apply", "-f", "-", "-v=8", input=json.dumps(second))
    assert "configmap/smp configured" in result.stdout
    patches = [line for line in result.stderr.splitlines() if "PATCH http" in line]
    assert len(patches) == 1
    after_patch = result.stderr.split(patches[0], 1)[1]
    assert "Content-Type: application/strategic-merge-patch+json" in after_patch
    # the patch metadata came from the server's OpenAPI v3, not kubectl's compiled-in types
    assert "$setElementOrder/finalizers" in result.stderr
    assert "does not support strategic merge patch" not in result.stderr
    assert "error calculating patch" not in result.stderr
    obj = kubectl.json("get", "configmap", "smp")
    assert obj["metadata"]["finalizers"] == ["example.com/a", "example.com/c"]
    assert obj["data"] == {"k": "2"}
    kubectl.run("patch", "configmap", "smp", "--type=merge", "-p",
                '{"metadata":{"finalizers":null}}')


def test_diff_shows_the_change_and_nothing_when_unchanged(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps(gizmo("diffed", parts=["a"])))
    same = kubectl.run("diff", "-f", "-", input=json.dumps(gizmo("diffed", parts=["a"])),
                       check=False)
    assert same.returncode == 0, same.stderr
    assert same.stdout == ""
    changed = kubectl.run("diff", "-f", "-",
                          input=json.dumps(gizmo("diffed", parts=["a", "b"])), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "+  - b" in changed.stdout
    cm = kubectl.run("diff", "-f", "-", input=json.dumps(configmap("diff-new", {"x": "y"})),
                     check=False)
    assert cm.returncode == 1, cm.stderr
    assert "+  x: \"y\"" in cm.stdout


def test_a_new_crd_is_explained_through_the_same_cache(kubectl: Kubectl) -> None:
    # kubectl caches the v3 documents by URL in its cache dir: the hash must change
    assert "Gizmo" in kubectl.run("explain", "gizmo").stdout
    later = json.loads(json.dumps(GIZMO_CRD))
    later["metadata"]["name"] = f"doohickeys.{GROUP}"
    later["spec"]["names"] = {"plural": "doohickeys", "singular": "doohickey",
                              "kind": "Doohickey"}
    later["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "Doohickeys."
    kubectl.run("apply", "-f", "-", input=json.dumps(later))
    kubectl.run("wait", "--for=condition=Established", f"crd/doohickeys.{GROUP}",
                "--timeout=10s")
    try:
        out = kubectl.run("explain", "doohickey").stdout
        assert "Doohickeys." in out
        assert "KIND:       Doohickey" in out
    finally:
        kubectl.run("delete", f"crd/doohickeys.{GROUP}", "--timeout=30s", check=False)
