"""The ``setpoint serve`` process: quick start, graceful stop on SIGTERM with a watch open."""

from __future__ import annotations

import signal
import time
import urllib.request
from pathlib import Path

from tests.conftest import start_serve


def test_starts_quickly_and_stops_gracefully_with_open_watch(tmp_path: Path) -> None:
    started = time.monotonic()
    serve = start_serve(tmp_path / "data", storage="sqlite")
    ready_after = time.monotonic() - started
    # includes the interpreter's start; the server itself is ready well before
    assert ready_after < 5.0
    watch = urllib.request.urlopen(
        serve.url + "/api/v1/namespaces/default/configmaps?watch=true", timeout=10)
    try:
        assert watch.status == 200
        stopped = time.monotonic()
        code = serve.stop(signal.SIGTERM)
        assert code == 0, serve.log.read_text()
        assert time.monotonic() - stopped < 5.0
        # the open watch ended cleanly (initial events, then end of stream)
        body = watch.read()
        assert body.count(b'"type":"ADDED"') == 0
    finally:
        watch.close()
    assert (tmp_path / "data" / "kubeconfig").exists()
    assert (tmp_path / "data" / "state.db").exists()
