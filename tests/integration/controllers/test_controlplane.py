"""Composing the server with the built-in controllers: which run, and what the server does
without them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, ClientConfig
from setpoint.controlplane import (
    ControlPlane,
    ControlPlaneConfig,
    loopback_url,
    parse_controllers,
)
from setpoint.testing import control_plane
from tests.integration.controllers.conftest import (
    CM,
    NAMESPACE,
    eventually,
    get_or_none,
    gone,
    make,
    owner_ref,
    plane_config,
)


def test_parse_controllers() -> None:
    assert parse_controllers(None) == {"garbagecollector", "namespace", "crd"}
    assert parse_controllers("") == frozenset()
    assert parse_controllers(" namespace, crd ") == {"namespace", "crd"}
    with pytest.raises(ValueError, match="unknown controllers: nope"):
        parse_controllers("namespace,nope")
    with pytest.raises(ValueError, match="unknown controllers"):
        ControlPlaneConfig(controllers=frozenset({"gc"}))


def test_serve_refuses_unknown_controllers() -> None:
    result = subprocess.run([sys.executable, "-m", "setpoint", "serve", "--controllers", "gc",
                             "--storage", "memory", "--port", "0"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert "unknown controllers: gc" in result.stderr


async def test_without_controllers_nothing_is_collected_and_foreground_is_immediate() -> None:
    async with ControlPlane(plane_config(controllers=frozenset())) as plane, \
            Client(ClientConfig(server=plane.url)) as client:
        assert plane.manager is None
        owner = await client.create(make(CM, "owner"))
        await client.create(make(CM, "dep", owners=[owner_ref(owner)]))
        answer = await client.delete(CM, "owner", namespace="default",
                                     propagation_policy="Foreground")
        assert answer["kind"] == "Status"  # deleted at once: nothing would finish it
        assert (await client.get(CM, "dep", namespace="default"))["metadata"]["name"] == "dep"
        # a namespace stays Terminating
        await client.create(make(NAMESPACE, "stays", namespace=None))
        await client.delete(NAMESPACE, "stays")
        with pytest.raises(errors.Forbidden):
            await client.create(make(CM, "x", namespace="stays"))
        assert (await client.get(NAMESPACE, "stays"))["status"]["phase"] == "Terminating"


async def test_only_the_named_controllers_run() -> None:
    async with ControlPlane(plane_config(controllers=frozenset({"namespace"}))) as plane, \
            Client(ClientConfig(server=plane.url)) as client:
        assert plane.manager is not None
        assert [c.name for c in plane.manager.controllers] == ["namespace"]
        assert plane.manager.runnables == ()
        await client.create(make(NAMESPACE, "goes", namespace=None))
        await client.create(make(CM, "x", namespace="goes"))
        await client.delete(NAMESPACE, "goes")
        await gone(client, NAMESPACE, "goes", namespace=None)


async def test_the_testing_control_plane_collects_garbage() -> None:
    async with control_plane() as cp:
        owner = await cp.client.create(make(CM, "owner"))
        await cp.client.create(make(CM, "dep", owners=[owner_ref(owner)]))
        await cp.client.delete(CM, "owner", namespace="default")
        await cp.wait_deleted(CM, "dep", namespace="default")
    async with control_plane(controllers=()) as cp:
        assert cp.server.catalog is not None
        assert not cp.server.catalog.garbage_collection


async def test_with_leader_election_the_controllers_hold_a_lease() -> None:
    async with ControlPlane(plane_config(leader_election=True)) as plane, \
            Client(ClientConfig(server=plane.url)) as client:
        async def leading() -> bool:
            lease = await get_or_none(client, ("coordination.k8s.io/v1", "Lease"),
                                      "setpoint-controller-manager", namespace="kube-system")
            return lease is not None and bool(lease["spec"].get("holderIdentity"))

        await eventually(leading, what="the lease held")
        owner = await client.create(make(CM, "owner"))
        await client.create(make(CM, "dep", owners=[owner_ref(owner)]))
        await client.delete(CM, "owner", namespace="default")
        await gone(client, CM, "dep")


def test_the_controllers_reach_a_server_listening_everywhere_over_loopback() -> None:
    assert loopback_url("0.0.0.0", 6443) == "http://127.0.0.1:6443"
    assert loopback_url("::", 6443) == "http://[::1]:6443"
    assert loopback_url("127.0.0.1", 1) == "http://127.0.0.1:1"
    assert loopback_url("::1", 2) == "http://[::1]:2"
