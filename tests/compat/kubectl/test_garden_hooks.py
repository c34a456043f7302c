"""The garden example end to end: ``setpoint serve``, its operator under ``setpoint run``
(which serves the operator's validate, mutate and convert hooks and registers them), and the
real kubectl: the denial message and a warning printed by kubectl, the label and default
added, both versions served by ``kubectl get``; the webhook configurations removed when the
operator stops."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.conftest import Kubectl, eventually
from tests.compat.kubectl.test_example_operators import install_crd, running_operator
from tests.conftest import ServeProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
GARDEN = ROOT / "examples" / "garden"

BOG = """apiVersion: garden.example.com/v1
kind: Plant
metadata: {name: bog}
spec: {water: 9000ml}
"""
DRY = """apiVersion: garden.example.com/v2
kind: Plant
metadata: {name: stone}
spec: {waterMilliliters: 0}
"""


def test_the_garden_hooks_through_kubectl(serve: ServeProcess, kubectl: Kubectl,
                                          tmp_path: Path) -> None:
    install_crd(kubectl, GARDEN / "crd.yaml", "plants.garden.example.com")
    with running_operator("garden", serve, tmp_path / "run.log"):
        eventually(lambda: kubectl.run("get", "mutatingwebhookconfiguration",
                                       "garden-hooks", check=False).returncode == 0,
                   timeout=30)
        eventually(lambda: kubectl.json(
            "get", "crd", "plants.garden.example.com")["spec"]["conversion"].get(
                "strategy") == "Webhook", timeout=30)
        kubectl.apply(GARDEN / "plants.yaml")

        denied = kubectl.run("apply", "-f", "-", input=BOG, check=False)
        assert denied.returncode == 1
        assert ('admission webhook "no-drowning.garden.hooks.setpoint" denied the request: '
                "plant bog: 9000 ml of water a day would drown it (at most 5000 ml)"
                ) in denied.stderr
        dry = kubectl.run("apply", "-f", "-", input=DRY)
        assert "Warning: plant stone is never watered" in dry.stderr

        fern = kubectl.json("get", "plants.v2.garden.example.com", "fern")
        assert fern["spec"] == {"waterMilliliters": 300, "light": "shade"}
        assert fern["metadata"]["labels"]["garden.example.com/tended-by"] == \
            "garden-operator"
        cactus = kubectl.json("get", "plants.v1.garden.example.com", "cactus")
        assert cactus["spec"] == {"water": "20ml", "light": "partial-shade"}
        eventually(lambda: kubectl.json("get", "plants.v2.garden.example.com", "cactus")
                   .get("status", {}).get("phase") == "Planted", timeout=30)
        table = kubectl.run("get", "plants.v2.garden.example.com").stdout
        assert "partial-shade" in table
    gone = kubectl.run("get", "validatingwebhookconfiguration", "garden-hooks", check=False)
    assert gone.returncode == 1
    assert "NotFound" in gone.stderr
