"""The data directory of ``setpoint serve``: one server at a time, and a database file that
disappears or is replaced under a running server stops it acknowledging writes."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from setpoint.cli.main import EXIT_DATA_DIR_IN_USE
from tests.conftest import ServeProcess, start_serve


def call(serve: ServeProcess, path: str, method: str = "GET", body: Any = None
         ) -> tuple[int, bytes]:
    """One request to ``serve`` as its admin."""
    data = json.dumps(body).encode() if body is not None else None
    try:
        with serve.urlopen(path, data=data, method=method,
                           headers={"Content-Type": "application/json"}) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"k": name}}


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def test_a_second_server_on_the_same_data_directory_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = start_serve(data, storage="sqlite")
    try:
        kubeconfig = first.kubeconfig.read_bytes()
        second = subprocess.run(
            [sys.executable, "-m", "setpoint", "serve", "--port", "0", "--data-dir", str(data)],
            capture_output=True, timeout=60, check=False)
        assert second.returncode == EXIT_DATA_DIR_IN_USE, second.stderr.decode()
        assert (f"setpoint serve: error: data directory {data.resolve()} is in use by another "
                f"setpoint serve (pid {first.process.pid})") in second.stderr.decode()
        # the first one's kubeconfig is untouched and it goes on serving
        assert first.kubeconfig.read_bytes() == kubeconfig
        assert call(first, "/readyz")[0] == 200
        assert call(first, CONFIGMAPS, "POST", configmap("kept"))[0] == 201
    finally:
        assert first.stop() == 0
    # once it stopped, the next server takes the directory and its data
    third = start_serve(data, storage="sqlite")
    try:
        status, body = call(third, CONFIGMAPS + "/kept")
        assert status == 200, body
    finally:
        third.stop()


def _replace(file: Path) -> None:
    copy = file.with_name(file.name + ".copy")
    copy.write_bytes(file.read_bytes())
    copy.replace(file)


@pytest.mark.parametrize("change", [Path.unlink, _replace], ids=["deleted", "replaced"])
def test_a_database_file_gone_under_the_server_stops_acknowledging_writes(
        tmp_path: Path, change: Callable[[Path], None]) -> None:
    data = tmp_path / "data"
    serve = start_serve(data, storage="sqlite")
    try:
        assert call(serve, CONFIGMAPS, "POST", configmap("before"))[0] == 201
        change(data / "state.db")
        status, body = call(serve, CONFIGMAPS, "POST", configmap("after"))
        assert status == 503, body
        refused = json.loads(body)
        assert refused["kind"] == "Status"
        assert refused["reason"] == "ServiceUnavailable"
        assert f"the database file {data.resolve() / 'state.db'} was " in refused["message"]
        assert "writes are refused" in refused["message"]
        status, text = call(serve, "/readyz")
        assert status == 503
        assert b"[-]storage-readiness failed: reason withheld\n" in text
        status, text = call(serve, "/readyz/storage-readiness")
        assert status == 503
        assert text.startswith(b"internal server error: the database file")
        assert call(serve, "/livez")[0] == 200  # alive, but not to be sent writes
    finally:
        serve.stop()
