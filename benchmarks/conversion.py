"""What conversion costs, through the store's conversion seam, in one in-process server
(memory storage, no HTTP between client and store), same run, printed side by side.

One CRD served as v1 and v2 (v2 stored) with conversion ``None``, and the same CRD under
another group with a conversion webhook (a local HTTPS server in a thread of this process,
``tests.webhookserver``, converting ``spec.size: "3"`` <-> ``spec.replicas: 3``). N objects
of each are created in v2 (the storage version: no conversion), then:

* list all N in v2 (nothing converted) and in v1 (None: apiVersion rewritten; webhook: one
  review per 500 objects), best and median of R runs, CPU time of this process and wall time;
* get one object in v1, R times (webhook: one review each);
* W watchers of v1 and U updates: reviews the webhook received (shared conversion: one per
  event, whatever W) and the wall time until every watcher had every event.

The webhook server shares this process (and its GIL): its work is in the numbers, as a
webhook on the same machine would be.

    python benchmarks/conversion.py [--n 2000] [--runs 10] [--watchers 50] [--updates 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.webhookserver import WebhookServer, conversion_answer, webhook_server  # noqa: E402

from setpoint.registry.options import ListOptions, WatchOptions, WriteOptions  # noqa: E402
from setpoint.registry.store import Store  # noqa: E402
from setpoint.server.server import Server, ServerConfig  # noqa: E402
from setpoint.storage import StorageConfig  # noqa: E402


def crd(group: str, conversion: dict[str, Any]) -> dict[str, Any]:
    def version(name: str, storage: bool, field: str, type_: str) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": {field: {"type": type_}}}}}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gadgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "conversion": conversion,
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                     "versions": [version("v1", False, "size", "string"),
                                  version("v2", True, "replicas", "integer")]}}


async def install(server: Server, body: dict[str, Any]) -> Store:
    async with aiohttp.ClientSession(base_url=server.url) as http, http.post(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=body) as resp:
        assert resp.status == 201, await resp.text()
    group = body["spec"]["group"]
    assert server.catalog is not None
    for _ in range(500):
        if server.catalog.lookup(group, "v1", "gadgets") is not None:
            return server.catalog.store(group, "gadgets")
        await asyncio.sleep(0.01)
    raise RuntimeError("not served")


async def timed(runs: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """(best CPU ms, median CPU ms, median wall ms) of ``runs`` calls."""
    cpu, wall = [], []
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        await call()
        cpu.append((time.process_time() - c) * 1e3)
        wall.append((time.perf_counter() - w) * 1e3)
    return min(cpu), statistics.median(cpu), statistics.median(wall)


async def measure(store: Store, hook: WebhookServer | None, args: argparse.Namespace
                  ) -> dict[str, str]:
    group = store.info.group
    for i in range(args.n):
        await store.create("default", {"apiVersion": f"{group}/v2", "kind": "Gadget",
                                       "metadata": {"name": f"g{i}"},
                                       "spec": {"replicas": i}}, "v2", WriteOptions())
    out = {}
    for version in ("v2", "v1"):
        best, median, wall = await timed(args.runs, lambda v=version: store.list(  # type: ignore[misc]
            "default", v, ListOptions()))
        out[f"list {args.n} in {version} (CPU ms best / median; wall ms)"] = \
            f"{best:.1f} / {median:.1f}; {wall:.1f}"
    before = len(hook.received) if hook else 0
    best, median, wall = await timed(args.runs * 10, lambda: store.get("default", "g1", "v1"))
    out["get one in v1 (CPU ms best / median; wall ms)"] = \
        f"{best:.2f} / {median:.2f}; {wall:.2f}"
    out[f"  conversion reviews for {args.runs * 10} gets"] = \
        str(len(hook.received) - before) if hook else "-"
    before = len(hook.received) if hook else 0
    streams = [await store.watch("default", "v1", WatchOptions(
        resource_version=str(store.cache_revision))) for _ in range(args.watchers)]
    start = time.perf_counter()
    for i in range(args.updates):
        await store.patch("default", "g0", "application/merge-patch+json",
                          {"spec": {"replicas": 10_000 + i}}, "v2", WriteOptions())

    async def drain(stream: Any) -> None:
        for _ in range(args.updates):
            event = await stream.next_event(timeout=30)
            assert event is not None
            assert event.object["apiVersion"] == f"{group}/v1"
    await asyncio.gather(*(drain(s) for s in streams))
    elapsed = (time.perf_counter() - start) * 1e3
    for s in streams:
        s.close()
    out[f"{args.updates} updates to {args.watchers} v1 watchers (wall ms)"] = f"{elapsed:.0f}"
    out["  conversion reviews for them"] = \
        str(len(hook.received) - before) if hook else "-"
    return out


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp, webhook_server(
            {"/convert": conversion_answer}) as hook:
        config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                              kubeconfig_path=Path(tmp) / "kubeconfig")
        async with Server(config) as server:
            plain = await install(server, crd("none.example.com", {"strategy": "None"}))
            hooked = await install(server, crd("hook.example.com", {
                "strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": hook.url("/convert"),
                                     "caBundle": hook.ca_bundle}}}))
            rows_none = await measure(plain, None, args)
            rows_hook = await measure(hooked, hook, args)
    print(f"conversion benchmark: n={args.n} runs={args.runs} watchers={args.watchers} "
          f"updates={args.updates}")
    print(f"{'measure':58} {'None':>22} {'Webhook':>22}")
    for key in rows_none:
        print(f"{key:58} {rows_none[key]:>22} {rows_hook[key]:>22}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--watchers", type=int, default=50)
    parser.add_argument("--updates", type=int, default=50)
    asyncio.run(main(parser.parse_args()))
