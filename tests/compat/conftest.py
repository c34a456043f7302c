"""Fixtures for driving a real ``setpoint serve`` with the real kubectl."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from setpoint.testing.waiting import DEFAULT_TIMEOUT, eventually_blocking
from tests.conftest import ServeProcess, start_serve

MANIFESTS = Path(__file__).parent / "kubectl" / "manifests"

pytestmark = pytest.mark.compat


@dataclass
class Kubectl:
    """Runs the real kubectl against one server, through its kubeconfig only."""

    kubeconfig: Path
    cache_dir: Path
    env: dict[str, str]

    def run(self, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess[str]:
        cmd = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir",
               str(self.cache_dir), *args]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True,
                                timeout=timeout, env=self.env)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({result.returncode}):\n"
                                 f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "-o", "json").stdout)

    def apply(self, manifest: str | Path) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-f", str(manifest))


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    proc = start_serve(tmp_path_factory.mktemp("serve"))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    import os

    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    return Kubectl(serve.kubeconfig, tmp_path_factory.mktemp("kubecache"), env)


def http_get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def eventually(check: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT,
               interval: float = 0.1) -> Any:
    """Retry ``check`` until it returns a truthy value; an assertion it makes or a
    connection it cannot open yet count as "not yet"."""
    return eventually_blocking(check, timeout=timeout, interval=interval,
                               retry_on=(AssertionError, OSError))


@dataclass
class Proxy:
    process: subprocess.Popen[str]
    url: str


@pytest.fixture(scope="module")
def proxy(kubectl: Kubectl) -> Iterator[Proxy]:
    """``kubectl proxy`` on a free port."""
    process = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "proxy", "--port=0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=kubectl.env)
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"127\.0\.0\.1:(\d+)", line)
    assert match, f"unexpected kubectl proxy output: {line!r}"
    yield Proxy(process, f"http://127.0.0.1:{match.group(1)}")
    process.terminate()
    process.wait(timeout=10)
    process.stdout.close()
