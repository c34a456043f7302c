"""A real etcd for tests: free loopback ports, a private data dir, health-checked start, stop.

:class:`EtcdServer` is one single-member cluster; :class:`EtcdCluster` starts several members
that form one cluster (each with its own ports and data dir), and can kill -9 and restart
any of them.

The binary is ``$SETPOINT_TEST_ETCD`` if set (to try another etcd version), else ``etcd`` on
the ``PATH`` (Debian: ``apt-get install etcd-server``). Tests that need it skip with
:data:`MISSING` when there is none.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BINARY = os.environ.get("SETPOINT_TEST_ETCD") or shutil.which("etcd")
MISSING = "no etcd binary installed (apt-get install etcd-server, or set SETPOINT_TEST_ETCD)"
START_TIMEOUT = 15.0
PROGRESS_EVERY_100MS = ("--experimental-watch-progress-notify-interval", "100ms")
"""etcd sends a watch without events a progress notification this often (default: 10 min)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class EtcdServer:
    """One single-member etcd cluster in ``data_dir``; :meth:`stop` and :meth:`start` again
    keep its data and ports, as a restarted member would. As a member of a larger cluster
    (:class:`EtcdCluster`) it gets its ``name``, ports and ``initial_cluster`` from there."""

    def __init__(self, data_dir: Path, *extra_args: str, name: str = "test",
                 client_port: int | None = None, peer_port: int | None = None,
                 initial_cluster: str | None = None) -> None:
        if BINARY is None:
            raise RuntimeError(MISSING)
        self.data_dir = data_dir
        self.name = name
        self.client_port = client_port or free_port()
        self.peer_port = peer_port or free_port()
        self.initial_cluster = initial_cluster or f"{name}={self.peer_url}"
        self.extra_args = extra_args
        self.log = data_dir.with_name(data_dir.name + ".log")
        self._process: subprocess.Popen[bytes] | None = None
        self._id: str | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.running and self._process is not None else None

    def start(self, *, wait: bool = True) -> None:
        """Start the process; with ``wait``, return once it reports itself healthy (which a
        member of a larger cluster does only once a quorum is up)."""
        assert BINARY is not None
        assert not self.running
        client, peer = self.endpoint, self.peer_url
        command = [
            BINARY, "--name", self.name, "--data-dir", str(self.data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster, "--logger", "zap",
            "--log-level", "error", *self.extra_args,
        ]
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        if wait:
            self.wait_healthy()

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"etcd exited with {self._process.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/health", timeout=1) as reply:
                    if b'"true"' in reply.read():
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"etcd was not healthy within {START_TIMEOUT}s")

    def kill(self) -> None:
        """kill -9: no chance to flush or say goodbye to its peers."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def status(self) -> dict[str, str]:
        """This member's ``Maintenance.Status`` through etcd's JSON gateway (ids as strings)."""
        request = urllib.request.Request(f"{self.endpoint}/v3/maintenance/status", data=b"{}",
                                         method="POST")
        with urllib.request.urlopen(request, timeout=2) as reply:
            body = json.loads(reply.read())
        return {"member": str(body["header"]["member_id"]), "leader": str(body["leader"]),
                "version": str(body["version"])}

    def status_id(self) -> str:
        """This member's id (as :meth:`status` reports ids); cached once known."""
        if self._id is None:
            self._id = self.status()["member"]
        return self._id

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class EtcdCluster:
    """``size`` etcd members on loopback forming one cluster, data under ``root/<name>``."""

    def __init__(self, root: Path, size: int = 3, *extra_args: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        names = [f"member{i}" for i in range(size)]
        ports = [(free_port(), free_port()) for _ in names]
        initial = ",".join(f"{name}=http://127.0.0.1:{peer}"
                           for name, (_, peer) in zip(names, ports, strict=True))
        token = ("--initial-cluster-token", f"setpoint-test-{ports[0][0]}")
        self.members = [
            EtcdServer(root / name, *token, *extra_args, name=name, client_port=client,
                       peer_port=peer, initial_cluster=initial)
            for name, (client, peer) in zip(names, ports, strict=True)]

    @property
    def endpoints(self) -> list[str]:
        return [member.endpoint for member in self.members]

    def start(self) -> None:
        """Start every member, then wait until each is healthy (a leader is elected)."""
        for member in self.members:
            if not member.running:
                member.start(wait=False)
        for member in self.members:
            member.wait_healthy()

    def leader(self) -> int:
        """The index of the current leader, asked of the running members."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for member in self.members:
                if not member.running:
                    continue
                try:
                    status = member.status()
                except (urllib.error.URLError, OSError, KeyError, ValueError):
                    continue
                for index, candidate in enumerate(self.members):
                    if candidate.running and candidate.status_id() == status["leader"]:
                        return index
            time.sleep(0.05)
        raise RuntimeError("no etcd leader found")

    def stop(self) -> None:
        for member in self.members:
            member.stop()


@contextmanager
def cluster(root: Path, size: int = 3, *extra_args: str) -> Iterator[EtcdCluster]:
    """A started :class:`EtcdCluster`, stopped on exit."""
    started = EtcdCluster(root, size, *extra_args)
    try:
        started.start()
        yield started
    finally:
        started.stop()


@contextmanager
def running(data_dir: Path, *extra_args: str) -> Iterator[EtcdServer]:
    """A started :class:`EtcdServer`, stopped on exit."""
    server = EtcdServer(data_dir, *extra_args)
    try:
        server.start()
        yield server
    finally:
        server.stop()
