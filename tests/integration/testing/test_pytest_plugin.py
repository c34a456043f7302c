"""The pytest fixtures, used the way a project would use them."""

from __future__ import annotations

from setpoint.client import Client
from setpoint.testing import ControlPlane

pytest_plugins = ["setpoint.testing.pytest_plugin"]


async def test_fixtures_give_a_fresh_control_plane_and_its_client(
        setpoint_control_plane: ControlPlane, setpoint_client: Client) -> None:
    assert setpoint_client is setpoint_control_plane.client
    names = {ns["metadata"]["name"]
             for ns in (await setpoint_client.list(("v1", "Namespace")))["items"]}
    assert "default" in names
    cms = await setpoint_client.list(("v1", "ConfigMap"), namespace="default")
    assert cms["items"] == []  # nothing left over from another test
    await setpoint_control_plane.apply({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "mine"}})


async def test_each_test_gets_its_own(setpoint_client: Client) -> None:
    cms = await setpoint_client.list(("v1", "ConfigMap"), namespace="default")
    assert cms["items"] == []
