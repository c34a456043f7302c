"""``accept=`` against the real server: metadata-only lists, watches and tables."""

from __future__ import annotations

import asyncio

from setpoint.client import Client, load_kubeconfig
from setpoint.runtime import informer
from setpoint.server.server import Server

CM = ("v1", "ConfigMap")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


async def test_metadata_only_list_and_watch(server: Server) -> None:
    assert server.config.kubeconfig_path is not None
    async with Client(load_kubeconfig(server.config.kubeconfig_path)) as client:
        await client.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "big"}, "data": {"x": "y" * 1000}})
        ref = await client.resolve(CM)
        page = await client.request("GET", ref.path(namespace="default"),
                                    accept=informer.PARTIAL_LIST_ACCEPT)
        assert page["kind"] == "PartialObjectMetadataList"
        assert [set(item) >= {"metadata"} and "data" not in item for item in page["items"]] \
            == [True]
        async with asyncio.timeout(5), client.watch(
                CM, resource_version="0", accept=informer.PARTIAL_ACCEPT) as events:
            async for event in events:
                assert event.type == "ADDED"
                assert event.object["kind"] == "PartialObjectMetadata"
                assert "data" not in event.object
                assert event.object["metadata"]["name"] == "big"
                break
        table = await client.request("GET", ref.path(namespace="default"), accept=TABLE)
        assert table["kind"] == "Table"
