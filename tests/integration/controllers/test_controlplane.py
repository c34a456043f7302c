"""Composing the server with the built-in controllers: which run, and what the server does
without them."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client, ClientConfig
from setpoint.controlplane import (
    CONTROLLERS,
    DEFAULT_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    loopback_url,
    parse_controllers,
)
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig
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
    assert parse_controllers(None) == set(DEFAULT_CONTROLLERS)
    assert set(DEFAULT_CONTROLLERS) == set(CONTROLLERS)
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


def test_controllers_in_a_process_need_a_kubeconfig() -> None:
    with pytest.raises(ValueError, match="kubeconfig_path"):
        plane_config(controllers_mode="process")
    with pytest.raises(ValueError, match="controllers_mode"):
        plane_config(controllers_mode="thread")  # type: ignore[arg-type]
    plane_config(controllers_mode="process", controllers=frozenset())  # none to run: fine


def process_config(tmp_path: Path, **kwargs: Any) -> ControlPlaneConfig:
    return ControlPlaneConfig(server=ServerConfig(
        port=0, storage=StorageConfig(kind="memory"),
        kubeconfig_path=tmp_path / "kubeconfig"), controllers_mode="process", **kwargs)


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def test_controllers_in_a_child_process_collect_and_stop_with_the_plane(
        tmp_path: Path) -> None:
    async with ControlPlane(process_config(tmp_path)) as plane, \
            Client(ClientConfig(server=plane.url)) as client:
        assert plane.manager is None
        assert plane.supervisor is not None
        assert plane.supervisor.ready.is_set()
        pid = plane.supervisor.pid
        assert pid is not None
        owner = await client.create(make(CM, "owner"))
        await client.create(make(CM, "dep", owners=[owner_ref(owner)]))
        await client.delete(CM, "owner", namespace="default")
        await gone(client, CM, "dep")
    assert plane.supervisor.exit_codes == [0]
    assert process_gone(pid)


async def test_a_wedged_controller_process_neither_blocks_the_server_nor_outlives_it(
        tmp_path: Path) -> None:
    """A controller manager that spins forever and ignores SIGTERM: the server keeps
    answering, and stopping the plane kills it after the stop timeout."""
    wedged = (sys.executable, "-c", "import signal\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "while True:\n    pass\n")
    config = process_config(tmp_path, controller_manager_command=wedged,
                            controllers_ready_timeout=0.2, controller_stop_timeout=0.5)
    async with ControlPlane(config) as plane, \
            Client(ClientConfig(server=plane.url, request_timeout=10)) as client:
        assert plane.supervisor is not None
        pid = plane.supervisor.pid
        assert pid is not None
        assert not plane.supervisor.ready.is_set()
        for i in range(50):
            await client.create(make(CM, f"cm-{i}"))
        assert len((await client.list(CM, namespace="default"))["items"]) >= 50
    assert plane.supervisor.exit_codes == [-signal.SIGKILL]
    assert process_gone(pid)


def test_controller_manager_refuses_unknown_controllers_and_a_missing_kubeconfig(
        tmp_path: Path) -> None:
    for args, message in ((["--controllers", "gc"], "unknown controllers: gc"),
                          (["--kubeconfig", str(tmp_path / "nope")], "error")):
        result = subprocess.run([sys.executable, "-m", "setpoint", "controller-manager",
                                 *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 2, result.stderr
        assert message in result.stderr


async def test_controller_manager_run_by_hand_against_a_server(tmp_path: Path) -> None:
    """A server that runs no controllers, and ``setpoint controller-manager`` beside it."""
    config = ControlPlaneConfig(server=ServerConfig(
        port=0, storage=StorageConfig(kind="memory"), kubeconfig_path=tmp_path / "kubeconfig"),
        controllers=frozenset())
    async with ControlPlane(config) as plane, \
            Client(ClientConfig(server=plane.url)) as client:
        manager = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "setpoint", "controller-manager",
            "--kubeconfig", str(tmp_path / "kubeconfig"), "--controllers", "garbagecollector",
            stderr=asyncio.subprocess.PIPE)
        try:
            owner = await client.create(make(CM, "owner"))
            await client.create(make(CM, "dep", owners=[owner_ref(owner)]))
            await client.delete(CM, "owner", namespace="default")
            await gone(client, CM, "dep", timeout=30)
        finally:
            manager.send_signal(signal.SIGTERM)
            _, err = await manager.communicate()
        assert manager.returncode == 0, err.decode()
        assert b"built-in controllers ready: garbagecollector" in err
