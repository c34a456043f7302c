"""The client against a real in-process setpoint server (memory storage, port 0)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import api, watch
from setpoint.client import config as cfg
from setpoint.client import discovery as disc
from setpoint.server.server import Server

CM = ("v1", "ConfigMap")
GIZMO = ("client.example.com/v1", "Gizmo")

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.client.example.com"},
    "spec": {
        "group": "client.example.com", "scope": "Namespaced",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo",
                  "shortNames": ["gz"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer", "minimum": 0}}},
                    "status": {"type": "object", "properties": {
                        "phase": {"type": "string"}}}}}}}],
    },
}


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def gizmo(name: str, size: int = 1) -> dict[str, Any]:
    return {"apiVersion": "client.example.com/v1", "kind": "Gizmo",
            "metadata": {"name": name}, "spec": {"size": size}}


def rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


@pytest.fixture
async def client(server: Server) -> AsyncIterator[api.Client]:
    assert server.config.kubeconfig_path is not None
    config = cfg.load_kubeconfig(server.config.kubeconfig_path, request_timeout=10)
    async with api.Client(config) as c:
        yield c


async def install_gizmos(client: api.Client) -> disc.ResourceRef:
    await client.create(CRD)
    async with asyncio.timeout(5):
        while True:
            try:
                return await client.discovery.resolve(*GIZMO)
            except disc.NoMatchError:
                await asyncio.sleep(0.02)


async def test_version(client: api.Client) -> None:
    assert (await client.version())["minor"] == "32"


async def test_configmap_crud(client: api.Client) -> None:
    created = await client.create(configmap("settings", color="red"))
    assert created["metadata"]["namespace"] == "default"  # the kubeconfig's namespace
    fetched = await client.get(CM, "settings")
    assert fetched["data"] == {"color": "red"}
    assert rv(fetched) == rv(created)

    fetched["data"]["color"] = "blue"
    updated = await client.update(fetched)
    assert updated["data"] == {"color": "blue"}
    assert int(rv(updated)) > int(rv(created))

    with pytest.raises(errors.Conflict):
        await client.update(fetched)  # its resourceVersion is stale now
    with pytest.raises(errors.AlreadyExists):
        await client.create(configmap("settings"))

    await client.delete(CM, "settings")
    with pytest.raises(errors.NotFound) as missing:
        await client.get(CM, "settings")
    assert missing.value.status_code == 404
    assert 'configmaps "settings" not found' in missing.value.message


async def test_dry_run_create_persists_nothing(client: api.Client) -> None:
    await client.create(configmap("ghost"), dry_run=True)
    with pytest.raises(errors.NotFound):
        await client.get(CM, "ghost")


async def test_delete_preconditions(client: api.Client) -> None:
    created = await client.create(configmap("guarded"))
    with pytest.raises(errors.Conflict):
        await client.delete(CM, "guarded", uid="not-the-uid")
    await client.delete(CM, "guarded", uid=created["metadata"]["uid"])
    with pytest.raises(errors.NotFound):
        await client.delete(CM, "guarded")


async def test_merge_and_json_patches(client: api.Client) -> None:
    created = await client.create(configmap("patched", a="1", b="2"))
    merged = await client.patch(CM, "patched", {"data": {"a": None, "c": "3"}})
    assert merged["data"] == {"b": "2", "c": "3"}
    json_patched = await client.patch(
        CM, "patched",
        [{"op": "test", "path": "/metadata/resourceVersion", "value": rv(merged)},
         {"op": "add", "path": "/metadata/finalizers", "value": ["client.example.com/x"]}],
        patch_type=api.PatchType.JSON)
    assert json_patched["metadata"]["finalizers"] == ["client.example.com/x"]
    with pytest.raises(errors.Invalid):
        await client.patch(CM, "patched",
                           [{"op": "test", "path": "/metadata/resourceVersion",
                             "value": rv(created)}],
                           patch_type=api.PatchType.JSON)
    await client.patch(CM, "patched", [{"op": "remove", "path": "/metadata/finalizers"}],
                       patch_type=api.PatchType.JSON)
    strategic = await client.patch(CM, "patched", {"data": {"d": "4"}},
                                   patch_type=api.PatchType.STRATEGIC)
    assert strategic["data"] == {"b": "2", "c": "3", "d": "4"}


async def test_server_side_apply_creates_then_updates(client: api.Client) -> None:
    applied = await client.apply(configmap("applied", k="v"), field_manager="tests")
    assert applied["data"] == {"k": "v"}
    again = await client.apply(configmap("applied", k="w"), field_manager="tests", force=True)
    assert again["data"]["k"] == "w"


async def test_list_paging_and_selectors(client: api.Client) -> None:
    for i in range(7):
        await client.create(configmap(f"paged-{i}", labels={"set": "paged"}))
    await client.create(configmap("other", labels={"set": "other"}))
    pages = [page async for page in client.list_pages(CM, label_selector="set=paged", limit=3)]
    assert [len(p["items"]) for p in pages] == [3, 3, 1]
    names = [i["metadata"]["name"] for p in pages for i in p["items"]]
    assert names == [f"paged-{i}" for i in range(7)]
    assert all(i["kind"] == "ConfigMap" and i["apiVersion"] == "v1"
               for p in pages for i in p["items"])
    everything = await client.list_all(CM, label_selector="set=paged", limit=2)
    assert len(everything["items"]) == 7
    assert "continue" not in everything["metadata"]
    by_name = await client.list(CM, field_selector="metadata.name=other")
    assert [i["metadata"]["name"] for i in by_name["items"]] == ["other"]
    across = await client.list(CM, namespace=api.ALL_NAMESPACES, label_selector="set")
    assert len(across["items"]) == 8


async def test_delete_collection(client: api.Client) -> None:
    for i in range(3):
        await client.create(configmap(f"doomed-{i}", labels={"fate": "doomed"}))
    await client.create(configmap("kept", labels={"fate": "kept"}))
    await client.delete_collection(CM, label_selector="fate=doomed")
    left = await client.list(CM, label_selector="fate")
    assert [i["metadata"]["name"] for i in left["items"]] == ["kept"]


async def test_watch_sees_writes_with_exact_resource_versions(client: api.Client) -> None:
    start = await client.list(CM)
    events: list[watch.WatchEvent] = []
    async with client.watch(CM, resource_version=rv(start), allow_bookmarks=False,
                            inactivity_timeout=10) as stream:
        created = await client.create(configmap("watched", v="1"))
        updated = await client.patch(CM, "watched", {"data": {"v": "2"}})
        await client.delete(CM, "watched")
        async with asyncio.timeout(5):
            async for ev in stream:
                events.append(ev)
                if ev.type == watch.DELETED:
                    break
    assert [ev.type for ev in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert [ev.resource_version for ev in events][:2] == [rv(created), rv(updated)]
    assert int(events[2].resource_version or 0) > int(rv(updated))
    assert events[1].object["data"] == {"v": "2"}
    assert stream.resource_version == events[2].resource_version


async def test_watch_from_zero_replays_what_exists(client: api.Client) -> None:
    await client.create(configmap("existing"))
    async with client.watch(CM, resource_version="0", inactivity_timeout=10) as stream:
        async with asyncio.timeout(5):
            first = await anext(stream)
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "existing")


async def test_watch_timeout_seconds_ends_the_stream(client: api.Client) -> None:
    start = await client.list(CM)
    async with client.watch(CM, resource_version=rv(start), timeout_seconds=1,
                            allow_bookmarks=False) as stream:
        async with asyncio.timeout(10):
            assert [ev async for ev in stream] == []
    assert not stream.timed_out


async def test_custom_resources_through_discovery(client: api.Client) -> None:
    with pytest.raises(disc.NoMatchError):
        await client.discovery.find("gizmos")  # loads full discovery, before the CRD
    ref = await install_gizmos(client)
    assert (ref.resource, ref.namespaced, ref.subresources) == ("gizmos", True,
                                                               frozenset({"status"}))
    assert (await client.discovery.find("gz")) == ref  # a miss refreshes the cache
    await client.discovery.refresh()
    assert (await client.discovery.find("gizmos.client.example.com")) == ref

    created = await client.create(gizmo("g1", size=3))
    assert created["metadata"]["generation"] == 1
    assert (await client.get("gizmo", "g1"))["spec"] == {"size": 3}
    listed = await client.list(GIZMO)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"]


async def test_invalid_custom_resource_is_422(client: api.Client) -> None:
    await install_gizmos(client)
    with pytest.raises(errors.Invalid) as caught:
        await client.create(gizmo("bad", size=-1))
    assert caught.value.status_code == 422
    causes = caught.value.details.get("causes") or []
    assert any(c.get("field") == "spec.size" for c in causes)


async def test_status_subresource(client: api.Client) -> None:
    await install_gizmos(client)
    created = await client.create({**gizmo("s1"), "status": {"phase": "ignored"}})
    assert "status" not in created  # dropped on create with a status subresource
    patched = await client.patch_status(GIZMO, "s1", {"status": {"phase": "Ready"}})
    assert patched["status"] == {"phase": "Ready"}
    assert patched["metadata"]["generation"] == 1

    # the main endpoint ignores status; the status endpoint ignores spec
    patched["spec"]["size"] = 5
    patched["status"]["phase"] = "Changed"
    main = await client.update(patched)
    assert (main["spec"]["size"], main["status"]["phase"]) == (5, "Ready")
    assert main["metadata"]["generation"] == 2
    main["spec"]["size"] = 9
    main["status"]["phase"] = "Done"
    status = await client.update_status(main)
    assert (status["spec"]["size"], status["status"]["phase"]) == (5, "Done")
    fetched = await client.get(GIZMO, "s1", subresource="status")
    assert fetched["status"]["phase"] == "Done"


async def test_unknown_path_is_not_found(client: api.Client) -> None:
    with pytest.raises(errors.NotFound):
        await client.request("GET", "/apis/nothing.example.com/v1/things")
