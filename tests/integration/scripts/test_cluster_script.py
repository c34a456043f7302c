"""``scripts/cluster.sh``: 3 etcd members and 2 API servers started by one command, a write
through one server read through the other, everything stopped by Ctrl-C (SIGINT), and the
same directory started again on its data."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.storage import etcd_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(etcd_server.BINARY is None, reason=etcd_server.MISSING),
    pytest.mark.skipif(importlib.util.find_spec("aetcd") is None,
                       reason="the aetcd client is not installed"),
    pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash"),
]

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "cluster.sh"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def start(directory: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """Run the script until it says ready; the API servers' URLs."""
    env = {**os.environ, "PYTHON": sys.executable, "ETCD": str(etcd_server.BINARY)}
    process = subprocess.Popen(
        ["bash", str(SCRIPT), "-n", "2", "-d", str(directory), "-p", "0", "-e", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    assert process.stdout is not None
    output = []
    deadline = time.monotonic() + 60
    for line in process.stdout:
        output.append(line)
        if line.startswith("ready"):
            break
        assert time.monotonic() < deadline, "".join(output)
    text = "".join(output)
    assert "ready" in text, text
    return process, re.findall(r"server\d\s+(http://\S+)", text)


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    return out


def call(url: str, method: str = "GET", body: object = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_command_starts_and_ctrl_c_stops_a_cluster(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    process, urls = start(directory)
    try:
        assert len(urls) == 2
        pids = [int(p) for p in (directory / "pids").read_text().split()]
        assert len(pids) == 5
        call(urls[0] + CONFIGMAPS, "POST", {"apiVersion": "v1", "kind": "ConfigMap",
                                            "metadata": {"name": "hello"}})
        listed = call(urls[1] + CONFIGMAPS)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["hello"]
        for i in (0, 1):
            assert (directory / f"server{i}" / "kubeconfig").exists()
    finally:
        out = stop(process)
    assert process.returncode == 130, out
    assert "stopped" in out
    assert not [pid for pid in pids if alive(pid)]

    process, urls = start(directory)  # the same data, the same etcd ports
    try:
        got = call(urls[0] + CONFIGMAPS + "/hello")
        assert got["metadata"]["name"] == "hello"
    finally:
        stop(process)
