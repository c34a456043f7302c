"""A real etcd for tests: free loopback ports, a private data dir, health-checked start, stop.

:class:`EtcdServer` is one single-member cluster; :class:`EtcdCluster` starts several members
that form one cluster (each with its own ports and data dir), and can kill -9 and restart
any of them. Given an :class:`EtcdPKI`, members serve clients over TLS and require client
certificates (``--client-cert-auth``), as a production etcd does; peers stay on plain
loopback HTTP.

The binary is ``$SETPOINT_TEST_ETCD`` if set (to try another etcd version), else ``etcd`` on
the ``PATH`` (Debian: ``apt-get install etcd-server``). Tests that need it skip with
:data:`MISSING` when there is none.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from setpoint.pki import certs

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


@dataclass(frozen=True)
class EtcdPKI:
    """Certificates for a TLS etcd, made with :mod:`setpoint.pki.certs` in ``directory``:
    the cluster's CA (``ca.crt``), the members' certificate (``member.crt``: serverAuth for
    clients, clientAuth because etcd's HTTP gateway connects to its own gRPC port with it;
    SANs 127.0.0.1 and localhost), setpoint's client certificate (``client.crt``), and an
    unrelated CA (``stranger-ca.crt``, the same name with another key) with its client
    certificate (``stranger.crt``).

    ``trusted`` is the CA whose clients etcd accepts: ``ca`` (setpoint's) or
    ``stranger-ca`` (then etcd refuses setpoint's certificate, as after a botched CA
    rotation)."""

    directory: Path
    trusted: str = "ca"

    @classmethod
    def create(cls, directory: Path) -> EtcdPKI:
        now = dt.datetime.now(dt.UTC)
        ca = certs.new_ca("etcd-ca", now=now)
        stranger_ca = certs.new_ca("etcd-ca", now=now)  # the same name, another key
        pairs = {
            "ca": ca,
            "stranger-ca": stranger_ca,
            "member": certs.issue(ca, common_name="etcd-member", usage=("server", "client"),
                                  now=now, hosts=("127.0.0.1", "localhost")),
            "client": certs.issue(ca, common_name="setpoint", usage="client", now=now),
            "stranger": certs.issue(stranger_ca, common_name="setpoint", usage="client",
                                    now=now),
        }
        directory.mkdir(parents=True, exist_ok=True)
        for name, pair in pairs.items():
            (directory / f"{name}.crt").write_bytes(pair.cert_pem)
            (directory / f"{name}.key").write_bytes(pair.key_pem)
            (directory / f"{name}.key").chmod(0o600)
        return cls(directory)

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def server_args(self) -> tuple[str, ...]:
        return ("--client-cert-auth", "--trusted-ca-file", str(self.path(f"{self.trusted}.crt")),
                "--cert-file", str(self.path("member.crt")),
                "--key-file", str(self.path("member.key")))

    def client_files(self, who: str = "client") -> tuple[Path, Path, Path]:
        """``(ca_file, cert_file, key_file)`` of the client ``who`` (``client`` or
        ``stranger``)."""
        return self.ca_file, self.path(f"{who}.crt"), self.path(f"{who}.key")

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the members and presents a certificate etcd
        accepts (``client.crt``, or ``stranger.crt`` when etcd trusts the stranger CA)."""
        who = "client" if self.trusted == "ca" else "stranger"
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(self.path(f"{who}.crt"), self.path(f"{who}.key"))
        return context


class EtcdServer:
    """One single-member etcd cluster in ``data_dir``; :meth:`stop` and :meth:`start` again
    keep its data and ports, as a restarted member would. As a member of a larger cluster
    (:class:`EtcdCluster`) it gets its ``name``, ports and ``initial_cluster`` from there.
    With ``pki`` it serves clients over TLS with client-certificate authentication
    (``pki`` may be replaced between a :meth:`stop` and a :meth:`start`)."""

    def __init__(self, data_dir: Path, *extra_args: str, name: str = "test",
                 client_port: int | None = None, peer_port: int | None = None,
                 initial_cluster: str | None = None, pki: EtcdPKI | None = None) -> None:
        if BINARY is None:
            raise RuntimeError(MISSING)
        self.pki = pki
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
        scheme = "https" if self.pki is not None else "http"
        return f"{scheme}://127.0.0.1:{self.client_port}"

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
            *(self.pki.server_args() if self.pki is not None else ()),
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
                with self._urlopen(f"{self.endpoint}/health") as reply:
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
        with self._urlopen(request, timeout=2) as reply:
            body = json.loads(reply.read())
        return {"member": str(body["header"]["member_id"]), "leader": str(body["leader"]),
                "version": str(body["version"])}

    def _urlopen(self, request: str | urllib.request.Request, timeout: float = 1
                 ) -> Any:
        context = self.pki.ssl_context() if self.pki is not None else None
        return urllib.request.urlopen(request, timeout=timeout, context=context)

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

    def __init__(self, root: Path, size: int = 3, *extra_args: str,
                 pki: EtcdPKI | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        names = [f"member{i}" for i in range(size)]
        ports = [(free_port(), free_port()) for _ in names]
        initial = ",".join(f"{name}=http://127.0.0.1:{peer}"
                           for name, (_, peer) in zip(names, ports, strict=True))
        token = ("--initial-cluster-token", f"setpoint-test-{ports[0][0]}")
        self.members = [
            EtcdServer(root / name, *token, *extra_args, name=name, client_port=client,
                       peer_port=peer, initial_cluster=initial, pki=pki)
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
def cluster(root: Path, size: int = 3, *extra_args: str,
            pki: EtcdPKI | None = None) -> Iterator[EtcdCluster]:
    """A started :class:`EtcdCluster`, stopped on exit."""
    started = EtcdCluster(root, size, *extra_args, pki=pki)
    try:
        started.start()
        yield started
    finally:
        started.stop()


@contextmanager
def running(data_dir: Path, *extra_args: str,
            pki: EtcdPKI | None = None) -> Iterator[EtcdServer]:
    """A started :class:`EtcdServer`, stopped on exit."""
    server = EtcdServer(data_dir, *extra_args, pki=pki)
    try:
        server.start()
        yield server
    finally:
        server.stop()
