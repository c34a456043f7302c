"""A pytest plugin loaded (``-p peer_e2e_plugin``) into the run of a peer client's own e2e
tests against a running ``setpoint serve``.

It changes none of the clients' test files; it only supplies what their own harness would:

* ``kubernetes.e2e_test`` and ``kubernetes_asyncio.e2e_test`` are not in the installed wheels;
  the vendored copies are added to the installed packages' ``__path__`` so that the tests'
  ``from kubernetes.e2e_test import base`` finds them (``PEER_E2E_PACKAGE_PATHS``).
* kr8s' tests take their cluster from pytest-kind's ``KindCluster`` (a session fixture,
  ``k8s_cluster``, in kr8s' repository root conftest, which is not installed); here it is the
  setpoint server of ``KUBECONFIG`` with the same three attributes the tests use.
* kr8s' root conftest also has ``ensure_gc`` (garbage collection around a test), which some
  of its tests request; it is repeated here.
* Each test's outcome, with the first line of its failure, is written as JSON to
  ``PEER_E2E_RESULTS`` after each test and when the session ends.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

for _entry in filter(None, os.environ.get("PEER_E2E_PACKAGE_PATHS", "").split(os.pathsep)):
    _package, _, _directory = _entry.partition("=")
    importlib.import_module(_package).__path__.append(_directory)

_results: dict[str, dict[str, str]] = {}


class SetpointCluster:
    """What kr8s' tests use of pytest-kind's ``KindCluster``, for the server of a kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig_path = kubeconfig
        self.kubectl_path = Path(shutil.which("kubectl") or "kubectl")

    def kubectl(self, *args: str) -> str:
        return subprocess.check_output(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig_path), *args],
            encoding="utf-8", timeout=60)


@pytest.fixture(scope="session")
def k8s_cluster() -> SetpointCluster:
    return SetpointCluster(Path(os.environ["KUBECONFIG"]))


@pytest.fixture
def ensure_gc() -> Iterator[None]:
    gc.collect()
    yield
    gc.collect()


def _message(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    if report.skipped and isinstance(report.longrepr, tuple):
        text = str(report.longrepr[2])
    return " ".join(text.split())[:400]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    entry = _results.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if hasattr(report, "wasxfail"):
        entry.update(outcome="xfailed" if report.skipped else "xpassed",
                     message=str(report.wasxfail))
    elif report.failed:
        if entry["outcome"] != "failed":
            entry.update(outcome="failed" if report.when == "call" else "error",
                         message=f"{report.when}: {_message(report)}")
    elif report.skipped and entry["outcome"] == "passed":
        entry.update(outcome="skipped", message=_message(report))
    if report.when == "teardown":
        _write()  # after every test: a run stopped from outside keeps what it finished


def _write() -> None:
    target = os.environ.get("PEER_E2E_RESULTS")
    if target:
        Path(target).write_text(json.dumps(_results, indent=1, sort_keys=True))


def pytest_sessionfinish(session: pytest.Session, exitstatus: Any) -> None:
    _write()
