"""The garden operator on the in-process control plane: its validate hook refuses a plant
with its message and warns of a dry one, its mutate hook labels and defaults every plant,
its convert hook serves v1 and v2 of the same objects; the webhook configurations go when
the operator stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.testing import control_plane, load_operator

HERE = Path(__file__).parent
PLANT_V1 = ("garden.example.com/v1", "Plant")
PLANT_V2 = ("garden.example.com/v2", "Plant")
VALIDATING = ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")


def planted(plant: dict[str, Any]) -> bool:
    return (plant.get("status") or {}).get("phase") == "Planted"


async def test_plants_are_checked_tended_and_converted() -> None:
    operator = load_operator(HERE / "operator.py")
    async with control_plane() as cp:
        await cp.apply(HERE / "crd.yaml")
        manager = await cp.run_operator(operator)
        await cp.apply(HERE / "plants.yaml")

        # written in v1, stored in v2 through convert; labelled and planted
        fern = await cp.wait_for(PLANT_V2, "fern", planted)
        assert fern["spec"] == {"waterMilliliters": 300, "light": "shade"}
        assert fern["metadata"]["labels"] == {
            "garden.example.com/tended-by": "garden-operator"}
        # written in v2 without light: defaulted by mutate, and served in v1 too
        cactus = await cp.wait_for(PLANT_V1, "cactus", planted)
        assert cactus["apiVersion"] == "garden.example.com/v1"
        assert cactus["spec"] == {"water": "20ml", "light": "partial-shade"}

        # validate refuses a bog plant, in either version
        for api_version, spec in (("garden.example.com/v1", {"water": "9000ml"}),
                                  ("garden.example.com/v2", {"waterMilliliters": 9000})):
            with pytest.raises(errors.ApiError) as denied:
                await cp.client.create({"apiVersion": api_version, "kind": "Plant",
                                        "metadata": {"name": "bog", "namespace": "default"},
                                        "spec": spec})
            assert denied.value.status_code == 400
            assert denied.value.message == (
                'admission webhook "no-drowning.garden.hooks.setpoint" denied the request: '
                "plant bog: 9000 ml of water a day would drown it (at most 5000 ml)")

        await cp.stop_operator(manager)
        with pytest.raises(errors.NotFound):
            await cp.client.get(VALIDATING, "garden-hooks")


def test_the_functions_alone() -> None:
    operator = load_operator(HERE / "operator.py")
    v1 = {"apiVersion": "garden.example.com/v1", "spec": {"water": "42ml"}}
    v2 = operator.convert(v1, "garden.example.com/v2")
    assert v2["spec"] == {"waterMilliliters": 42}
    assert operator.convert(v2, "garden.example.com/v1")["spec"] == {"water": "42ml"}
