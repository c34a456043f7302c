"""The informers recover when the server restarts mid-run, and nothing is missed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.runtime import (
    BackoffConfig,
    Context,
    Controller,
    Manager,
    Request,
    Result,
    WatcherConfig,
)
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig

from .conftest import eventually, running

CM = ("v1", "ConfigMap")


def configmap(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "test"}},
            "data": {"value": value}}


async def test_informers_recover_across_a_server_restart(tmp_path: Path) -> None:
    storage = StorageConfig(kind="sqlite", path=tmp_path / "state.db", synchronous="NORMAL")
    kubeconfig = tmp_path / "kubeconfig"
    first = Server(ServerConfig(port=0, storage=storage, kubeconfig_path=kubeconfig))
    await first.start()
    port = first.port
    second: Server | None = None
    seen: dict[str, str | None] = {}  # name -> the value last reconciled (None: absent)

    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        seen[request.name] = None if obj is None else obj["data"]["value"]
        return Result.done()

    config = WatcherConfig(backoff=BackoffConfig(initial=0.05, cap=0.5))
    try:
        async with Client(load_kubeconfig(kubeconfig, request_timeout=5)) as client:
            for i in range(5):
                await client.create(configmap(f"cm{i}", "v1"))
            manager = Manager(client, [Controller(for_=CM, reconcile=reconcile)],
                              watcher_config=config, cache_sync_timeout=10)
            async with running(manager):
                await eventually(lambda: all(seen.get(f"cm{i}") == "v1" for i in range(5)))
                cache = manager.context("configmap").cache

                await first.stop()
                await asyncio.sleep(0.5)  # the informer fails and backs off meanwhile
                second = Server(ServerConfig(port=port, storage=storage,
                                             kubeconfig_path=kubeconfig))
                await second.start()

                # changes made right away, while the informer may still be reconnecting
                async def write(call: object) -> None:
                    async with asyncio.timeout(5):
                        while True:
                            try:
                                await call()  # type: ignore[operator]
                                return
                            except errors.ServiceUnavailable:  # a pooled connection to the
                                await asyncio.sleep(0.05)      # old server: try again

                await write(lambda: client.create(configmap("after", "v1")))
                current = await client.get(CM, "cm0")
                current["data"]["value"] = "v2"
                await write(lambda: client.update(current))
                await write(lambda: client.delete(CM, "cm1"))

                def caught_up() -> bool:
                    return (seen.get("after") == "v1" and seen.get("cm0") == "v2"
                            and "default/cm1" not in cache and seen.get("cm1") is None)

                await eventually(caught_up, timeout=10)
                held = cache.keys()
                assert sorted(k for k in held if "cm" in k or "after" in k) == [
                    "default/after", "default/cm0", "default/cm2", "default/cm3",
                    "default/cm4"]
    finally:
        if second is not None:
            await second.stop()
        await first.stop()
