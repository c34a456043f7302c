"""A watch client that vanishes without closing its connection is found by the server: by
TCP keep-alive when the watch is quiet, by the user timeout when the watch is writing to it.

Each scenario runs ``deadpeer.py`` in a network namespace of its own, where the loopback is
this test's alone and can be made to drop every packet (no acknowledgement, FIN or reset
reaches the server: the peer is dead, not closed). What is checked is what the server saw:
its side of the connection lost with ``ETIMEDOUT`` (only the kernel giving up on the peer
reports that), the watch's watcher released, the connection gone from the guard and counted
as ``dead_peer`` in the metrics. Each scenario leaves the other mechanism too long to matter
(see ``deadpeer.LIMITS``), so each proves its own.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import setpoint
from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.integration.api import rawhttp

ROOT = Path(__file__).resolve().parents[3]
SRC = Path(setpoint.__file__).resolve().parents[1]

#: ways to get a network namespace: as root, or as a user allowed user namespaces
NAMESPACES = (("unshare", "--net"), ("unshare", "--user", "--map-root-user", "--net"))


def namespace_prefix() -> tuple[str, ...] | None:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return None
    for prefix in NAMESPACES:
        done = subprocess.run([*prefix, "true"], capture_output=True, check=False)
        if done.returncode == 0:
            return prefix
    return None


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("mode", ["quiet", "busy"])
def test_a_vanished_watch_client_is_found_and_its_watch_ended(mode: str, loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    prefix = namespace_prefix()
    if prefix is None:
        pytest.skip("no network namespace can be made here")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    done = subprocess.run([*prefix, sys.executable, "-m", "tests.integration.api.deadpeer",
                           mode, loop], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=100, check=False)
    if done.returncode == 77:
        pytest.skip(f"cannot make a dead peer here: {done.stdout.strip()}")
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"errno": errno.ETIMEDOUT, "error": "TimeoutError",
                      "watchers_released": True, "open_connections": 0,
                      "dead_peer_closes": 1.0}


async def test_a_watch_whose_connection_is_closed_releases_its_watcher_at_once(
        server: Server) -> None:
    """The watch ends when its connection is lost, not at its next event or its timeout:
    nothing is ever written to this watch after its client goes."""
    cache = server.cache
    assert cache is not None
    watchers = cache.watcher_count()
    conn = await rawhttp.Connection.open(server.url)
    try:
        await conn.send_head("GET", "/api/v1/namespaces/default/configmaps?watch=true", {})
        assert (await conn.reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        await waiting.eventually(lambda: cache.watcher_count() == watchers + 1,
                                 what="the watch to be registered")
    finally:
        await conn.close()
    await waiting.eventually(lambda: cache.watcher_count() == watchers,
                             what="the watch's watcher to be released")
