"""``scripts/extract_openapi.py`` on a small Swagger document: the listed kinds, their list
kinds, what they refer to (and nothing else), the operations' query parameters, provenance."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from setpoint.server.openapi import builtins

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "extract_openapi.py"
_spec = importlib.util.spec_from_file_location("extract_openapi", SCRIPT)
assert _spec is not None
assert _spec.loader is not None
EXTRACT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(EXTRACT)
CM = "io.k8s.api.core.v1.ConfigMap"


def definition(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


#: a kind the script does not extract (made up: every real kind may come to be served)
UNLISTED = "io.k8s.api.example.v1.NeverServed"


def swagger() -> dict[str, Any]:
    ref = lambda name: {"$ref": f"#/definitions/{name}"}  # noqa: E731
    listed = [*EXTRACT.KINDS, *(f"{k}List" for k in EXTRACT.KINDS), *EXTRACT.SHARED]
    defs: dict[str, Any] = {name: definition() for name in (*listed, UNLISTED)}
    defs[CM] = definition(metadata=ref("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"))
    defs[CM]["x-kubernetes-group-version-kind"] = [{"group": "", "kind": "ConfigMap",
                                                    "version": "v1"}]
    defs[CM + "List"] = definition(items={"type": "array", "items": ref(CM)})
    defs["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"] = definition(
        owners={"type": "array", "items": ref("io.k8s.apimachinery.pkg.apis.meta.v1.Owner")},
        # a property named $ref is not a reference
        **{"$ref": {"type": "string"}})
    defs["io.k8s.apimachinery.pkg.apis.meta.v1.Owner"] = definition()
    param = {"in": "query", "name": "pretty", "type": "string"}
    ops = {"parameters": [{"$ref": "#/parameters/pretty-x"}]}
    item = {"get": ops, "put": ops, "patch": {"parameters": [
        {"in": "query", "name": "fieldValidation", "type": "string"},
        {"in": "query", "name": "ignoreStoreReadErrorWithClusterBreakingPotential"}]},
        "delete": ops}
    paths = {"/api/v1/namespaces/{namespace}/configmaps": {"get": ops, "post": ops,
                                                           "delete": ops},
             "/api/v1/namespaces/{namespace}/configmaps/{name}": item}
    return {"swagger": "2.0", "definitions": defs, "paths": paths,
            "parameters": {"pretty-x": param}}


def test_extracts_the_closure_of_the_served_kinds(tmp_path: Path) -> None:
    source = tmp_path / "swagger.json"
    source.write_text(json.dumps(swagger()))
    out = tmp_path / "kubernetes.json"
    subprocess.run([sys.executable, str(SCRIPT), str(source), "--kubernetes-version", "v1.32",
                    "--output", str(out)], check=True, capture_output=True)
    data = json.loads(out.read_text())
    assert data["kubernetesVersion"] == "v1.32"
    assert data["sourceSha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert "Apache-2.0" in data["license"]
    names = set(data["definitions"])
    assert {CM, CM + "List", "io.k8s.apimachinery.pkg.apis.meta.v1.Owner"} <= names
    assert UNLISTED not in names  # not listed, not referred to
    params = data["queryParameters"]
    assert [p["name"] for p in params["patch"]] == ["fieldValidation"]  # unsupported left out
    assert params["get"] == [{"in": "query", "name": "pretty", "type": "string"}]
    loaded = builtins.Definitions.from_document(data)
    assert loaded.name_of("", "v1", "ConfigMap") == CM


def test_refuses_a_document_that_is_not_swagger(tmp_path: Path) -> None:
    source = tmp_path / "openapi.json"
    source.write_text(json.dumps({"openapi": "3.0.0", "components": {}}))
    result = subprocess.run([sys.executable, str(SCRIPT), str(source), "--kubernetes-version",
                             "v1.32", "--output", str(tmp_path / "out.json")],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "not a Swagger 2.0 document" in result.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("missing", ["io.k8s.api.core.v1.Secret"])
def test_a_listed_kind_missing_from_the_source_is_an_error(tmp_path: Path,
                                                           missing: str) -> None:
    doc = swagger()
    del doc["definitions"][missing]
    source = tmp_path / "swagger.json"
    source.write_text(json.dumps(doc))
    result = subprocess.run([sys.executable, str(SCRIPT), str(source), "--kubernetes-version",
                             "v1.32", "--output", str(tmp_path / "out.json")],
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert f"{missing} is not defined in the source" in result.stderr
