"""kubectl sends large bodies whole: ConfigMaps made from files of 300 KB and 1 MB."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest

from tests.compat.conftest import Kubectl

pytestmark = pytest.mark.compat


@pytest.mark.parametrize("size", [300_000, 1_000_000], ids=["300KB", "1MB"])
def test_create_configmap_from_a_large_file(kubectl: Kubectl, tmp_path: Path,
                                            size: int) -> None:
    rng = random.Random(size)
    text = "".join(rng.choices(string.ascii_letters + string.digits + "\n", k=size))
    source = tmp_path / "blob.txt"
    source.write_text(text)
    name = f"large-{size}"
    kubectl.run("create", "configmap", name, f"--from-file=blob.txt={source}")
    stored = kubectl.json("get", "configmap", name)
    assert stored["data"]["blob.txt"] == text
    kubectl.run("delete", "configmap", name)
