"""The ``setpoint serve`` process: start, graceful stop on SIGTERM with a watch open."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.conftest import start_serve


def test_starts_and_stops_gracefully_with_open_watch(tmp_path: Path) -> None:
    serve = start_serve(tmp_path / "data", storage="sqlite")
    # a namespace nobody writes to: default holds the kube-root-ca.crt ConfigMap
    watch = serve.urlopen("/api/v1/namespaces/kube-public/configmaps?watch=true&"
                          "fieldSelector=metadata.name%21%3Dkube-root-ca.crt")
    try:
        assert watch.status == 200
        # stop() waits at most 15 s before it kills: a 0 is a graceful stop within that
        code = serve.stop(signal.SIGTERM)
        assert code == 0, serve.log.read_text()
        # the open watch ended cleanly (initial events, then end of stream)
        body = watch.read()
        assert body.count(b'"type":"ADDED"') == 0
    finally:
        watch.close()
    assert (tmp_path / "data" / "kubeconfig").exists()
    assert (tmp_path / "data" / "state.db").exists()
