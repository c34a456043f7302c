"""Shared fixtures: an in-process server on port 0, and a real ``setpoint serve`` process."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.agent import isolation as agent_isolation
from setpoint.client import config as client_config
from setpoint.client import transport
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fails a test that leaves a task running once it and its fixtures are done: whatever
    a test starts must be stopped (a server's tasks by the server's own shutdown) — done,
    or at least cancelled."""
    before = asyncio.all_tasks()
    yield
    left = {t for t in asyncio.all_tasks() - before if t is not asyncio.current_task()}
    if left:  # tasks just told to stop end by themselves
        await asyncio.wait(left, timeout=5)
    # a task still being cancelled was stopped by its owner (aiohttp's handler of a closed
    # connection may linger in its read of an unread body); one never cancelled leaked
    leaked = [t for t in left if not t.done() and not t.cancelling()]
    for task in leaked:
        task.cancel()
    assert not leaked, f"tasks left running: {leaked}"


@pytest.fixture(autouse=True)
def _every_async_test_leaves_no_task(request: pytest.FixtureRequest) -> None:
    """:func:`no_leaked_tasks` for every coroutine test, set up before its other
    function-scoped fixtures so that it is torn down after them."""
    if inspect.iscoroutinefunction(getattr(request.node, "function", None)):
        request.getfixturevalue("no_leaked_tasks")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    """A control plane in this event loop, on memory storage and a free port."""
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          kubeconfig_path=tmp_path / "kubeconfig")
    async with Server(config) as s:
        yield s


@pytest.fixture
async def http(server: Server) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        yield session


@dataclass
class ServeProcess:
    """A ``setpoint serve`` child process and what it wrote."""

    process: subprocess.Popen[bytes]
    data_dir: Path
    kubeconfig: Path
    url: str
    log: Path

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS as the admin kubeconfig says (the cluster CA and the admin's client
        certificate); None for a plain HTTP server."""
        return kubeconfig_ssl_context(self.kubeconfig)

    def urlopen(self, path: str, *, data: bytes | None = None, method: str | None = None,
                headers: dict[str, str] | None = None, timeout: float = 10
                ) -> Any:
        """``urllib.request.urlopen`` of ``url + path`` as the admin."""
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers=headers or {})
        return urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context())

    def session(self, **kwargs: Any) -> aiohttp.ClientSession:
        """An aiohttp session on this server as the admin (call inside an event loop)."""
        connector = aiohttp.TCPConnector(ssl=self.ssl_context() or False)
        return aiohttp.ClientSession(base_url=self.url, connector=connector, **kwargs)

    def stop(self, sig: int | None = None, *, leave_pods: bool = False) -> int:
        """Stop the server (SIGTERM, or ``sig``; SIGKILL after 15 s) and return its exit
        status. Its agent leaves the pods' processes running for the next agent, as a
        kubelet does: unless ``leave_pods``, they are stopped here, so that no test leaves
        a process behind."""
        if self.process.poll() is None:
            if sig is None:
                self.process.terminate()
            else:
                self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not leave_pods:
            self.stop_pods()
        return self.process.returncode

    def stop_pods(self) -> None:
        """``setpoint agent --stop-pods`` on the agent's directory, if it left pods, or
        network namespaces of pods it had not recorded yet when it stopped (the runtime
        that starts for ``--stop-pods`` removes those of its agent that no pod owns)."""
        agent = self.data_dir / "agent"
        pods = agent / "pods" / "pods"
        if (pods.is_dir() and any(pods.iterdir())) or left_namespaces(agent / "pods"):
            subprocess.run([sys.executable, "-m", "setpoint", "agent", "--stop-pods",
                            "--root-dir", str(agent)], capture_output=True, timeout=120,
                           check=True)


def left_namespaces(root: Path) -> list[str]:
    """The network namespaces (``/run/netns/setpoint-<agent id>-<pod uid>``) of the process
    runtime on ``root`` that still exist."""
    try:
        agent_id = str(json.loads((root / "agent.json").read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return []
    return [n for n in names if n.startswith(f"setpoint-{agent_id}-")]


def kubeconfig_ssl_context(path: Path) -> ssl.SSLContext | None:
    """The TLS context of the client a kubeconfig describes (None: plain HTTP)."""
    config = client_config.load_kubeconfig(path)
    return transport.ssl_context(config) if config.is_https else None


_servers = itertools.count()


def pod_cidr_args(extra_args: Sequence[str]) -> list[str]:
    """``--pod-cidr`` of a range no other server of this test run uses at the same time,
    unless the caller chose one (or runs no agent).

    Pod addresses are machine-wide: two agents handing out the same addresses (on the one
    pod bridge as root, or on loopback without) would answer for each other's pods when
    tests run in parallel workers. Each worker (``PYTEST_XDIST_WORKER``) gets slots of its
    own: ``172.16.0.0/12`` with network namespaces, ``127.64.0.0/11`` on loopback — apart
    from the ranges the tests that choose their own use.
    """
    if "--pod-cidr" in extra_args or "--no-agent" in extra_args:
        return []
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    slot = (int(worker) if worker.isdigit() else 0) * 4 + next(_servers) % 4
    isolation = (extra_args[list(extra_args).index("--pod-isolation") + 1]
                 if "--pod-isolation" in extra_args else "auto")
    if isolation in ("auto", "namespaces") and agent_isolation.decide("auto").namespaces:
        return ["--pod-cidr", f"172.{16 + slot % 16}.0.0/16"]
    return ["--pod-cidr", f"127.{64 + slot % 32}.0.0/16"]


def start_serve(data_dir: Path, *, storage: str = "sqlite", timeout: float = 60.0,
                etcd_endpoints: Sequence[str] = (), extra_args: Sequence[str] = (),
                launcher: Sequence[str] = ()) -> ServeProcess:
    """Start ``setpoint serve --port 0`` and wait until its kubeconfig exists and /readyz is 200.

    ``storage="etcd"`` needs ``etcd_endpoints`` (client URLs); ``extra_args`` go to the end
    of the command line (``--etcd-prefix``, ``--controllers``, ...); ``launcher`` goes
    before it (``prlimit --nofile=1024:1024``).
    """
    if (storage == "etcd") != bool(etcd_endpoints):
        raise ValueError("etcd_endpoints go with storage='etcd', and only with it")
    etcd_args = ["--etcd-endpoints", ",".join(etcd_endpoints)] if etcd_endpoints else []
    data_dir.mkdir(parents=True, exist_ok=True)
    kubeconfig = data_dir / "kubeconfig"
    if kubeconfig.exists():
        kubeconfig.unlink()
    log = data_dir / "serve.log"
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            [*launcher, sys.executable, "-m", "setpoint", "serve", "--port", "0", "--data-dir",
             str(data_dir), "--storage", storage, *etcd_args, *extra_args,
             *pod_cidr_args(extra_args)],
            stdout=log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    url = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"setpoint serve exited: {log.read_text()}")
        if kubeconfig.exists():
            for line in kubeconfig.read_text().splitlines():
                if "server:" in line:
                    url = line.split("server:", 1)[1].strip()
            if url:
                try:
                    with urllib.request.urlopen(url + "/readyz", timeout=1,
                                                context=kubeconfig_ssl_context(kubeconfig)) as r:
                        if r.status == 200:
                            return ServeProcess(process, data_dir, kubeconfig, url, log)
                except OSError:
                    pass
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"setpoint serve did not become ready: {log.read_text()}")


@pytest.fixture
def serve_factory(tmp_path: Path) -> Iterator[type[ServeProcess] | object]:
    started: list[ServeProcess] = []

    def factory(data_dir: Path | None = None, **kwargs: object) -> ServeProcess:
        proc = start_serve(data_dir or tmp_path / f"serve{len(started)}", **kwargs)  # type: ignore[arg-type]
        started.append(proc)
        return proc

    yield factory
    for proc in started:
        proc.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubectl_available() -> bool:
    return shutil.which("kubectl") is not None
