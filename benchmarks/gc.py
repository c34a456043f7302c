"""Measure the built-in controllers of ``setpoint serve``: cascading deletion and namespaces.

Against a real ``setpoint serve`` process (SQLite, port 0, fresh data directory), with the
client in this process. For each N:

1. **background**: one ConfigMap owns N ConfigMaps; the owner is deleted (background
   propagation, as kubectl does by default). Reported: the time from the DELETE's answer to
   the last dependent's DELETED event on a watch, and dependents collected per second;
2. **baseline** (same run): N ConfigMaps deleted by the client itself, one DELETE each at
   concurrency 16, timed the same way: the ceiling for any collector going through the API;
3. **foreground**: one ConfigMap owns N ConfigMaps with ``blockOwnerDeletion``; the owner is
   deleted with ``propagationPolicy: Foreground``. Reported: the time until the owner itself
   is gone (every dependent first);
4. **namespace**: a namespace holding N ConfigMaps and N Secrets is deleted. Reported: the
   time until the namespace is gone;
5. the server's peak RSS.

    python benchmarks/gc.py [--n 1000,10000] [--controllers-mode process|inline]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import start_serve  # noqa: E402

from setpoint.apimachinery import errors  # noqa: E402
from setpoint.client import Client, load_kubeconfig  # noqa: E402

CM = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")
NAMESPACE = ("v1", "Namespace")
CONCURRENCY = 16


def rss_kib(pid: str, field: str = "VmHWM:") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def cm(name: str, namespace: str = "default", *, owner: dict[str, Any] | None = None,
       block: bool = False, label: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if owner is not None:
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner["metadata"]["name"],
               "uid": owner["metadata"]["uid"]}
        if block:
            ref["blockOwnerDeletion"] = True
        meta["ownerReferences"] = [ref]
    if label:
        meta["labels"] = {"set": label}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


async def bounded(n: int, make: Callable[[int], Awaitable[Any]]) -> None:
    limit = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with limit:
            await make(i)

    async with asyncio.TaskGroup() as group:
        for i in range(n):
            group.create_task(one(i))


async def deleted_events(client: Client, label: str, n: int, ready: asyncio.Event) -> float:
    """Wait for ``n`` DELETED events of ConfigMaps labelled ``set=label``; the time of the
    last one (perf_counter)."""
    listed = await client.list(CM, namespace="default", label_selector=f"set={label}",
                               limit=1)
    seen = 0
    async with client.watch(CM, namespace="default", label_selector=f"set={label}",
                            resource_version=listed["metadata"]["resourceVersion"]) as events:
        ready.set()
        async for event in events:
            if event.type == "DELETED":
                seen += 1
                if seen == n:
                    return time.perf_counter()
    raise RuntimeError("the watch ended early")


async def timed_deletions(client: Client, label: str, n: int,
                          start: Callable[[], Awaitable[Any]]) -> float:
    ready = asyncio.Event()
    watcher = asyncio.create_task(deleted_events(client, label, n, ready))
    await ready.wait()
    started = time.perf_counter()
    await start()
    return await asyncio.wait_for(watcher, 600) - started


async def wait_gone(client: Client, resource: tuple[str, str], name: str,
                    namespace: str | None) -> None:
    while True:
        try:
            await client.get(resource, name, namespace=namespace)
        except errors.NotFound:
            return
        await asyncio.sleep(0.01)


async def measure(client: Client, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    # background
    owner = await client.create(cm(f"owner-bg-{n}"))
    await bounded(n, lambda i: client.create(cm(f"bg-{n}-{i}", owner=owner, label=f"bg{n}")))
    await asyncio.sleep(1.0)  # the collector has seen them

    async def delete_owner() -> None:
        await client.delete(CM, f"owner-bg-{n}", namespace="default",
                            propagation_policy="Background")

    out["background"] = await timed_deletions(client, f"bg{n}", n, delete_owner)
    # baseline: the client deletes them itself
    await bounded(n, lambda i: client.create(cm(f"base-{n}-{i}", label=f"base{n}")))

    async def delete_all() -> None:
        await bounded(n, lambda i: client.delete(CM, f"base-{n}-{i}", namespace="default"))

    out["baseline"] = await timed_deletions(client, f"base{n}", n, delete_all)
    # foreground
    owner = await client.create(cm(f"owner-fg-{n}"))
    await bounded(n, lambda i: client.create(cm(f"fg-{n}-{i}", owner=owner, block=True)))
    await asyncio.sleep(1.0)
    started = time.perf_counter()
    await client.delete(CM, f"owner-fg-{n}", namespace="default",
                        propagation_policy="Foreground")
    await wait_gone(client, CM, f"owner-fg-{n}", "default")
    out["foreground"] = time.perf_counter() - started
    # namespace
    ns = f"bench-{n}"
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await bounded(n, lambda i: client.create(cm(f"c{i}", namespace=ns)))
    await bounded(n, lambda i: client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s{i}", "namespace": ns},
         "stringData": {"k": "v"}}))
    started = time.perf_counter()
    await client.delete(NAMESPACE, ns)
    await wait_gone(client, NAMESPACE, ns, None)
    out["namespace"] = time.perf_counter() - started
    return out


async def run(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.n.split(",")]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="setpoint-gc-bench-") as tmp:
        server = start_serve(Path(tmp) / "data", storage="sqlite",
                             extra_args=["--controllers-mode", args.controllers_mode])
        try:
            config = load_kubeconfig(server.kubeconfig, request_timeout=120,
                                     max_connections=64)
            async with Client(config) as client:
                for n in sizes:
                    results[n] = await measure(client, n)
            peak = rss_kib(str(server.process.pid)) / 1024
        finally:
            server.stop()
    width = 52
    print("setpoint built-in controllers benchmark: setpoint serve (sqlite), controllers "
          f"{args.controllers_mode}, client in-process")
    print(f"{'N':<{width}}" + "".join(f"{n:>12,}" for n in sizes))
    rows = [
        ("background: owner deleted -> N dependents gone (s)", "background", ".2f"),
        ("  dependents collected per second", None, ""),
        ("baseline: N DELETEs by the client, concurrency 16 (s)", "baseline", ".2f"),
        ("foreground: owner deleted -> owner gone (s)", "foreground", ".2f"),
        ("namespace with N ConfigMaps + N Secrets -> gone (s)", "namespace", ".2f"),
    ]
    for label, key, fmt in rows:
        if key is None:
            cells = "".join(f"{n / results[n]['background']:>12,.0f}" for n in sizes)
        else:
            cells = "".join(f"{results[n][key]:>12{fmt}}" for n in sizes)
        print(f"{label:<{width}}{cells}")
    print(f"server peak RSS: {peak:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="1000", help="comma-separated sizes (default 1000)")
    parser.add_argument("--controllers-mode", choices=("process", "inline"), default="process",
                        help="where setpoint serve runs its controllers (default: process)")
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.run(run(args))
    except ImportError:  # pragma: no cover
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
