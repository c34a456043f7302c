"""An operator's process does not import what it does not use: the runtime and client
import no aiohttp (the lean HTTP/1.1 client carries requests and watches; aiohttp is for
proxies, injected sessions and the probe endpoints)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, sys
import setpoint.client, setpoint.runtime
print(json.dumps(sorted(m for m in sys.modules if m == "aiohttp" or m.startswith("aiohttp."))))
"""


def test_importing_the_runtime_and_client_imports_no_aiohttp() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=True)
    assert json.loads(done.stdout) == []
