"""What the OpenAPI documents cost with many CRDs: build once per change, then served as bytes.

Starts an in-process server (memory storage), creates N CRDs (default 200; each a realistic
schema of about 40 fields, in its own group), then measures, best of several rounds:

* **cold**: every fragment computed afresh (as after a restart), then ``/openapi/v2`` as JSON,
  as protobuf, the ``/openapi/v3`` index and one group-version document;
* **one CRD changed**: a label added to one CRD (the catalog serves a new store for it), then
  the same documents: only that CRD's fragments are rebuilt, the rest is merged and encoded;
* **cached**: a GET of ``/openapi/v2`` (protobuf) over HTTP when nothing changed, beside a GET
  of ``/version`` (the smallest answer the server has), same run;
* **responsiveness**: the server's own first ``/openapi/v2`` after the CRDs are created (a cold
  build, done in its worker thread), and the worst latency of ``/version`` requests sent
  meanwhile, beside the worst on the idle server.

Sizes of the documents are printed too.

    python benchmarks/openapi.py [--crds 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.schema import SCHEMA  # noqa: E402

from setpoint.apimachinery.clock import SystemClock  # noqa: E402
from setpoint.server.openapi import builtins, documents  # noqa: E402
from setpoint.server.server import Server, ServerConfig  # noqa: E402
from setpoint.storage import StorageConfig  # noqa: E402

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PROTO = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def crd(i: int) -> dict[str, Any]:
    group = f"bench{i}.example.com"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"things.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": SCHEMA}}]}}


def best(rounds: int, prepare: Callable[[], Any], run: Callable[[], Any]) -> float:
    times = []
    for _ in range(rounds):
        prepare()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


async def served(http: aiohttp.ClientSession, name: str) -> None:
    for _ in range(500):
        async with http.get(f"{CRDS}/{name}") as r:
            body = await r.json()
        conditions = (body.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{name} was not established")


async def main(n: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                              kubeconfig_path=Path(tmp) / "kubeconfig")
        async with Server(config) as server, \
                aiohttp.ClientSession(base_url=server.url) as http:
            for i in range(n):
                async with http.post(CRDS, data=orjson.dumps(crd(i)),
                                     headers={"Content-Type": "application/json"}) as r:
                    assert r.status == 201, await r.text()
            await served(http, f"things.bench{n - 1}.example.com")
            for i in range(n):
                await served(http, f"things.bench{i}.example.com")

            async def version_latencies(stop: asyncio.Event) -> list[float]:
                found = []
                while not stop.is_set():
                    start = time.perf_counter()
                    async with http.get("/version") as r:
                        await r.read()
                    found.append(time.perf_counter() - start)
                    await asyncio.sleep(0.001)
                return found

            # the server's own first /openapi/v2 after the CRDs: a cold build, in its thread
            stop = asyncio.Event()
            probe = asyncio.create_task(version_latencies(stop))
            await asyncio.sleep(0.2)
            start = time.perf_counter()
            async with http.get("/openapi/v2", headers={"Accept": PROTO}) as r:
                assert r.status == 200
                await r.read()
            first_build = time.perf_counter() - start
            await asyncio.sleep(0.2)
            stop.set()
            during = await probe
            idle_stop = asyncio.Event()
            idle_probe = asyncio.create_task(version_latencies(idle_stop))
            await asyncio.sleep(0.5)
            idle_stop.set()
            idle = await idle_probe
            # documents over the server's catalog, built by the code the server runs
            catalog = server.catalog
            assert catalog is not None
            docs = documents.Documents(catalog, builtins.Definitions.load(),
                                       clock=SystemClock(), version="v1.32.0")

            def everything() -> None:
                snap = docs.snapshot()
                docs.build_v2_json(snap)
                docs.build_v2_protobuf(snap)
                docs.build_v3_root(snap)
                docs.build_v3(snap, "bench0.example.com", "v1")

            def cold() -> None:
                docs.forget()  # as after a restart: every fragment computed again

            def timed(prepare: Callable[[], Any], run: Callable[[], Any]) -> float:
                return best(rounds, prepare, run)

            everything()
            snap = docs.snapshot()
            v3_doc = docs.build_v3(snap, "bench0.example.com", "v1")
            assert v3_doc is not None
            print(f"{n} CRDs; /openapi/v2 JSON {len(docs.build_v2_json(snap).body) / 1e6:.2f} "
                  f"MB, protobuf {len(docs.build_v2_protobuf(snap).body) / 1e6:.2f} MB, one v3 "
                  f"document {len(v3_doc.body) / 1e3:.0f} kB")
            rows = [
                ("cold (as after a restart): all of the below", timed(cold, everything)),
                ("  fragments of every resource (and the v3 index)", timed(
                    cold, lambda: docs.build_v3_root(docs.snapshot()))),
                ("  /openapi/v2 JSON, fragments ready", timed(
                    lambda: (cold(), docs.build_v3_root(docs.snapshot())),
                    lambda: docs.build_v2_json(docs.snapshot()))),
                ("  /openapi/v2 protobuf, JSON ready", timed(
                    lambda: (cold(), docs.build_v2_json(docs.snapshot())),
                    lambda: docs.build_v2_protobuf(docs.snapshot()))),
                ("  one v3 group-version document, fragments ready", timed(
                    lambda: (cold(), docs.build_v3_root(docs.snapshot())),
                    lambda: docs.build_v3(docs.snapshot(), "bench0.example.com", "v1"))),
            ]

            counter = [0]

            async def touch() -> None:
                counter[0] += 1
                patch = {"metadata": {"labels": {"round": str(counter[0])}}}
                before = catalog.generation
                async with http.patch(f"{CRDS}/things.bench0.example.com",
                                      data=orjson.dumps(patch), headers={
                                          "Content-Type": "application/merge-patch+json"}) as r:
                    assert r.status == 200, await r.text()
                for _ in range(500):
                    if catalog.generation != before:
                        return
                    await asyncio.sleep(0.005)
                raise RuntimeError("the catalog did not see the change")

            changed = []
            for _ in range(rounds):
                await touch()
                start = time.perf_counter()
                everything()
                changed.append(time.perf_counter() - start)
            rows.append(("one CRD changed: v2 JSON + protobuf, v3 index + 1 GV", min(changed)))

            async def get(path: str, accept: str, count: int = 200) -> float:
                start = time.perf_counter()
                for _ in range(count):
                    async with http.get(path, headers={"Accept": accept}) as r:
                        await r.read()
                return (time.perf_counter() - start) / count

            rows.append(("cached GET /openapi/v2 (protobuf) over HTTP",
                         await get("/openapi/v2", PROTO, 50)))
            rows.append(("GET /version over HTTP, same run", await get("/version", "*/*")))
            rows.append(("first GET /openapi/v2 of the server (cold build, worker thread)",
                         first_build))
            rows.append(("  meanwhile GET /version: worst", max(during)))
            rows.append(("  GET /version on the idle server: worst, same run", max(idle)))
            width = max(len(r[0]) for r in rows)
            for what, seconds in rows:
                print(f"{what:<{width}}  {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crds", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.crds, args.rounds))
