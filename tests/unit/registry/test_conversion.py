"""The conversion seam alone (registry/conversion.py): with strategy None it is the strategy's
conversion and defaulting; with a converter, objects already in the wanted version are not
sent, a watch event's object is converted once for every concurrent watcher, and a failure
reaches every waiter without being kept."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.registry import crd
from setpoint.registry.conversion import Conversion, ConversionConfig
from setpoint.registry.customresource import CustomResourceStrategy
from tests.unit.registry.test_customresource_reads import CRD, stored

Obj = dict[str, Any]


def strategy() -> CustomResourceStrategy:
    return CustomResourceStrategy(crd.resource_info(CRD), preserve_unknown_fields=False)


class FakeConverter:
    """Converts by rewriting apiVersion and marking the object; counts calls; can be held
    at a gate or made to fail."""

    def __init__(self) -> None:
        self.config = ConversionConfig()
        self.calls: list[list[str]] = []
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.fail = False

    async def convert(self, objs: list[Obj], api_version: str) -> list[Obj]:
        self.calls.append([o["metadata"]["name"] for o in objs
                           if o.get("apiVersion") != api_version])
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise errors.InternalError("conversion webhook for x failed: no")
        out = []
        for o in objs:
            if o.get("apiVersion") == api_version:
                out.append(o)
                continue
            c = copy.deepcopy(o)
            c["apiVersion"] = api_version
            c["spec"]["converted"] = True
            out.append(c)
        return out


async def test_strategy_none_is_the_strategys_conversion_with_defaults() -> None:
    seam = Conversion(strategy())
    assert seam.immediate
    obj = stored("5", 3)
    got = await seam.output(obj, "v2")
    assert got["apiVersion"] == "water.example.com/v2"
    assert got["spec"] == {"level": 3, "alarm": False}  # v2's default, on read
    assert obj == stored("5", 3)  # the shared stored object is untouched
    listed = await seam.outputs([stored(str(i), i, uid="u-list") for i in range(2500)], "v2")
    assert [o["spec"]["level"] for o in listed] == list(range(2500))
    owned = stored("6", 1)
    assert await seam.output_owned(owned, "v2") is owned  # in place


async def test_with_a_converter_only_other_versions_are_sent_and_defaults_follow() -> None:
    fake = FakeConverter()
    seam = Conversion(strategy(), fake)  # type: ignore[arg-type]
    assert not seam.immediate
    v2 = {**stored("7", 2), "apiVersion": "water.example.com/v2"}
    v2["metadata"] = {**v2["metadata"], "name": "already"}
    got = await seam.outputs([stored("5", 1), v2], "v2")
    assert fake.calls == [["t"]]
    assert got[0]["spec"] == {"level": 1, "converted": True, "alarm": False}
    assert got[1]["spec"] == {"level": 2, "alarm": False}
    # to storage: the storage version (v1) needs no call
    assert await seam.to_storage({**stored("", 1)}, "v1") == stored("", 1)
    assert len(fake.calls) == 1


async def test_a_watch_event_is_converted_once_for_concurrent_watchers() -> None:
    fake = FakeConverter()
    fake.gate = asyncio.Event()
    seam = Conversion(strategy(), fake)  # type: ignore[arg-type]
    event = stored("9", 4)
    waiters = [asyncio.create_task(seam.shared_output(event, "v2")) for _ in range(10)]
    await fake.entered.wait()
    fake.gate.set()
    results = await asyncio.gather(*waiters)
    assert fake.calls == [["t"]]
    assert all(r is results[0] for r in results)
    assert await seam.shared_output(event, "v2") is results[0]  # kept for later watchers
    assert fake.calls == [["t"]]


async def test_a_failed_conversion_reaches_every_waiter_and_is_not_kept() -> None:
    fake = FakeConverter()
    fake.gate = asyncio.Event()
    fake.fail = True
    seam = Conversion(strategy(), fake)  # type: ignore[arg-type]
    event = stored("9", 4)
    waiters = [asyncio.create_task(seam.shared_output(event, "v2")) for _ in range(3)]
    await fake.entered.wait()
    fake.gate.set()
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, errors.InternalError) for r in results)
    fake.fail = False
    got = await seam.shared_output(event, "v2")
    assert got["spec"]["converted"] is True
    assert len(fake.calls) == 2


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="timeout"):
        ConversionConfig(timeout=0)
    with pytest.raises(ValueError, match="max_objects_per_review"):
        ConversionConfig(max_objects_per_review=0)
