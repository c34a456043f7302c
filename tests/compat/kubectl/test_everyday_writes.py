"""Everyday kubectl writes whose result depends on server semantics: concurrent labels,
the field managers kubectl's commands are recorded under, namespace labels, event tables."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.compat.conftest import Kubectl

pytestmark = pytest.mark.compat


def test_six_parallel_labels_all_succeed(kubectl: Kubectl) -> None:
    kubectl.run("create", "configmap", "labelled", "--from-literal=k=v")

    def label(i: int) -> subprocess.CompletedProcess[str]:
        return kubectl.run("label", "configmap", "labelled", f"team{i}=t{i}", check=False)

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(label, range(6)))
    failed = [r.stderr for r in results if r.returncode != 0]
    assert not failed, failed
    labels = kubectl.json("get", "configmap", "labelled")["metadata"]["labels"]
    assert labels == {f"team{i}": f"t{i}" for i in range(6)}
    kubectl.run("delete", "configmap", "labelled")
