"""Three ``setpoint run --shard-group`` processes of the website example against ``setpoint
serve``: one killed with SIGKILL has its shards taken by the others a lease duration after
its last renewal and promptly then, one stopped with SIGTERM hands its shards over at once,
both as the Leases' own timestamps show; every Website still gets its page.

(The in-process tests in tests/integration/runtime/test_sharding.py also check, with a
recorder the replicas share, that no key is ever reconciled by two replicas at once.)
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from setpoint.client import Client, load_kubeconfig
from setpoint.runtime.sharding import rendezvous_owner
from setpoint.testing.waiting import eventually
from tests.conftest import ServeProcess
from tests.integration.cli.test_run import EXAMPLES, ROOT, eventually_get, install

WEBSITE = ("web.example.com/v1", "Website")
CONFIGMAP = ("v1", "ConfigMap")
LEASE = ("coordination.k8s.io/v1", "Lease")
SHARDS = 12

pytestmark = pytest.mark.slow


def micro_time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


async def record_leases(client: Client, history: list[tuple[str, dict[str, Any]]]) -> None:
    async with client.watch(LEASE, namespace="default") as events:
        async for event in events:
            if event.type in ("ADDED", "MODIFIED"):
                history.append((event.object["metadata"]["name"],
                                dict(event.object.get("spec") or {})))


def holders(history: list[tuple[str, dict[str, Any]]]) -> dict[int, str]:
    """Each shard's holder in its latest version seen."""
    found: dict[int, str] = {}
    for name, spec in history:
        if name.startswith("websites-shard-"):
            found[int(name.rsplit("-", 1)[1])] = spec.get("holderIdentity") or ""
    return found


def handover(history: list[tuple[str, dict[str, Any]]], shard: int,
             old: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The last version of the shard's Lease ``old`` wrote (a renewal or its release) and
    the first after it held by another."""
    versions = [spec for name, spec in history if name == f"websites-shard-{shard}"]
    last = max(i for i, v in enumerate(versions)
               if v.get("holderIdentity") == old
               or (not v.get("holderIdentity") and i > 0
                   and versions[i - 1].get("holderIdentity") == old))
    taken = next(i for i, v in enumerate(versions)
                 if i > last and v.get("holderIdentity") not in ("", old))
    return versions[last], versions[taken]


async def test_a_killed_replica_is_taken_over_within_the_lease_and_a_stopped_one_at_once(
        serve_factory: Any, tmp_path: Path) -> None:
    serve: ServeProcess = serve_factory()
    processes: list[asyncio.subprocess.Process] = []
    history: list[tuple[str, dict[str, Any]]] = []
    async with Client(load_kubeconfig(serve.kubeconfig)) as client:
        await install(client, EXAMPLES / "website" / "crd.yaml")
        watcher = asyncio.create_task(record_leases(client, history))
        try:
            for i in range(3):
                with (tmp_path / f"r{i}.log").open("wb") as out:
                    processes.append(await asyncio.create_subprocess_exec(
                        sys.executable, "-m", "setpoint", "run", "examples/website/operator.py",
                        "--kubeconfig", str(serve.kubeconfig), "--shard-group", "websites",
                        "--shards", str(SHARDS), cwd=ROOT, stdout=out,
                        stderr=subprocess.STDOUT, env=dict(os.environ)))

            def three_hold_all() -> dict[int, str] | None:
                # each shard held by the replica rendezvous hashing gives it among the three
                # (so no hand-over is under way)
                now = holders(history)
                members = set(now.values()) - {""}
                settled = len(now) == SHARDS and len(members) == 3 and all(
                    who == rendezvous_owner(s, sorted(members)) for s, who in now.items())
                return now if settled else None

            await eventually(three_hold_all, timeout=60, what="three replicas hold shards")
            for i in range(12):
                await client.create({"apiVersion": "web.example.com/v1", "kind": "Website",
                                     "metadata": {"name": f"site{i}", "namespace": "default"},
                                     "spec": {"title": f"Site {i}"}})
            for i in range(12):
                await eventually_get(client, CONFIGMAP, f"site{i}-site", lambda cm: True,
                                     timeout=30)

            # kill one replica: its Leases are left to expire (15 s, the default)
            before = three_hold_all()
            assert before is not None
            processes[0].kill()
            await processes[0].wait()

            def two_hold_all() -> dict[int, str] | None:
                now = holders(history)
                return now if len(set(now.values()) - {""}) == 2 and \
                    set(now.values()) < set(before.values()) else None

            after = await eventually(two_hold_all, timeout=40, what="two replicas hold all")
            dead = (set(before.values()) - set(after.values())).pop()
            gaps = []
            for shard in [s for s, who in before.items() if who == dead]:
                last, taken = handover(history, shard, dead)
                assert last["holderIdentity"] == dead  # not released: killed
                gap = micro_time(taken["acquireTime"]) - micro_time(last["renewTime"])
                duration = datetime.timedelta(seconds=last["leaseDurationSeconds"])
                # not before the Lease expired; how soon after it is printed, not asserted
                assert duration <= gap, (shard, gap)
                gaps.append(gap.total_seconds())
            # a page deleted now is made again by whichever replica holds its shard
            await client.delete(CONFIGMAP, "site0-site")
            await eventually_get(client, CONFIGMAP, "site0-site", lambda cm: True, timeout=30)

            # stop another gracefully: it releases its shards, the last one takes them
            processes[1].send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                assert await processes[1].wait() == 0

            def one_holds_all() -> dict[int, str] | None:
                now = holders(history)
                return now if len(set(now.values())) == 1 and "" not in now.values() else None

            alone = await eventually(one_holds_all, timeout=20, what="one replica holds all")
            stopped = (set(after.values()) - set(alone.values())).pop()
            handed = []
            for shard in [s for s, who in after.items() if who == stopped]:
                released, taken = handover(history, shard, stopped)
                assert released["holderIdentity"] == "", shard
                gap = micro_time(taken["acquireTime"]) - micro_time(released["renewTime"])
                # taken before the released Lease would have expired: nobody waited for it
                assert gap < datetime.timedelta(seconds=released["leaseDurationSeconds"]), \
                    (shard, gap)
                handed.append(gap.total_seconds())
            print(f"\nkilled: shards taken {min(gaps):.3f}-{max(gaps):.3f}s after the last "
                  f"renewal (lease 15s); stopped: taken {min(handed):.3f}-{max(handed):.3f}s "
                  "after the release")
            for i in range(12):
                await eventually_get(client, CONFIGMAP, f"site{i}-site", lambda cm: True,
                                     timeout=30)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            for process in processes:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
            for process in processes:
                async with asyncio.timeout(20):
                    await process.wait()
    for i in (1, 2):
        output = (tmp_path / f"r{i}.log").read_text()
        assert "Traceback" not in output, output
