"""The garden operator: a Plant's admission and conversion as three Python functions.

``Plant`` (``garden.example.com``) is served in ``v1`` (``spec.water: "300ml"``) and ``v2``
(``spec.waterMilliliters: 300``, the stored version). The operator declares, on one
:class:`setpoint.runtime.Hooks`:

* **validate**: refuses a plant that needs more than 5000 ml of water a day, with a message
  that says so (kubectl prints it: ``admission webhook "no-drowning.garden.hooks.setpoint"
  denied the request: plant bog: 9000 ml of water a day would drown it (at most 5000 ml)``);
  a plant that needs none is admitted with a warning;
* **mutate**: labels every plant ``garden.example.com/tended-by: garden-operator`` and
  defaults ``spec.light`` to ``partial-shade``;
* **convert**: ``v1`` <-> ``v2``.

The admission hooks are declared on ``v2``: a request in ``v1`` is converted for them (the
webhooks' ``matchPolicy: Equivalent``). A small controller then marks each plant
``status.phase: Planted``. ``setpoint run`` serves the hooks on an HTTPS port of its own
with a certificate of a CA it makes, registers the webhook configurations and the CRD's
conversion, and removes the configurations when it stops::

    kubectl apply -f examples/garden/crd.yaml
    setpoint run examples/garden/operator.py --kubeconfig .setpoint/kubeconfig
    kubectl apply -f examples/garden/plants.yaml

Against a cluster whose API server runs elsewhere, give ``Hooks`` a
``HookConfig(host="0.0.0.0", url="https://<service>.<namespace>.svc:<port>",
hosts=("<service>.<namespace>.svc",))`` and a Service in front of the operator's pod (see
docs/runtime.md).
"""

from __future__ import annotations

from typing import Any

from setpoint.runtime import (
    AdmissionRequest,
    Context,
    Hooks,
    Registry,
    Request,
    Result,
    Verdict,
)

PLANT = ("garden.example.com/v2", "Plant")
MAX_WATER_ML = 5000
TENDED_BY = "garden.example.com/tended-by"

hooks = Hooks("garden", failure_policy="Fail", timeout_seconds=5)
registry = Registry()


@hooks.validate(PLANT, name="no-drowning")
def validate(req: AdmissionRequest) -> Verdict | None:
    plant = req.object or {}
    water = int((plant.get("spec") or {}).get("waterMilliliters") or 0)
    if water > MAX_WATER_ML:
        return Verdict.deny(f"plant {req.name}: {water} ml of water a day would drown it "
                            f"(at most {MAX_WATER_ML} ml)")
    if water == 0:
        return Verdict.allow(warnings=[f"plant {req.name} is never watered"])
    return None


@hooks.mutate(PLANT, operations=("CREATE", "UPDATE"), name="tend")
def mutate(req: AdmissionRequest) -> dict[str, Any] | None:
    plant = req.object
    if plant is None:
        return None
    plant["metadata"].setdefault("labels", {})[TENDED_BY] = "garden-operator"
    plant.setdefault("spec", {}).setdefault("light", "partial-shade")
    return plant


@hooks.convert("plants.garden.example.com")
def convert(plant: dict[str, Any], desired: str) -> dict[str, Any]:
    spec = plant.get("spec") or {}
    if desired.endswith("/v2") and "water" in spec:
        spec["waterMilliliters"] = int(str(spec.pop("water")).removesuffix("ml"))
    elif desired.endswith("/v1") and "waterMilliliters" in spec:
        spec["water"] = f"{spec.pop('waterMilliliters')}ml"
    return plant


@registry.controller(for_=PLANT)
async def plant(request: Request, ctx: Context) -> Result | None:
    obj = ctx.get(request)
    if obj is None or (obj.get("status") or {}).get("phase") == "Planted":
        return None
    await ctx.client.patch_status(PLANT, request.name, {"status": {"phase": "Planted"}},
                                  namespace=request.namespace)
    return None
