"""Informers against the real server: full and metadata-only, shared, stopped cleanly."""

from __future__ import annotations

import asyncio

from setpoint.client import Client
from setpoint.runtime import SharedInformers
from setpoint.runtime import informercache as rtcache

from .conftest import eventually

CM = ("v1", "ConfigMap")


def configmap(name: str, namespace: str = "default") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"team": "a"}},
            "data": {"big": "x" * 1000}}


async def test_full_and_metadata_only_informers(client: Client) -> None:
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": "other"}})
    for i in range(3):
        await client.create(configmap(f"cm{i}"))
    await client.create(configmap("elsewhere", namespace="other"))
    informers = SharedInformers(client)
    full = await informers.informer_for(CM, namespace="default")
    again = await informers.informer_for("configmaps", namespace="default")
    meta = await informers.informer_for(CM, metadata_only=True)
    assert full is again  # one informer per (resource, namespace, form)
    assert meta is not full
    assert len(informers) == 2
    page = await meta.lw.list(resource_version="0", limit=2, continue_token=None)
    assert (page["kind"], page["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert page["metadata"]["continue"]  # paged like any list
    added: list[str] = []
    meta.cache.subscribe(rtcache.Handlers(add=lambda o: added.append(o["metadata"]["name"])))
    async with asyncio.TaskGroup() as group:
        informers.start(group)
        assert await informers.wait_synced(5)
        assert {"default/cm0", "default/cm1", "default/cm2"} <= set(full.cache.keys())
        assert "other/elsewhere" not in full.cache
        assert "other/elsewhere" in meta.cache
        obj = meta.cache.get("default/cm0")
        assert obj is not None
        assert set(obj) == {"apiVersion", "kind", "metadata"}  # no data: metadata only
        assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")
        assert obj["metadata"]["labels"] == {"team": "a"}
        assert full.cache.get("default/cm0")["data"]["big"] == "x" * 1000  # type: ignore[index]

        await client.create(configmap("cm9"))
        await eventually(lambda: "default/cm9" in meta.cache and "default/cm9" in full.cache)
        watched = meta.cache.get("default/cm9")
        assert watched is not None
        assert "data" not in watched
        await client.delete(CM, "cm1")
        await eventually(lambda: "default/cm1" not in meta.cache)
        assert "cm9" in added
        # an informer asked for after the start is started at once
        late = await informers.informer_for(("v1", "Namespace"))
        assert await late.wait_synced(5)
        assert "other" in late.cache
        await informers.stop()
    assert not any(t for t in asyncio.all_tasks() if t.get_name().startswith("informer"))
