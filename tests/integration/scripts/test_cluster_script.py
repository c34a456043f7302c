"""``scripts/cluster.sh``: 3 etcd members and 2 API servers started by one command, a write
through one server read through the other, everything stopped by Ctrl-C (SIGINT), and the
same directory started again on its data; with ``-T``, etcd over TLS with client
certificates (a client without one is refused), and the directory stays a TLS cluster."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import kubeconfig_ssl_context
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


def start(directory: Path, *flags: str) -> tuple[subprocess.Popen[str], list[str], str]:
    """Run the script until it says ready; the API servers' URLs, and what it printed."""
    env = {**os.environ, "PYTHON": sys.executable, "ETCD": str(etcd_server.BINARY)}
    process = subprocess.Popen(
        ["bash", str(SCRIPT), "-n", "2", "-d", str(directory), "-p", "0", "-e", "0", *flags],
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
    return process, re.findall(r"server\d\s+(https?://\S+)", text), text


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    out, _ = process.communicate(timeout=60)
    return out


def call(directory: Path, url: str, method: str = "GET", body: object = None) -> Any:
    """``url`` as the admin (the servers share one CA, so any server's kubeconfig does)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    context = kubeconfig_ssl_context(directory / "server0" / "kubeconfig")
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        return json.loads(reply.read())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_command_starts_and_ctrl_c_stops_a_cluster(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    process, urls, _ = start(directory)
    try:
        assert len(urls) == 2
        pids = [int(p) for p in (directory / "pids").read_text().split()]
        assert len(pids) == 5
        call(directory, urls[0] + CONFIGMAPS, "POST",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hello"}})
        listed = call(directory, urls[1] + CONFIGMAPS)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["hello"]
        for i in (0, 1):
            assert (directory / f"server{i}" / "kubeconfig").exists()
    finally:
        out = stop(process)
    assert process.returncode == 130, out
    assert "stopped" in out
    assert not [pid for pid in pids if alive(pid)]

    process, urls, _ = start(directory)  # the same data, the same etcd ports
    try:
        got = call(directory, urls[0] + CONFIGMAPS + "/hello")
        assert got["metadata"]["name"] == "hello"
    finally:
        stop(process)


def etcd_health(endpoint: str, pki: Path, *, certificate: bool) -> bytes:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if certificate:
        context.load_cert_chain(pki / "apiserver-etcd-client.crt",
                                pki / "apiserver-etcd-client.key")
    with urllib.request.urlopen(f"{endpoint}/health", timeout=5, context=context) as reply:
        body: bytes = reply.read()
        return body


def test_with_tls_etcd_takes_only_client_certificates_of_its_ca(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    process, urls, text = start(directory, "-T")
    try:
        members = re.findall(r"member\d\s+(\S+)", text)
        assert len(members) == 3
        assert all(m.startswith("https://127.0.0.1:") for m in members), text
        pki = directory / "etcd" / "pki"
        assert b'"health":"true"' in etcd_health(members[0], pki, certificate=True)
        with pytest.raises(ssl.SSLError, match="BAD_CERTIFICATE"):
            etcd_health(members[0], pki, certificate=False)
        call(directory, urls[0] + CONFIGMAPS, "POST",
             {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "over-tls"}})
        listed = call(directory, urls[1] + CONFIGMAPS)
        assert [i["metadata"]["name"] for i in listed["items"]] == ["over-tls"]
    finally:
        out = stop(process)
    assert process.returncode == 130, out

    process, urls, text = start(directory)  # no -T: the directory stays a TLS cluster
    try:
        assert "is a TLS cluster" in text
        got = call(directory, urls[0] + CONFIGMAPS + "/over-tls")
        assert got["metadata"]["name"] == "over-tls"
    finally:
        stop(process)
