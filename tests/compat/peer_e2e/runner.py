"""Run the peer clients' own e2e test files against a running ``setpoint serve``.

Four clients, each with its own test files, unchanged: the kubernetes and kubernetes_asyncio
clients' ``e2e_test`` packages and lightkube's ``e2e-tests`` (vendored under ``vendor/``, see
its README: the wheels do not ship them), and kr8s' ``tests`` (shipped in the installed
package, run from there). Each client's files run in a pytest process of their own, with the
admin kubeconfig as ``KUBECONFIG`` and the plugin of ``shims/``; the result is a map from test
id to ``{"outcome", "message"}``.

``python -m tests.compat.peer_e2e.runner`` starts a server, runs every client and prints the
table of docs/compatibility.md; ``--json FILE`` also writes the raw results.

Non-guarantees: the clients' tests share one server and run one after another; a test of theirs
that hangs is stopped by pytest-timeout after ``PER_TEST_TIMEOUT`` seconds and counted failed;
one that even pytest-timeout cannot stop ends the client's run after ``PER_CLIENT_TIMEOUT``
seconds, and the tests not finished by then are missing from the results.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
VENDOR = HERE / "vendor"
SHIMS = HERE / "shims"

#: seconds one of the clients' tests may take before pytest-timeout fails it
PER_TEST_TIMEOUT = 90
#: seconds one client's whole run may take
PER_CLIENT_TIMEOUT = 1800


def _installed(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(package)
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class Client:
    """One client's e2e files: where they are and what their harness needs."""

    name: str
    #: the test files, relative to ``root``
    files: tuple[str, ...]
    #: vendored (under vendor/<name>) or installed with the package
    vendored: bool
    #: "package=directory" entries that make the vendored package importable under its name
    package_path: str = ""
    #: extra pytest options the client's own configuration sets
    options: tuple[str, ...] = ()

    @property
    def root(self) -> Path:
        if self.vendored:
            return VENDOR / self.name
        return _installed(self.name)

    def package_paths(self) -> str:
        if not self.package_path:
            return ""
        package, _, directory = self.package_path.partition("=")
        return f"{package}={self.root / directory}"


CLIENTS: dict[str, Client] = {c.name: c for c in (
    Client("kubernetes", tuple(f"kubernetes/e2e_test/test_{n}.py" for n in
                               ("client", "apps", "batch", "utils", "watch", "informer")),
           vendored=True, package_path="kubernetes=kubernetes"),
    Client("kubernetes_asyncio", tuple(
        f"kubernetes_asyncio/e2e_test/test_{n}.py" for n in
        ("client", "api", "batch", "apply_patch", "dynamic_client")),
        vendored=True, package_path="kubernetes_asyncio=kubernetes_asyncio"),
    Client("lightkube", ("e2e-tests/test_client.py",), vendored=True),
    # kr8s' pyproject: xfail_strict, asyncio_mode auto
    Client("kr8s", ("tests/test_api.py", "tests/test_objects.py"), vendored=False,
           options=("-o", "xfail_strict=true")),
)}


def run_client(client: Client, kubeconfig: Path, *, workdir: Path) -> dict[str, dict[str, str]]:
    """Run ``client``'s files against the server of ``kubeconfig``; test id → outcome."""
    results = workdir / f"{client.name}.json"
    inifile = workdir / f"{client.name}.ini"
    inifile.write_text("[pytest]\nasyncio_mode = auto\n"
                       "asyncio_default_fixture_loop_scope = function\n")
    env = dict(os.environ)
    env.update(KUBECONFIG=str(kubeconfig), PEER_E2E_RESULTS=str(results),
               PEER_E2E_PACKAGE_PATHS=client.package_paths(), PYTHONDONTWRITEBYTECODE="1",
               HOME=str(workdir))
    # absolute: the run's working directory is the client's (a relative "." would be it)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIMS), *(
        os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    root = client.root
    # in the client's directory, as their own CI runs them (kubernetes' test_utils opens its
    # YAML by a relative path); -P keeps that directory off sys.path (kr8s/asyncio would
    # shadow asyncio)
    command = [sys.executable, "-P", "-m", "pytest", "-c", str(inifile), "--rootdir", str(root),
               "--confcutdir", str(root), "-p", "peer_e2e_plugin", "-p", "no:cacheprovider",
               "--import-mode=importlib", f"--timeout={PER_TEST_TIMEOUT}", "-q",
               "-W", "ignore", *client.options, *(str(root / f) for f in client.files)]
    with (workdir / f"{client.name}.log").open("w") as log:
        try:
            subprocess.run(command, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                           timeout=PER_CLIENT_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            # a test that pytest-timeout could not stop (its signal can land in an asyncio
            # callback, which swallows it): the tests finished so far still count
            log.write(f"\nstopped after {PER_CLIENT_TIMEOUT} s\n")
    if not results.exists():
        raise RuntimeError(f"{client.name}: no results, see {workdir / client.name}.log")
    loaded: dict[str, dict[str, str]] = json.loads(results.read_text())
    return {f"{client.name}::{test}": outcome for test, outcome in loaded.items()}


def table(results: dict[str, dict[str, str]]) -> str:
    """The Markdown of docs/compatibility.md's tables: per client and file, the counts."""
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for test, result in results.items():
        client, file = test.split("::")[:2]
        row = counts.setdefault((client, file), {})
        row[result["outcome"]] = row.get(result["outcome"], 0) + 1
    lines = ["| client | file | passed | failed | skipped/xfail |", "|---|---|---|---|---|"]
    for (client, file), row in sorted(counts.items()):
        failed = row.get("failed", 0) + row.get("error", 0) + row.get("xpassed", 0)
        lines.append(f"| {client} | {file} | {row.get('passed', 0)} | {failed} | "
                     f"{row.get('skipped', 0) + row.get('xfailed', 0)} |")
    lines.append("")
    lines.append("| test | outcome | message |")
    lines.append("|---|---|---|")
    for test, result in sorted(results.items()):
        if result["outcome"] != "passed":
            message = result["message"].replace("|", "\\|")[:200]
            lines.append(f"| `{test}` | {result['outcome']} | {message} |")
    return "\n".join(lines)


def node_ready(kubeconfig: Path, *, timeout: float = 120) -> None:
    """Wait until a Node of the server reports Ready, as the clients' own harnesses (kind,
    k3s) wait for their cluster before the tests start."""
    from setpoint.testing.waiting import eventually_blocking

    def ready() -> bool:
        nodes = json.loads(subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "json"],
            capture_output=True, text=True, timeout=30, check=True).stdout)["items"]
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for n in nodes for c in n.get("status", {}).get("conditions", []))

    eventually_blocking(ready, timeout=timeout, interval=0.5)


def main() -> None:
    from tests.conftest import start_serve

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path)
    parser.add_argument("clients", nargs="*", default=list(CLIENTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="peer-e2e-") as tmp:
        serve = start_serve(Path(tmp) / "serve")
        try:
            node_ready(serve.kubeconfig)
            results: dict[str, dict[str, str]] = {}
            for name in args.clients:
                results.update(run_client(CLIENTS[name], serve.kubeconfig, workdir=Path(tmp)))
        finally:
            serve.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True))
    print(table(results))


if __name__ == "__main__":
    main()
