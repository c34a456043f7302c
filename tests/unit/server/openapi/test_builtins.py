"""The shipped definitions: provenance, completeness for every served built-in kind, integrity."""

from __future__ import annotations

import fnmatch
import importlib.resources
import tomllib
from pathlib import Path

import orjson
import pytest

from setpoint.registry import core, crd
from setpoint.server import discovery
from setpoint.server.openapi import builtins

DATA = builtins.Definitions.load()


def test_the_data_says_where_it_comes_from_and_matches_the_served_version() -> None:
    document = orjson.loads(importlib.resources.files(builtins.__package__)
                            .joinpath(builtins.DATA_FILE).read_bytes())
    assert "Apache-2.0" in document["license"]
    assert document["copyright"] == "The Kubernetes Authors"
    assert len(document["sourceSha256"]) == 64
    assert document["source"]
    assert DATA.kubernetes_version.startswith("v1.")
    minor = DATA.kubernetes_version.split(".")[1]
    assert minor == discovery.version_doc("v1.32.0")["minor"]


def served_builtins() -> list[tuple[str, str, str, str]]:
    found = []
    for info, _ in core.builtin_resources():
        for v in info.served_versions:
            found.append((info.group, v.name, info.kind, info.list_kind))
    found.append((crd.GROUP, "v1", "CustomResourceDefinition", "CustomResourceDefinitionList"))
    return found


@pytest.mark.parametrize(("group", "version", "kind", "list_kind"), served_builtins(),
                         ids=lambda v: v or "core")
def test_every_served_builtin_has_its_published_schema(group: str, version: str, kind: str,
                                                       list_kind: str) -> None:
    name = DATA.name_of(group, version, kind)
    assert name is not None, f"add the definition of {group}/{version} {kind} to " \
                             "scripts/extract_openapi.py and run it"
    assert DATA.name_of(group, version, list_kind) is not None
    assert DATA.definitions[name]["description"]


def test_core_and_events_events_are_distinct_definitions() -> None:
    assert DATA.name_of("", "v1", "Event") == "io.k8s.api.core.v1.Event"
    assert DATA.name_of("events.k8s.io", "v1", "Event") == "io.k8s.api.events.v1.Event"


def test_object_meta_carries_the_patch_strategies_kubectl_reads() -> None:
    props = DATA.definitions[builtins.OBJECT_META]["properties"]
    owners = props["ownerReferences"]
    assert owners["x-kubernetes-patch-strategy"] == "merge"
    assert owners["x-kubernetes-patch-merge-key"] == "uid"
    assert owners["x-kubernetes-list-type"] == "map"
    assert owners["x-kubernetes-list-map-keys"] == ["uid"]
    assert props["finalizers"]["x-kubernetes-patch-strategy"] == "merge"
    assert props["managedFields"]["items"] == {
        "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"}


def test_the_crd_schema_tree_is_complete() -> None:
    closure = DATA.closure([DATA.name_of(crd.GROUP, "v1", "CustomResourceDefinition") or ""])
    assert "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps" in closure
    assert "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.ValidationRule" in closure


def test_query_parameters_include_field_validation_for_writes() -> None:
    for action in ("post", "put", "patch"):
        names = [DATA.parameters[key]["name"] for key in DATA.query_parameters[action]]
        assert "fieldValidation" in names
        assert "dryRun" in names
    assert "force" in [DATA.parameters[k]["name"] for k in DATA.query_parameters["patch"]]


def test_a_dangling_reference_is_refused() -> None:
    with pytest.raises(builtins.DataError, match="not defined"):
        builtins.Definitions.from_document(
            {"definitions": {"A": {"properties": {"b": {"$ref": "#/definitions/B"}}}}})
    with pytest.raises(builtins.DataError, match="no definitions"):
        builtins.Definitions.from_document({})


def test_the_data_file_is_declared_package_data() -> None:
    root = Path(__file__).resolve().parents[4]
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["setpoint"]
    assert any(fnmatch.fnmatch(f"server/openapi/{builtins.DATA_FILE}", p) for p in patterns)
