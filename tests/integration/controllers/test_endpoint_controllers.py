"""The Endpoints and EndpointSlice controllers against a real, secured server: Services
and pods created through the API, pod readiness written by the test as an agent would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.controlplane import ControlPlane, ControlPlaneConfig
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import eventually

Obj = dict[str, Any]
POD = ("v1", "Pod")
SERVICE = ("v1", "Service")
ENDPOINTS = ("v1", "Endpoints")
SLICE = ("discovery.k8s.io/v1", "EndpointSlice")

pytestmark = pytest.mark.slow


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    kubeconfig = tmp_path / "kubeconfig"
    config = ControlPlaneConfig(
        server=ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                            kubeconfig_path=kubeconfig,
                            security=SecurityConfig(pki_dir=tmp_path / "pki")),
        controllers=frozenset({"endpoint", "endpointslice", "serviceaccount",
                               "garbagecollector"}),
        controllers_mode="inline")
    async with ControlPlane(config), Client(load_kubeconfig(kubeconfig)) as c:
        await eventually(lambda: exists(c, ("v1", "ServiceAccount"), "default"))
        yield c


async def exists(client: Client, resource: Any, name: str) -> bool:
    try:
        await client.get(resource, name, namespace="default")
    except errors.NotFound:
        return False
    return True


async def running_pod(client: Client, name: str, ip: str, *, ready: bool = True,
                      app: str = "web", port: int = 8080, **spec: Any) -> None:
    await client.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "labels": {"app": app}},
                         "spec": {"containers": [{"name": "c", "image": "python3", "ports": [
                             {"name": "http", "containerPort": port}]}], **spec}})
    await client.patch_status(POD, name, {"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}},
        namespace="default")


async def endpoints_of(client: Client, name: str) -> list[Obj] | None:
    try:
        got = await client.get(ENDPOINTS, name, namespace="default")
    except errors.NotFound:
        return None
    return list(got.get("subsets") or [])


async def slices_of(client: Client, name: str) -> list[Obj]:
    page = await client.list(SLICE, namespace="default",
                             label_selector=f"kubernetes.io/service-name={name}")
    return list(page["items"])


def ips(subsets: list[Obj], field: str = "addresses") -> list[str]:
    return sorted(a["ip"] for s in subsets for a in s.get(field, []))


async def test_endpoints_follow_the_pods_of_a_service(client: Client) -> None:
    await running_pod(client, "a", "10.1.0.1")
    await running_pod(client, "b", "10.1.0.2", ready=False)
    await running_pod(client, "other", "10.1.0.3", app="db")
    await running_pod(client, "named", "10.1.0.4", hostname="alpha", subdomain="web")
    await client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                         "spec": {"selector": {"app": "web"}, "ports": [
                             {"name": "http", "port": 80, "targetPort": "http"}]}})

    async def three() -> list[Obj] | None:
        subsets = await endpoints_of(client, "web")
        return subsets if subsets and len(ips(subsets) + ips(subsets, "notReadyAddresses")) \
            == 3 else None
    subsets = await eventually(three)
    assert ips(subsets) == ["10.1.0.1", "10.1.0.4"]
    assert ips(subsets, "notReadyAddresses") == ["10.1.0.2"]
    assert subsets[0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    named = next(a for a in subsets[0]["addresses"] if a["ip"] == "10.1.0.4")
    assert named["hostname"] == "alpha"
    assert named["targetRef"]["kind"] == "Pod"
    assert named["targetRef"]["name"] == "named"

    [piece] = await eventually(lambda: slices_of(client, "web"))
    assert piece["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == \
        "endpointslice-controller.k8s.io"
    assert piece["metadata"]["ownerReferences"][0]["kind"] == "Service"
    assert piece["addressType"] == "IPv4"
    assert piece["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    conditions = {e["addresses"][0]: e["conditions"]["ready"] for e in piece["endpoints"]}
    assert conditions == {"10.1.0.1": True, "10.1.0.2": False, "10.1.0.4": True}

    # b becomes ready, a goes: both objects follow
    await client.patch_status(POD, "b", {"status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}, namespace="default")
    await client.delete(POD, "a", namespace="default", grace_period_seconds=0)

    async def moved() -> bool:
        subsets = await endpoints_of(client, "web") or []
        return ips(subsets) == ["10.1.0.2", "10.1.0.4"] and not ips(
            subsets, "notReadyAddresses")
    await eventually(moved)

    async def slice_moved() -> bool:
        pieces = await slices_of(client, "web")
        return sorted(e["addresses"][0] for p in pieces for e in p["endpoints"]
                      if e["conditions"]["ready"]) == ["10.1.0.2", "10.1.0.4"]
    await eventually(slice_moved)

    # the Service goes: its Endpoints are deleted, its slices collected with it
    await client.delete(SERVICE, "web", namespace="default")
    await eventually(lambda: _gone(client, "web"))


async def _gone(client: Client, name: str) -> bool:
    return await endpoints_of(client, name) is None and not await slices_of(client, name)


async def test_a_service_without_pods_has_a_placeholder_slice_and_the_api_servers_own(
        client: Client) -> None:
    await client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "empty"},
                         "spec": {"selector": {"app": "none"}, "ports": [{"port": 80}]}})
    [piece] = await eventually(lambda: slices_of(client, "empty"))
    assert piece["endpoints"] in (None, [])
    assert await eventually(lambda: _empty_endpoints(client, "empty"))
    # the kubernetes Service's Endpoints are the server's, untouched by the controller
    kubernetes = await client.get(ENDPOINTS, "kubernetes", namespace="default")
    assert kubernetes["subsets"][0]["addresses"]


async def _empty_endpoints(client: Client, name: str) -> bool:
    return await endpoints_of(client, name) == []


async def test_many_pods_are_split_into_slices_of_at_most_100(client: Client) -> None:
    await client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    for i in range(130):
        await running_pod(client, f"p{i}", f"10.2.{i // 100}.{i % 100 + 1}")

    async def split() -> list[int] | None:
        sizes = sorted(len(p.get("endpoints") or []) for p in await slices_of(client, "web"))
        return sizes if sum(sizes) == 130 else None
    sizes = await eventually(split, timeout=60)
    assert max(sizes) <= 100
    assert len(sizes) == 2
