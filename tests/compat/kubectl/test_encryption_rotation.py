"""Encryption at rest across a key rotation, as docs/security.md tells an administrator to do
it: add the new key first, restart, rewrite every Secret, drop the old key, restart."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.compat.conftest import Kubectl
from tests.conftest import start_serve

pytestmark = pytest.mark.compat


def raw_storage(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.glob("state.db*"))


def test_rotating_the_encryption_key(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    data = tmp_path / "data"
    serve = start_serve(data)
    kubectl = Kubectl(serve.kubeconfig, tmp_path / "cache", {})
    try:
        kubectl.run("create", "secret", "generic", "old", "--from-literal=v=before-rotation")
    finally:
        serve.stop()
    config_path = data / "pki" / "encryption.yaml"
    config = yaml.safe_load(config_path.read_text())
    box = config["resources"][0]["providers"][0]["secretbox"]
    assert [k["name"] for k in box["keys"]] == ["key1"]
    new_key = {"name": "key2", "secret": base64.b64encode(b"n" * 32).decode()}
    box["keys"].insert(0, new_key)  # step 1: the new key first, the old one still listed
    config_path.write_text(yaml.safe_dump(config))

    serve = start_serve(data)
    try:
        assert kubectl.json("get", "secret", "old")["data"]["v"] == base64.b64encode(
            b"before-rotation").decode()
        kubectl.run("create", "secret", "generic", "new", "--from-literal=v=after-rotation")
        secrets = kubectl.run("get", "secrets", "-A", "-o", "json").stdout
        kubectl.run("replace", "-f", "-", input=secrets)  # step 2: rewrite every Secret
    finally:
        serve.stop()
    raw = raw_storage(data)
    assert b"k8s:enc:secretbox:v1:key2:" in raw
    assert b"before-rotation" not in raw
    assert b"after-rotation" not in raw

    box["keys"] = [new_key]  # step 3: the old key goes
    config_path.write_text(yaml.safe_dump(config))
    serve = start_serve(data)
    try:
        values = {s["metadata"]["name"]: base64.b64decode(s["data"]["v"]).decode()
                  for s in json.loads(kubectl.run("get", "secrets", "-o", "json").stdout)["items"]}
        assert values == {"old": "before-rotation", "new": "after-rotation"}
    finally:
        serve.stop()
