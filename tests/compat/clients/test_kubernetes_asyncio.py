"""``kubernetes_asyncio``, unchanged, against ``setpoint serve``: CRUD and watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.compat.clients.conftest import GROUP, widget
from tests.conftest import ServeProcess

pytest.importorskip("kubernetes_asyncio", reason="kubernetes_asyncio is not installed")

from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException

pytestmark = pytest.mark.compat


@pytest.fixture
async def api(serve: ServeProcess, widgets: str) -> AsyncIterator[Any]:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(serve.kubeconfig),
                                  client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


async def test_custom_objects_crud(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                           widget("async-crud", 1))
    assert created["metadata"]["generation"] == 1
    got = await custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                    "async-crud")
    got["spec"]["size"] = 2
    replaced = await custom.replace_namespaced_custom_object(GROUP, "v1", "default",
                                                             "widgets", "async-crud", got)
    assert replaced["spec"]["size"] == 2
    # a dict body goes out as a json-patch: the server says 400, never 500
    with pytest.raises(ApiException) as bad:
        await custom.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                    "async-crud", {"spec": {"size": 3}})
    assert bad.value.status == 400
    merged = await custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", "async-crud", {"spec": {"size": 3}},
        _content_type="application/merge-patch+json")
    assert merged["spec"]["size"] == 3
    ops = [{"op": "test", "path": "/spec/size", "value": 3},
           {"op": "replace", "path": "/spec/size", "value": 4}]
    patched = await custom.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                          "async-crud", ops)
    assert patched["spec"]["size"] == 4
    status = await custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", "widgets", "async-crud", [
            {"op": "add", "path": "/status", "value": {"phase": "Ready"}}])
    assert status["status"] == {"phase": "Ready"}
    listed = await custom.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    assert "async-crud" in [i["metadata"]["name"] for i in listed["items"]]
    await custom.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                 "async-crud")
    with pytest.raises(ApiException) as missing:
        await custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                  "async-crud")
    assert missing.value.status == 404


async def test_watch_echoes_each_write(api: Any) -> None:
    custom = client.CustomObjectsApi(api)
    start = await custom.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    events: list[tuple[str, str, str]] = []
    w = watch.Watch()

    async def consume() -> None:
        # kubernetes_asyncio sends watch=True: a Go boolean the server must parse
        async for event in w.stream(custom.list_namespaced_custom_object, GROUP, "v1",
                                    "default", "widgets",
                                    resource_version=start["metadata"]["resourceVersion"],
                                    timeout_seconds=20):
            meta = event["object"]["metadata"]
            events.append((event["type"], meta["name"], meta["resourceVersion"]))
            if event["type"] == "DELETED" and meta["name"] == "async-watched":
                w.stop()

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    created = await custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                           widget("async-watched"))
    patched = await custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", "async-watched", {"spec": {"size": 9}},
        _content_type="application/merge-patch+json")
    await custom.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                 "async-watched")
    async with asyncio.timeout(20):
        await task
    mine = [e for e in events if e[1] == "async-watched"]
    assert [e[0] for e in mine] == ["ADDED", "MODIFIED", "DELETED"]
    assert mine[0][2] == created["metadata"]["resourceVersion"]
    assert mine[1][2] == patched["metadata"]["resourceVersion"]


async def test_config_map_crud(api: Any) -> None:
    core = client.CoreV1Api(api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="async-cm"), data={"a": "1"})
    created = await core.create_namespaced_config_map("default", body)
    assert created.metadata.uid
    patched = await core.patch_namespaced_config_map("async-cm", "default",
                                                     {"data": {"b": "2"}})
    assert patched.data == {"a": "1", "b": "2"}
    listed = await core.list_namespaced_config_map("default")
    assert "async-cm" in [c.metadata.name for c in listed.items]
    await core.delete_namespaced_config_map("async-cm", "default")
    with pytest.raises(ApiException) as missing:
        await core.read_namespaced_config_map("async-cm", "default")
    assert missing.value.status == 404
