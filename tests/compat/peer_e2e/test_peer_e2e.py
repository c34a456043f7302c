"""The peer clients' own e2e test files against ``setpoint serve``: what passed stays passing.

``expected_pass/<client>.txt`` lists the tests of each client's files that pass against
setpoint (docs/compatibility.md has the table and why each of the others fails). A test listed
there that fails here is a regression, in setpoint or in the client. A test that passes and is
not listed is reported, not failed: the list is updated by hand, with the doc.

kubernetes_asyncio's files take seconds: they run with the ``e2e`` tests (``make test`` runs
them last). The other clients' take minutes each (their own waits, 90 s at a time, for pods of
images a process runtime cannot run), so they are marked ``peers`` and run only when asked for:
``pytest -m peers tests/compat/peer_e2e``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat.peer_e2e.runner import CLIENTS, PER_CLIENT_TIMEOUT, node_ready, run_client
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.slow, pytest.mark.compat]

#: the clients whose files run in minutes, not seconds
LONG = {"kubernetes", "lightkube", "kr8s"}

EXPECTED = Path(__file__).parent / "expected_pass"


def expected(client: str) -> list[str]:
    lines = (EXPECTED / f"{client}.txt").read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = start_serve(tmp_path_factory.mktemp("serve"))
    try:
        node_ready(proc.kubeconfig)
        yield proc
    finally:
        proc.stop(leave_pods=False)


@pytest.mark.parametrize("client", [
    pytest.param(c, marks=[pytest.mark.peers, pytest.mark.timeout(PER_CLIENT_TIMEOUT + 120)])
    if c in LONG else pytest.param(c, marks=[pytest.mark.e2e, pytest.mark.timeout(600)])
    for c in sorted(CLIENTS)])
def test_what_passed_still_passes(client: str, serve: ServeProcess,
                                  tmp_path: Path) -> None:
    pytest.importorskip(client)
    want = expected(client)
    assert want, f"expected_pass/{client}.txt lists no test"
    results = run_client(CLIENTS[client], serve.kubeconfig, workdir=tmp_path)
    passed = {test for test, r in results.items() if r["outcome"] == "passed"}
    print(json.dumps({"client": client, "tests": len(results), "passed": len(passed),
                      "newly passing": sorted(passed - set(want))}, indent=1))
    regressions = {test: results.get(test, {"outcome": "not run", "message": ""})
                   for test in want if test not in passed}
    assert not regressions, json.dumps(regressions, indent=1)
