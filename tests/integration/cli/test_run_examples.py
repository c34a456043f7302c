"""The website and queue-operator examples, each run by ``setpoint run`` against
``setpoint serve``.

(The book example has its own test in test_run.py, with health, metrics and leader election;
the watertank and bitcoinnetwork examples, whose operators run pods, theirs in
tests/compat/kubectl/test_example_operators.py, against a server whose agent runs them.)
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from setpoint.client import Client, load_kubeconfig
from setpoint.testing.waiting import eventually
from tests.conftest import ServeProcess
from tests.integration.cli.test_run import EXAMPLES, ROOT, eventually_get, install

WEBSITE = ("web.example.com/v1", "Website")
QUEUE = ("messaging.example.com/v1", "Queue")
CONFIGMAP = ("v1", "ConfigMap")


@asynccontextmanager
async def operator(example: str, serve: ServeProcess, log: Path,
                   env: dict[str, str] | None = None,
                   extra: tuple[str, ...] = ()) -> AsyncIterator[None]:
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "setpoint", "run", f"examples/{example}/operator.py",
            "--kubeconfig", str(serve.kubeconfig), *extra, cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        yield
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            code = await process.wait()
    output = await asyncio.to_thread(log.read_text)
    assert code == 0, output
    assert "Traceback" not in output


async def test_website_page_comes_back_after_deletion(serve_factory: Any,
                                                      tmp_path: Path) -> None:
    serve: ServeProcess = serve_factory()
    async with Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "website" / "crd.yaml")
        async with operator("website", serve, tmp_path / "run.log"):
            await install(client, EXAMPLES / "website" / "website.yaml")
            page = await eventually_get(
                client, CONFIGMAP, "hello-site",
                lambda cm: "<h1>Hello, setpoint</h1>" in (cm.get("data") or {}).get(
                    "index.html", ""))
            owner = page["metadata"]["ownerReferences"][0]
            assert (owner["kind"], owner["name"], owner["controller"]) == (
                "Website", "hello", True)
            await client.delete(CONFIGMAP, "hello-site")
            back = await eventually_get(client, CONFIGMAP, "hello-site",
                                        lambda cm: cm["metadata"]["uid"] !=
                                        page["metadata"]["uid"], timeout=10)
            assert "<h1>Hello, setpoint</h1>" in back["data"]["index.html"]
            await client.patch(WEBSITE, "hello", {"spec": {"title": "Renamed"}})
            await eventually_get(client, CONFIGMAP, "hello-site",
                                 lambda cm: "<h1>Renamed</h1>" in cm["data"]["index.html"])


def _fake_queue_service() -> Any:
    spec = importlib.util.spec_from_file_location(
        "run_examples_fakequeues", EXAMPLES / "queue-operator" / "fakequeues.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FakeQueueService()


async def test_queue_operator_keeps_its_queues_in_the_fake_service(
        serve_factory: Any, tmp_path: Path) -> None:
    serve: ServeProcess = serve_factory()
    service = _fake_queue_service()
    async with service, Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "queue-operator" / "crd.yaml")
        env = {"QUEUE_SERVICE_URL": service.url, "QUEUE_POLL_SECONDS": "0.5",
               "QUEUE_BUDGET_RATE": "20", "QUEUE_BUDGET_BURST": "5"}
        async with operator("queue-operator", serve, tmp_path / "run.log", env):
            await install(client, EXAMPLES / "queue-operator" / "queues.yaml")
            created = await eventually_get(client, QUEUE, "orders",
                                           lambda q: "url" in (q.get("status") or {}))
            assert created["status"]["url"] == f"{service.url}/queues/default-orders"
            assert service.queues["default-orders"] == {"visibilityTimeout": 60}
            assert service.delete_out_of_band("default-orders")  # behind its back
            await eventually(lambda: "default-orders" in service.queues,
                             what="the queue deleted out of band is back")
            await client.delete(QUEUE, "orders")  # the finalizer deletes the queue
            await eventually(lambda: not service.queues and any(
                c.method == "DELETE" for c in service.calls),
                what="the finalizer deleted the queue")
            assert service.max_in_window <= 20 + 5


async def test_two_sharded_replicas_split_the_website_keys(serve_factory: Any,
                                                           tmp_path: Path) -> None:
    serve: ServeProcess = serve_factory()
    shard = ("--shard-group", "websites", "--shards", "16")  # all to one: 2 in 65,536
    async with Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "website" / "crd.yaml")
        async with operator("website", serve, tmp_path / "a.log", extra=shard), \
                operator("website", serve, tmp_path / "b.log", extra=shard):
            for i in range(8):
                await client.create({"apiVersion": "web.example.com/v1", "kind": "Website",
                                     "metadata": {"name": f"site{i}", "namespace": "default"},
                                     "spec": {"title": f"Site {i}"}})

            async def holders() -> set[str] | None:
                leases = await client.list(("coordination.k8s.io/v1", "Lease"),
                                           namespace="default")
                found = {item["spec"].get("holderIdentity") for item in leases["items"]
                         if item["metadata"]["name"].startswith("websites-shard-")}
                return found if len(found - {"", None}) == 2 else None

            # both replicas hold shards (rendezvous hashing gives each a part of them)
            await eventually(holders, what="both replicas hold shards")
            for i in range(8):
                await eventually_get(client, CONFIGMAP, f"site{i}-site",
                                     lambda cm: "<h1>Site" in (cm.get("data") or {}).get(
                                         "index.html", ""), timeout=30)
