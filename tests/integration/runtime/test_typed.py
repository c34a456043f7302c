"""Typed resources against the real server: the generated CRD is accepted as structural,
the server validates and defaults exactly as the model does (a round trip), and a typed
controller reads typed objects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from setpoint.apimachinery import errors
from setpoint.client import Client, NoMatchError
from setpoint.runtime import Context, Manager, Registry, Request, Result
from setpoint.runtime.typed import crd_for
from setpoint.server.server import Server
from tests.unit.runtime.typed_models import Queue, QueueSpec, QueueStatus, QueueV2

from .conftest import eventually, make_client, running

QUEUE = ("sqs.example.com/v1", "Queue")


async def install(client: Client) -> dict[str, Any]:
    crd = await client.create(crd_for(Queue, QueueV2))
    async with asyncio.timeout(5):
        while True:
            try:
                await client.discovery.resolve(*QUEUE)
                await client.discovery.resolve("sqs.example.com/v2", "Queue")
                break
            except NoMatchError:
                await asyncio.sleep(0.02)
    established = await client.get("customresourcedefinitions", crd["metadata"]["name"])
    conditions = {c["type"]: c["status"] for c in established["status"]["conditions"]}
    assert conditions.get("NonStructuralSchema") in (None, "False")
    return established


def queue(object_name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "sqs.example.com/v1", "kind": "Queue",
            "metadata": {"name": object_name, "namespace": "default"}, "spec": spec}


async def test_the_server_defaults_as_the_model_does(server: Server, client: Client) -> None:
    await install(client)
    stored = await client.create(queue("orders", name="orders"))
    # the server filled the same defaults the model would
    expected = QueueSpec(name="orders").model_dump(mode="json", by_alias=True,
                                                   exclude_none=True)
    assert stored["spec"] == expected
    typed = Queue.from_object(stored)
    assert typed.spec == QueueSpec(name="orders")
    # an object built from the model goes through unchanged
    built = Queue(spec=QueueSpec(name="billing", visibility_timeout=90, tier="fifo",
                                 owners={"team-a"}, port="http"),
                  metadata={"name": "billing", "namespace": "default"}).to_object()
    again = await client.create(built)
    assert again["spec"] == built["spec"]
    assert Queue.from_object(again).spec.port == "http"
    # the status subresource exists and takes the status model
    status = QueueStatus(url="https://sqs/billing", ready=True, observed_generation=1)
    patched = await client.patch_status(
        QUEUE, "billing", {"status": status.model_dump(mode="json", by_alias=True,
                                                       exclude_none=True)},
        namespace="default")
    assert Queue.from_object(patched).status == status
    # the second version is served too
    v2 = await client.create({"apiVersion": "sqs.example.com/v2", "kind": "Queue",
                              "metadata": {"name": "v2", "namespace": "default"},
                              "spec": {"name": "v2"}})
    assert v2["spec"] == {"name": "v2", "visibilityTimeout": 60}


@pytest.mark.parametrize(("spec", "field"), [
    ({"name": ""}, "spec.name"),
    ({"name": "has space"}, "spec.name"),
    ({"name": "q", "tier": "premium"}, "spec.tier"),
    ({"name": "q", "visibilityTimeout": 50_000}, "spec.visibilityTimeout"),
    ({"name": "q", "maxDelay": 901}, "spec.maxDelay"),
    ({"name": "q", "ratio": 0}, "spec.ratio"),
    ({"name": "q", "minDelay": 5, "maxDelay": 1}, "spec"),
    ({"name": "q", "redrive": {"target": "q"}}, "spec.redrive.target"),
    ({"name": "q", "redrive": {"target": "dlq", "maxReceives": 0}},
     "spec.redrive.maxReceives"),
    ({"visibilityTimeout": 10}, "spec.name"),
])
async def test_the_server_refuses_what_the_model_refuses(server: Server, client: Client,
                                                         spec: dict[str, Any],
                                                         field: str) -> None:
    await install(client)
    # the model refuses it (CEL rules aside, which only the server evaluates) ...
    if field != "spec" and "redrive.target" not in field:
        with pytest.raises(ValidationError):
            Queue.from_object(queue("bad", **spec))
    # ... and so does the server, naming the field
    with pytest.raises(errors.Invalid) as refused:
        await client.create(queue("bad", **spec))
    causes = refused.value.details.get("causes") or []
    assert any(c.get("field", "").startswith(field) for c in causes), causes


async def test_a_typed_controller_reads_typed_objects(server: Server, client: Client) -> None:
    await install(client)
    registry = Registry()
    seen: list[Queue] = []

    @registry.controller(for_=Queue, workers=1)
    async def reconcile(request: Request, ctx: Context) -> Result:
        typed = ctx.get_as(Queue, request)
        if typed is None:
            return Result.done()
        seen.append(typed)
        if typed.status is None or not typed.status.ready:
            status = QueueStatus(url=f"https://sqs/{typed.spec.name}", ready=True)
            await ctx.client.patch_status(
                Queue.api_version_kind(), request.name,
                {"status": status.model_dump(mode="json", by_alias=True, exclude_none=True)},
                namespace=request.namespace)
        return Result.done()

    async with make_client(server) as mgr_client, running(Manager(mgr_client, registry)):
        await client.create(queue("orders", name="orders-prod"))

        async def ready() -> bool:
            obj = await client.get(QUEUE, "orders", namespace="default")
            return bool((obj.get("status") or {}).get("ready"))

        await eventually(ready)
    first = seen[0]
    assert isinstance(first, Queue)
    assert first.spec.name == "orders-prod"
    assert first["spec"]["visibilityTimeout"] == 30  # dict access still works
