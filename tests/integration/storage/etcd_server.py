"""A real etcd for tests: free loopback ports, a private data dir, health-checked start, stop.

The binary is ``$SETPOINT_TEST_ETCD`` if set (to try another etcd version), else ``etcd`` on
the ``PATH`` (Debian: ``apt-get install etcd-server``). Tests that need it skip with
:data:`MISSING` when there is none.
"""

from __future__ import annotations

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
    keep its data and ports, as a restarted member would."""

    def __init__(self, data_dir: Path, *extra_args: str) -> None:
        if BINARY is None:
            raise RuntimeError(MISSING)
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.extra_args = extra_args
        self.log = data_dir.with_name(data_dir.name + ".log")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        assert BINARY is not None
        assert not self.running
        client, peer = self.endpoint, f"http://127.0.0.1:{self.peer_port}"
        command = [
            BINARY, "--name", "test", "--data-dir", str(self.data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"test={peer}", "--logger", "zap", "--log-level", "error",
            *self.extra_args,
        ]
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
        self._wait_healthy()

    def _wait_healthy(self) -> None:
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


@contextmanager
def running(data_dir: Path, *extra_args: str) -> Iterator[EtcdServer]:
    """A started :class:`EtcdServer`, stopped on exit."""
    server = EtcdServer(data_dir, *extra_args)
    try:
        server.start()
        yield server
    finally:
        server.stop()
