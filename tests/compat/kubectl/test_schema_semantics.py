"""Structural-schema semantics seen through kubectl: defaults, pruning warnings, CRD checks."""

from __future__ import annotations

import json

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module", autouse=True)
def pumps_crd(kubectl: Kubectl) -> None:
    kubectl.apply(MANIFESTS / "crd-defaults.yaml")
    kubectl.run("wait", "--for=condition=Established", "crd/pumps.water.example.com",
                "--timeout=10s")


def test_defaults_appear_in_created_objects(kubectl: Kubectl) -> None:
    pump = {"apiVersion": "water.example.com/v1", "kind": "Pump",
            "metadata": {"name": "p1"}, "spec": {"rate": 5}}
    kubectl.run("create", "-f", "-", input=json.dumps(pump))
    spec = kubectl.json("get", "pump", "p1")["spec"]
    assert spec == {"rate": 5, "mode": "auto", "schedule": {"hour": 3}}


def test_unknown_field_is_pruned_with_a_warning(kubectl: Kubectl) -> None:
    pump = {"apiVersion": "water.example.com/v1", "kind": "Pump",
            "metadata": {"name": "p2"}, "spec": {"rate": 5, "colour": "blue"}}
    result = kubectl.run("create", "--validate=warn", "-f", "-", input=json.dumps(pump))
    assert 'Warning: unknown field "spec.colour"' in result.stderr
    assert "colour" not in kubectl.json("get", "pump", "p2")["spec"]


def test_enum_and_bounds_are_enforced(kubectl: Kubectl) -> None:
    pump = {"apiVersion": "water.example.com/v1", "kind": "Pump",
            "metadata": {"name": "p3"}, "spec": {"mode": "turbo", "schedule": {"hour": 25}}}
    result = kubectl.run("create", "-f", "-", input=json.dumps(pump), check=False)
    assert result.returncode != 0
    assert 'spec.mode: Unsupported value: "turbo": supported values: "auto", "manual"' in \
        result.stderr
    assert "spec.schedule.hour: Invalid value: 25" in result.stderr


def test_non_structural_v1_crd_is_rejected_with_reasons(kubectl: Kubectl) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "loose.water.example.com"},
           "spec": {"group": "water.example.com", "scope": "Namespaced",
                    "names": {"plural": "loose", "kind": "Loose"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {
                                      "type": "object",
                                      "properties": {"spec": {
                                          "properties": {"a": {"type": "string"}}}}}}}]}}
    result = kubectl.run("create", "-f", "-", input=json.dumps(crd), check=False)
    assert result.returncode != 0
    assert 'The CustomResourceDefinition "loose.water.example.com" is invalid' in result.stderr
    assert ("spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: "
            "must not be empty for specified object fields") in result.stderr


def test_v1beta1_crd_without_schema_keeps_unknown_fields(kubectl: Kubectl) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "notes.water.example.com"},
           "spec": {"group": "water.example.com", "version": "v1", "scope": "Namespaced",
                    "names": {"plural": "notes", "kind": "Note"}}}
    kubectl.run("apply", "-f", "-", input=json.dumps(crd))
    kubectl.run("wait", "--for=condition=Established", "crd/notes.water.example.com",
                "--timeout=10s")
    note = {"apiVersion": "water.example.com/v1", "kind": "Note", "metadata": {"name": "n1"},
            "spec": {"anything": {"goes": [1, 2, 3]}}, "extra": "kept"}
    kubectl.run("apply", "-f", "-", input=json.dumps(note))
    got = kubectl.json("get", "note", "n1")
    assert got["spec"] == {"anything": {"goes": [1, 2, 3]}}
    assert got["extra"] == "kept"
