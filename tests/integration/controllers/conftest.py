"""An in-process control plane with the built-in controllers, a client, and test kinds:
Widget and Gadget (namespaced) and Cluster (cluster-scoped), all in example.com/v1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, ClientConfig, NoMatchError, ResourceRef
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing.waiting import eventually as eventually  # the suite's one wait

Obj = dict[str, Any]

WIDGET = ("example.com/v1", "Widget")
GADGET = ("example.com/v1", "Gadget")
CLUSTER = ("example.com/v1", "Cluster")
CM = ("v1", "ConfigMap")
SECRET = ("v1", "Secret")
NAMESPACE = ("v1", "Namespace")
HOLD = "example.com/hold"


def crd(plural: str, kind: str, scope: str = "Namespaced") -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.example.com"},
            "spec": {"group": "example.com", "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]}}


CRDS = [crd("widgets", "Widget"), crd("gadgets", "Gadget"),
        crd("clusters", "Cluster", scope="Cluster")]


def plane_config(storage: StorageConfig | None = None, **kwargs: Any) -> ControlPlaneConfig:
    return ControlPlaneConfig(server=ServerConfig(
        port=0, storage=storage or StorageConfig(kind="memory")), **kwargs)


@pytest.fixture
async def plane() -> AsyncIterator[ControlPlane]:
    async with ControlPlane(plane_config()) as cp:
        yield cp


@pytest.fixture
async def client(plane: ControlPlane) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=plane.url, request_timeout=10)) as c:
        yield c


async def install(client: Client, *crds: Obj) -> None:
    for body in crds or CRDS:
        await client.create(body)
    for body in crds or CRDS:
        kind = body["spec"]["names"]["kind"]
        async with asyncio.timeout(5):
            while True:
                try:
                    await client.discovery.resolve("example.com/v1", kind)
                    break
                except NoMatchError:
                    await asyncio.sleep(0.02)


@pytest.fixture
async def kinds(client: Client) -> None:
    await install(client)


def owner_ref(owner: Obj, *, block: bool | None = True, controller: bool | None = None) -> Obj:
    ref: Obj = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}
    if block is not None:
        ref["blockOwnerDeletion"] = block
    if controller is not None:
        ref["controller"] = controller
    return ref


def make(resource: tuple[str, str], name: str, namespace: str | None = "default", *,
         owners: list[Obj] | None = None, finalizers: list[str] | None = None,
         labels: dict[str, str] | None = None, **fields: Any) -> Obj:
    meta: Obj = {"name": name}
    if labels:
        meta["labels"] = labels
    if namespace:
        meta["namespace"] = namespace
    if owners:
        meta["ownerReferences"] = owners
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": resource[0], "kind": resource[1], "metadata": meta, **fields}


async def get_or_none(client: Client, resource: tuple[str, str] | ResourceRef, name: str,
                      namespace: str | None = "default") -> Obj | None:
    try:
        return await client.get(resource, name, namespace=namespace)
    except errors.NotFound:
        return None


async def gone(client: Client, resource: tuple[str, str], name: str,
               namespace: str | None = "default", timeout: float = 10.0) -> None:
    async def check() -> bool:
        return await get_or_none(client, resource, name, namespace) is None
    await eventually(check, timeout=timeout, what=f"{resource[1]} {name} gone")


async def remove_finalizer(client: Client, resource: tuple[str, str], name: str,
                           finalizer: str, namespace: str | None = "default") -> None:
    obj = await client.get(resource, name, namespace=namespace)
    kept = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
    await client.patch(resource, name, {"metadata": {
        "finalizers": kept, "resourceVersion": obj["metadata"]["resourceVersion"]}},
        namespace=namespace)


class DeletionLog:
    """The order in which watched objects are deleted (by ``Kind/name``)."""

    def __init__(self) -> None:
        self.order: list[str] = []

    async def follow(self, client: Client, resource: tuple[str, str], *,
                     ready: asyncio.Event) -> None:
        listed = await client.list(resource, namespace="*")
        rv = listed["metadata"]["resourceVersion"]
        async with client.watch(resource, namespace="*", resource_version=rv) as events:
            ready.set()
            async for event in events:
                if event.type == "DELETED":
                    self.order.append(f"{resource[1]}/{event.object['metadata']['name']}")


def tmp_sqlite(tmp_path: Path) -> StorageConfig:
    return StorageConfig(kind="sqlite", path=tmp_path / "state.db")
