"""Nothing acknowledged is lost: kill -9 the server mid-stream, restart on the same data."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import signal
import socket
import ssl
import threading
import urllib.parse
from pathlib import Path

from tests.conftest import ServeProcess, start_serve


def _create(serve: ServeProcess, name: str, context: ssl.SSLContext | None) -> bool:
    """POST one ConfigMap; True when the server acknowledged it (201).

    A connection of its own, closed on every path: the server is killed in the middle of
    these, and http.client can leave a half-read response's socket to the garbage
    collector when that happens."""
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name}, "data": {"n": name}}).encode()
    address = urllib.parse.urlsplit(serve.url)
    host, port = address.hostname or "127.0.0.1", address.port or 443
    head = (f"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    try:
        with socket.create_connection((host, port), timeout=5) as raw, \
                contextlib.ExitStack() as stack:
            conn: socket.socket = raw
            if context is not None:
                conn = stack.enter_context(context.wrap_socket(raw, server_hostname=host))
            conn.sendall(head + body)
            answer = b""
            while b"\r\n" not in answer:
                data = conn.recv(4096)
                if not data:
                    return False
                answer += data
            return answer.startswith(b"HTTP/1.1 201 ")
    except OSError:  # ssl.SSLError and timeouts included
        return False


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_serve(data, storage="sqlite")
    context = first.ssl_context()
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    killed = threading.Event()

    def writer(worker: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"cm-{worker}-{i}"
            if _create(first, name, context):
                with lock:
                    acknowledged.append(name)
                    if len(acknowledged) >= 300 and not killed.is_set():
                        killed.set()
                        first.process.send_signal(signal.SIGKILL)
            elif killed.is_set():
                return
            i += 1

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(writer, w) for w in range(8)]
        assert killed.wait(60), "the writers never reached 300 acknowledged writes"
        first.process.wait(timeout=10)
        stop.set()
        for f in futures:
            f.result(timeout=30)
    assert first.process.returncode == -signal.SIGKILL

    second = start_serve(data, storage="sqlite")
    try:
        with second.urlopen("/api/v1/namespaces/default/configmaps") as response:
            listed = json.loads(response.read())
        present = {item["metadata"]["name"] for item in listed["items"]}
        missing = [name for name in acknowledged if name not in present]
        assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:5]}"
        assert len(acknowledged) >= 300
        revisions = [int(item["metadata"]["resourceVersion"]) for item in listed["items"]]
        assert len(set(revisions)) == len(revisions)
    finally:
        second.stop()
