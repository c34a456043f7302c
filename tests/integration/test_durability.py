"""Nothing acknowledged is lost: kill -9 the server mid-stream, restart on the same data."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import threading
import urllib.error
from pathlib import Path

from tests.conftest import ServeProcess, start_serve


def _create(serve: ServeProcess, name: str) -> bool:
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name}, "data": {"n": name}}).encode()
    try:
        with serve.urlopen("/api/v1/namespaces/default/configmaps", data=body, method="POST",
                           headers={"Content-Type": "application/json"}, timeout=5) as response:
            return response.status == 201
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_serve(data, storage="sqlite")
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    killed = threading.Event()

    def writer(worker: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"cm-{worker}-{i}"
            if _create(first, name):
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
