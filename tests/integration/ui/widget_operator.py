"""The operator the UI's browser tests run with ``setpoint run``: it makes every Widget it
watches ready (a ``Ready`` condition and ``observedGeneration``), as an operator that finds
the capacity a broken widget was waiting for would. Run it with ``--namespace`` so it touches
only the test's own widgets."""

from __future__ import annotations

from datetime import UTC, datetime

from setpoint.runtime import Condition, Context, Registry, Request, Result, set_condition

WIDGET = ("example.com/v1", "Widget")

registry = Registry()


@registry.controller(for_=WIDGET)
async def reconcile(request: Request, ctx: Context) -> Result:
    widget = ctx.get(request)
    if widget is None:
        return Result.done()
    status = widget.get("status") or {}
    generation = widget["metadata"].get("generation")
    ready = Condition(type="Ready", status=True, reason="Repaired",
                      message="capacity found in pool green", observed_generation=generation)
    wanted = {"observedGeneration": generation,
              "conditions": set_condition(status.get("conditions") or [], ready,
                                          now=datetime.now(UTC))}
    if any(status.get(k) != v for k, v in wanted.items()):
        await ctx.client.patch_status(WIDGET, request.name, {"status": wanted},
                                      namespace=request.namespace)
    return Result.done()
