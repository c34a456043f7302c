"""Measure a Job end to end: API server, scheduler, Job controller and a simulated node.

A control plane in this process (memory storage, TLS and RBAC as ``setpoint serve``), its
node agent with the simulated runtime (each pod starts, becomes Ready and exits 0 after
``--run`` seconds), and one Job of ``--completions`` completions at ``--parallelism``:

* time from the Job's creation to its ``Complete`` condition, and completed pods per second;
* **baseline, same run**: the same number of pods created directly through the API by this
  script (no Job controller), ``--parallelism`` at a time, each waited for until it
  Succeeded (pods/s), so the Job controller's own cost shows as the difference;
* the pods the Job created (exactly ``--completions``: none twice).

    python benchmarks/jobs.py [--completions 200] [--parallelism 20] [--run 0.2]
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
from setpoint.controllers import JobConfig, Settings  # noqa: E402
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
JOB = ("batch/v1", "Job")


def annotations(run: float) -> dict[str, str]:
    return {"simulate.setpoint.dev/start-after": "0", "simulate.setpoint.dev/ready-after": "0",
            "simulate.setpoint.dev/exit-after": str(run),
            "simulate.setpoint.dev/exit-code": "0"}


def template(run: float) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations(run)},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "sim"}]}}


async def by_job(client: Client, completions: int, parallelism: int, run: float
                 ) -> tuple[float, int]:
    start = time.perf_counter()
    await client.create({"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": "bench"},
                         "spec": {"completions": completions, "parallelism": parallelism,
                                  "template": template(run)}})

    async def complete() -> bool:
        job = await client.get(JOB, "bench", namespace="default")
        return any(c["type"] == "Complete" and c["status"] == "True"
                   for c in job.get("status", {}).get("conditions", []))
    await eventually(complete, timeout=600, interval=0.1)
    elapsed = time.perf_counter() - start
    pods = await client.list(POD, namespace="default",
                             label_selector="batch.kubernetes.io/job-name=bench")
    return elapsed, len(pods["items"])


async def by_hand(client: Client, count: int, parallelism: int, run: float) -> float:
    start = time.perf_counter()
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"hand-{i}", "annotations": annotations(run)},
                    "spec": template(run)["spec"]}
            await client.create(body, namespace="default")

            async def done(name: str = f"hand-{i}") -> bool:
                pod = await client.get(POD, name, namespace="default")
                return pod.get("status", {}).get("phase") == "Succeeded"
            await eventually(done, timeout=600, interval=0.05)
    async with asyncio.TaskGroup() as tasks:
        for _ in range(parallelism):
            tasks.create_task(worker())
    return time.perf_counter() - start


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        kubeconfig = root / "kubeconfig"
        config = ControlPlaneConfig(
            server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                                kubeconfig_path=kubeconfig,
                                security=SecurityConfig(pki_dir=root / "pki")),
            controllers=frozenset({"job", "scheduler", "serviceaccount", "garbagecollector"}),
            controller_settings=Settings(job=JobConfig()),
            agent=ServeAgentConfig(node_name="bench", root_dir=root / "agent",
                                   pod_runtime="simulate"),
            controllers_mode="inline")
        async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as client:
            async def ready() -> bool:
                nodes = await client.list(("v1", "Node"))
                accounts = await client.list(("v1", "ServiceAccount"), namespace="default")
                return bool(nodes["items"]) and bool(accounts["items"])
            await eventually(ready, timeout=60)
            elapsed, pods = await by_job(client, args.completions, args.parallelism, args.run)
            baseline = await by_hand(client, args.completions, args.parallelism, args.run)
    print(f"{'what':44} {'seconds':>8} {'pods/s':>8}")
    print(f"{'Job, creation to Complete':44} {elapsed:8.2f} {args.completions / elapsed:8.1f}")
    print(f"{'baseline: pods created and awaited by hand':44} {baseline:8.2f} "
          f"{args.completions / baseline:8.1f}")
    print(f"pods the Job created: {pods} for {args.completions} completions "
          f"(parallelism {args.parallelism}, each running {args.run} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--completions", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=20)
    parser.add_argument("--run", type=float, default=0.2)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
