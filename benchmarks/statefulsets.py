"""Measure a StatefulSet end to end: API server, scheduler, StatefulSet controller and a
simulated node.

A control plane in this process (memory storage, TLS and RBAC as ``setpoint serve``), its
node agent with the simulated runtime (pods Running and Ready at once), and:

* a StatefulSet of ``--replicas`` pods, ``OrderedReady``: creation to every pod Ready (each
  pod waits for the previous one, so this is a chain of ``--replicas`` round trips);
* the same, ``Parallel``;
* a rolling update of the OrderedReady one (a new image), to ``currentRevision ==
  updateRevision`` with every pod Ready;
* **baseline, same run**: ``--replicas`` pods created by this script one at a time, each
  waited for until Ready before the next (the floor an ordered start can reach), so the
  controller's own cost shows as the difference.

    python benchmarks/statefulsets.py [--replicas 30]
"""

from __future__ import annotations

import argparse
import asyncio
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
from setpoint.testing import eventually  # noqa: E402

POD = ("v1", "Pod")
STS = ("apps/v1", "StatefulSet")
ANNOTATIONS = {"simulate.setpoint.dev/start-after": "0",
               "simulate.setpoint.dev/ready-after": "0"}


def statefulset(name: str, replicas: int, policy: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name},
                                               "annotations": ANNOTATIONS},
                                  "spec": {"terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "c", "image": "v1"}]}}}}


async def settled(client: Client, name: str, replicas: int) -> None:
    async def done() -> bool:
        status = (await client.get(STS, name, namespace="default")).get("status", {})
        return status.get("readyReplicas") == replicas and \
            status.get("updatedReplicas") == replicas and \
            status.get("currentRevision") == status.get("updateRevision")
    await eventually(done, timeout=900, interval=0.05)


async def timed_start(client: Client, name: str, replicas: int, policy: str) -> float:
    start = time.perf_counter()
    await client.create(statefulset(name, replicas, policy))
    await settled(client, name, replicas)
    return time.perf_counter() - start


async def timed_update(client: Client, name: str, replicas: int) -> float:
    start = time.perf_counter()
    await client.patch(STS, name, {"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "v2"}]}}}}, namespace="default")

    async def moved() -> bool:
        sts = await client.get(STS, name, namespace="default")
        return sts.get("status", {}).get("observedGeneration") == 2
    await eventually(moved, timeout=60, interval=0.05)
    await settled(client, name, replicas)
    return time.perf_counter() - start


async def by_hand(client: Client, count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        await client.create({"apiVersion": "v1", "kind": "Pod",
                             "metadata": {"name": f"hand-{i}", "annotations": ANNOTATIONS},
                             "spec": {"terminationGracePeriodSeconds": 0,
                                      "containers": [{"name": "c", "image": "v1"}]}},
                            namespace="default")

        async def ready(name: str = f"hand-{i}") -> bool:
            pod = await client.get(POD, name, namespace="default")
            status = pod.get("status", {})
            return status.get("phase") == "Running" and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in status.get("conditions", []))
        await eventually(ready, timeout=120, interval=0.05)
    return time.perf_counter() - start


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kubeconfig = root / "kubeconfig"
        config = ControlPlaneConfig(
            server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                                kubeconfig_path=kubeconfig,
                                security=SecurityConfig(pki_dir=root / "pki")),
            controllers=frozenset({"statefulset", "scheduler", "serviceaccount",
                                   "garbagecollector"}),
            agent=ServeAgentConfig(node_name="bench", root_dir=root / "agent",
                                   pod_runtime="simulate"),
            controllers_mode="inline")
        async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as client:
            async def ready() -> bool:
                nodes = await client.list(("v1", "Node"))
                accounts = await client.list(("v1", "ServiceAccount"), namespace="default")
                return bool(nodes["items"]) and bool(accounts["items"])
            await eventually(ready, timeout=60)
            n = args.replicas
            baseline = await by_hand(client, n)
            ordered = await timed_start(client, "ordered", n, "OrderedReady")
            parallel = await timed_start(client, "parallel", n, "Parallel")
            update = await timed_update(client, "ordered", n)
    print(f"{'what':52} {'seconds':>8} {'pods/s':>8}")
    for what, seconds in (
            ("baseline: pods created one by one, each awaited Ready", baseline),
            ("StatefulSet OrderedReady, creation to all Ready", ordered),
            ("StatefulSet Parallel, creation to all Ready", parallel),
            ("rolling update of the OrderedReady one", update)):
        print(f"{what:52} {seconds:8.2f} {n / seconds:8.1f}")
    print(f"({n} replicas each)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=30)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
