"""The test harness: start time, manifests, operators, failures, cleanup."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import NoMatchError
from setpoint.runtime import Context, Manager, Registry, Request, Result
from setpoint.testing import OperatorFailedError, control_plane, read_manifests

GADGET = ("harness.example.com/v1", "Gadget")

CRD_YAML = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.harness.example.com
spec:
  group: harness.example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
            status:
              type: object
              properties:
                doubled: {type: integer}
---
apiVersion: harness.example.com/v1
kind: Gadget
metadata: {name: first}
spec: {size: 2}
"""


def gadget(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "harness.example.com/v1", "kind": "Gadget",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"size": size}}


def doubler() -> Registry:
    registry = Registry()

    @registry.controller(for_=GADGET)
    async def reconcile(request: Request, ctx: Context) -> Result:
        obj = ctx.get(request)
        if obj is None:
            return Result.done()
        doubled = obj["spec"]["size"] * 2
        if (obj.get("status") or {}).get("doubled") != doubled:
            await ctx.client.patch_status(GADGET, request.name, {"status": {"doubled": doubled}},
                                          namespace=request.namespace)
        return Result.done()

    return registry


def doubled(n: int) -> Any:
    return lambda obj: (obj.get("status") or {}).get("doubled") == n


async def test_start_apply_run_and_stop_leave_nothing_running() -> None:
    before = asyncio.all_tasks()
    async with control_plane() as cp:
        print(f"\ncontrol plane ready in {cp.startup_seconds * 1000:.1f} ms at {cp.url}")
        assert cp.kubeconfig.is_file()
        assert cp.url.startswith("http://127.0.0.1:")
        assert (await cp.client.version())["minor"] == "32"
        crd, first = await cp.apply(CRD_YAML)  # the CRD is usable by the next document
        assert crd["kind"] == "CustomResourceDefinition"
        assert first["metadata"]["name"] == "first"
        manager = await cp.run_operator(doubler())
        assert isinstance(manager, Manager)
        assert manager.ready
        await cp.wait_for(GADGET, "first", doubled(4))
        await cp.apply(gadget("second", 5))
        await cp.wait_for(GADGET, "second", doubled(10))
        await cp.stop_operator(manager)
        assert not manager.ready
    left = {t for t in asyncio.all_tasks() - before if not t.done()}
    assert not left - {asyncio.current_task()}, f"tasks left running: {left}"


async def test_apply_updates_and_keeps_fields_it_does_not_mention(tmp_path: Path) -> None:
    async with control_plane(tmp_path, storage="sqlite") as cp:
        assert (tmp_path / "state.db").exists()
        await cp.apply(CRD_YAML)
        await cp.client.patch(GADGET, "first", {"metadata": {"finalizers": ["x.example.com/y"]}})
        updated = await cp.apply(gadget("first", 7) | {"status": {"doubled": 1}})
        assert updated["spec"]["size"] == 7
        assert updated["metadata"]["finalizers"] == ["x.example.com/y"]
        assert "status" not in updated  # status is not written through apply
        again = await cp.apply(CRD_YAML)  # re-applying an established CRD is fine
        assert len(again) == 2
        await cp.client.patch(GADGET, "first", {"metadata": {"finalizers": None}})
        await cp.delete(gadget("first", 7))
        with pytest.raises(errors.NotFound):
            await cp.client.get(GADGET, "first")
        await cp.delete(gadget("first", 7))  # already gone: fine


async def test_a_file_path_is_a_manifest(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(CRD_YAML)
    async with control_plane() as cp:
        assert [o["kind"] for o in await cp.apply(path)] == ["CustomResourceDefinition",
                                                             "Gadget"]
        assert [o["kind"] for o in await cp.apply(str(path))] == ["CustomResourceDefinition",
                                                                  "Gadget"]


def test_read_manifests_forms() -> None:
    assert read_manifests({"kind": "A"}) == [{"kind": "A"}]
    assert read_manifests([{"kind": "A"}, {"kind": "B"}]) == [{"kind": "A"}, {"kind": "B"}]
    listed = {"kind": "List", "items": [{"kind": "A"}, {"kind": "ConfigMapList",
                                                         "items": [{"kind": "B"}]}]}
    assert read_manifests(listed) == [{"kind": "A"}, {"kind": "B"}]
    assert read_manifests("---\nkind: A\n---\n---\nkind: B\n") == [{"kind": "A"},
                                                                   {"kind": "B"}]
    with pytest.raises(ValueError, match="must be an object"):
        read_manifests("- 1\n- 2\n")


async def test_an_operator_that_cannot_start_fails_run_operator() -> None:
    async with control_plane() as cp:
        with pytest.raises(NoMatchError, match="Gadget"):
            await cp.run_operator(doubler(), timeout=0.5)  # no CRD: nothing to resolve
        with pytest.raises(ValueError, match="no controllers"):
            await cp.run_operator(Registry())


def explode_on_bombs(obj: Any) -> list[str]:
    if obj["metadata"]["name"] == "bomb":
        raise RuntimeError("boom")
    return []


async def test_an_operator_failing_later_fails_the_next_wait() -> None:
    async with control_plane() as cp:
        await cp.apply(CRD_YAML)
        manager = await cp.run_operator(doubler())
        # an index function that raises ends the informer, and with it the manager
        manager.context("gadget").cache.add_indexer("explosive", explode_on_bombs)
        await cp.apply(gadget("bomb", 1))
        with pytest.raises(OperatorFailedError, match="boom"):
            await cp.wait_for(GADGET, "bomb", doubled(1000))
        cp.check_operators()  # reported once


async def test_an_operator_failure_nobody_waited_for_fails_the_block() -> None:
    async def body() -> None:
        async with control_plane() as cp:
            await cp.apply(CRD_YAML)
            manager = await cp.run_operator(doubler())
            manager.context("gadget").cache.add_indexer("explosive", explode_on_bombs)
            await cp.apply(gadget("bomb", 1))
            await asyncio.sleep(0.3)

    with pytest.raises(OperatorFailedError, match="boom"):
        await body()
