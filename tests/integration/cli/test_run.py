"""``setpoint run`` as a real process against a real ``setpoint serve`` process."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from setpoint.apimachinery import errors
from setpoint.client import Client, NoMatchError, load_kubeconfig
from setpoint.testing import eventually
from setpoint.testing.waiting import DEFAULT_TIMEOUT
from tests.conftest import ServeProcess, free_port

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
BOOK = ("library.example.com/v1", "Book")
CONFIGMAP = ("v1", "ConfigMap")


def setpoint_run(*args: str | Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "setpoint", "run", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def documents(path: Path) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(path.read_text()))


async def install(client: Client, path: Path) -> None:
    for doc in documents(path):
        await client.create(doc)
        if doc["kind"] == "CustomResourceDefinition":
            spec = doc["spec"]
            version, kind = f"{spec['group']}/{spec['versions'][0]['name']}", spec["names"]["kind"]
            await eventually(lambda v=version, k=kind: client.discovery.resolve(v, k),
                             retry_on=(NoMatchError,), what=f"{kind} served")


async def eventually_get(client: Client, resource: Any, name: str, check: Any,
                         timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """``name`` once ``check`` holds for it (a 404 means not yet)."""
    async def get() -> dict[str, Any] | None:
        obj: dict[str, Any] = await client.get(resource, name)
        return obj if check(obj) else None

    found: dict[str, Any] = await eventually(get, timeout=timeout, retry_on=(errors.NotFound,),
                                             what=f"{name} as expected")
    return found


async def gone(client: Client, resource: Any, name: str) -> bool:
    try:
        await client.get(resource, name)
    except errors.NotFound:
        return True
    return False


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


async def test_run_the_book_operator_against_serve_and_stop_it(
        serve_factory: Any, tmp_path: Path) -> None:
    serve: ServeProcess = serve_factory()
    health, metrics = free_port(), free_port()
    log = tmp_path / "run.log"
    async with Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "book" / "crd.yaml")
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "setpoint", "run", "examples/book/operator.py",
                "--kubeconfig", str(serve.kubeconfig), "--health-port", str(health),
                "--metrics-port", str(metrics), "--leader-elect", "--workers", "2",
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            await install(client, EXAMPLES / "book" / "books.yaml")
            dune = await eventually_get(
                client, BOOK, "dune",
                lambda b: (b.get("status") or {}).get("phase") == "Catalogued")
            assert dune["metadata"]["finalizers"] == ["library.example.com/catalogue"]
            catalogue = await client.get(CONFIGMAP, "library-catalogue")
            assert catalogue["data"]["dune"] == "Dune by Frank Herbert, 412 pages"
            await eventually(lambda: asyncio.to_thread(
                ready, f"http://127.0.0.1:{health}/readyz"), what="the operator ready")
            text = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics",
                                               timeout=2).read().decode())
            assert 'controller_runtime_reconcile_total{controller="book"' in text
            lease = await client.get(("coordination.k8s.io/v1", "Lease"), "book-operator-leader")
            assert lease["spec"]["holderIdentity"]

            await client.delete(BOOK, "dune")
            await eventually_get(client, CONFIGMAP, "library-catalogue",
                                 lambda cm: "dune" not in (cm.get("data") or {}))
            await eventually(lambda: gone(client, BOOK, "dune"), what="dune deleted")
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    code = await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
                raise
        output = log.read_text()
        assert code == 0, output
        assert "setpoint run: 1 controller(s)" in output
        # the banner names each controller and its kind
        assert ": book (library.example.com/v1 Book)\n" in output
        assert "name=None" not in output
        assert "Traceback" not in output
        # a graceful stop releases the Lease for the next replica
        lease = await client.get(("coordination.k8s.io/v1", "Lease"), "book-operator-leader")
        assert not lease["spec"].get("holderIdentity")


def test_a_file_without_controllers_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.py"
    empty.write_text("ANSWER = 42\n")
    result = setpoint_run(empty, "--kubeconfig", tmp_path / "missing")
    assert result.returncode == 2
    assert "defines no controllers" in result.stderr


@pytest.mark.parametrize("target", ["no/such/operator.py", "no_such_module.operator"],
                         ids=["file", "module"])
def test_a_missing_target_is_refused(target: str) -> None:
    result = setpoint_run(target)
    assert result.returncode == 2
    assert "no such file" in result.stderr


def test_an_unreachable_server_is_refused(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
        "clusters": [{"name": "nowhere",
                      "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "u"}}]}))
    result = setpoint_run(EXAMPLES / "book" / "operator.py", "--kubeconfig", kubeconfig)
    assert result.returncode == 2
    assert "cannot reach the API server" in result.stderr


def test_a_kind_the_server_does_not_serve_is_refused(serve_factory: Any) -> None:
    serve: ServeProcess = serve_factory()
    result = setpoint_run("examples.book.operator", "--kubeconfig", serve.kubeconfig)
    assert result.returncode == 2
    assert "does not serve" in result.stderr
    assert "Book" in result.stderr


def test_bad_kubeconfig_and_flags_are_refused(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("current-context: missing\n")
    result = setpoint_run(EXAMPLES / "book" / "operator.py", "--kubeconfig", broken)
    assert result.returncode == 2
    assert "kubeconfig" in result.stderr
    result = setpoint_run(EXAMPLES / "book" / "operator.py", "--lease-name", "x")
    assert result.returncode == 2
    assert "--lease-name needs --leader-elect" in result.stderr


@pytest.mark.parametrize(("source", "expected"), [
    ("import no_such_dependency_anywhere\n",
     "ModuleNotFoundError: No module named 'no_such_dependency_anywhere' (broken.py:1)"),
    ("x = 1\nraise RuntimeError('bad settings')\n", "RuntimeError: bad settings (broken.py:2)"),
    ("def reconcile(:\n", "SyntaxError: "),
], ids=["missing-dependency", "raises", "syntax"])
def test_an_operator_that_cannot_be_imported_gets_one_line(
        tmp_path: Path, source: str, expected: str) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(source)
    result = setpoint_run(broken, "--kubeconfig", tmp_path / "missing")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"setpoint run: error: cannot import {broken}: ")
    assert expected.replace("broken.py", str(broken)) in lines[0]


async def test_a_probe_port_in_use_is_a_clear_error(serve_factory: Any) -> None:
    serve: ServeProcess = serve_factory()
    async with Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "book" / "crd.yaml")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = await asyncio.to_thread(
            setpoint_run, EXAMPLES / "book" / "operator.py", "--kubeconfig",
            serve.kubeconfig, "--health-port", str(port))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert (f"setpoint run: error: cannot serve health on 127.0.0.1:{port}: "
            "Address already in use (choose another port, or 0 for any free one)\n"
            ) == result.stderr
