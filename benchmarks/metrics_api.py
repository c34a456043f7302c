"""``kubectl top pod -A`` at scale: PodMetrics lists against plain pod lists, same run.

An in-process secured control plane whose node agent runs ``--pods`` simulated pods (default
1,000; two containers each). Once every pod is measured, the benchmark times, ``--rounds``
times each (default 20):

* **baseline**: ``GET /api/v1/pods`` (every pod, from the watch cache);
* **metrics, fresh**: ``GET /apis/metrics.k8s.io/v1beta1/pods`` after the last scrape aged
  past ``fresh_for`` — the server scrapes the agent's ``/metrics/resource`` (the agent
  measures every pod, renders the text, the server parses it and computes the rates);
* **metrics, shared**: the same list again at once (the scrape is reused).

Printed: p50 / max per kind, and the size of one scrape.

    python benchmarks/metrics_api.py [--pods 1000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.client import Client, load_kubeconfig  # noqa: E402
from setpoint.controlplane import (  # noqa: E402
    ControlPlane,
    ControlPlaneConfig,
    ServeAgentConfig,
)
from setpoint.server.securing import SecurityConfig  # noqa: E402
from setpoint.server.server import ServerConfig  # noqa: E402
from setpoint.storage import StorageConfig  # noqa: E402

FRESH_FOR = 0.5


def pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:05d}", "annotations": {
                "simulate.setpoint.dev/start-after": "0",
                "simulate.setpoint.dev/ready-after": "0"}},
            "spec": {"nodeName": "bench", "containers": [{"name": "a", "image": "x"},
                                                          {"name": "b", "image": "x"}]}}


async def timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await call
    return time.perf_counter() - started, result


async def main(pods: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        kubeconfig = directory / "kubeconfig"
        config = ControlPlaneConfig(
            server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                                kubeconfig_path=kubeconfig,
                                security=SecurityConfig(pki_dir=directory / "pki")),
            controllers=frozenset({"serviceaccount"}),
            agent=ServeAgentConfig(node_name="bench", root_dir=directory / "agent",
                                   pod_runtime="simulate"),
            controllers_mode="inline")
        async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as client:
            sem = asyncio.Semaphore(16)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(pod(i))

            await asyncio.gather(*(create(i) for i in range(pods)))
            path = "/apis/metrics.k8s.io/v1beta1/pods"
            deadline = time.monotonic() + 600
            while True:
                listed = await client.request("GET", path)
                if len(listed["items"]) >= pods or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1)
            print(f"{len(listed['items'])} of {pods} simulated pods measured")
            base, fresh, shared = [], [], []
            for _ in range(rounds):
                await asyncio.sleep(FRESH_FOR + 0.05)
                seconds, _ = await timed(client.request("GET", "/api/v1/pods"))
                base.append(seconds)
                seconds, _ = await timed(client.request("GET", path))
                fresh.append(seconds)
                seconds, _ = await timed(client.request("GET", path))
                shared.append(seconds)
            print(f"{'what':<40} {'p50 ms':>8} {'max ms':>8}")
            for name, values in (("GET /api/v1/pods (baseline)", base),
                                 ("PodMetrics list, fresh scrape", fresh),
                                 ("PodMetrics list, shared scrape", shared)):
                print(f"{name:<40} {statistics.median(values) * 1000:8.1f} "
                      f"{max(values) * 1000:8.1f}")
            lines = sum(len(p["containers"]) for p in listed["items"]) * 3
            print(f"one scrape: about {lines} series")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.pods, args.rounds))
