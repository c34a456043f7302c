"""Sharding's pure parts and the engine's fence, on a fake clock: stable shards, rendezvous
hashing that moves only a leaving member's shards, and a reconcile cancelled (not the worker)
when its shard is lost."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import pytest

from setpoint.runtime import engine, sharding
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.reconcile import FuncReconciler, Request

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


def test_shards_are_stable_and_spread() -> None:
    assert sharding.shard_of("default/a", 16) == sharding.shard_of("default/a", 16)
    counts = collections.Counter(sharding.shard_of(f"ns/o{i}", 16) for i in range(16000))
    assert set(counts) == set(range(16))
    assert min(counts.values()) > 800  # 1000 expected each


def test_rendezvous_moves_only_the_leaving_members_shards() -> None:
    members = ["a", "b", "c"]
    before = {s: sharding.rendezvous_owner(s, members) for s in range(64)}
    assert set(before.values()) == set(members)
    after = {s: sharding.rendezvous_owner(s, ["a", "c"]) for s in range(64)}
    moved = {s for s in range(64) if before[s] != after[s]}
    assert moved == {s for s in range(64) if before[s] == "b"}
    joined = {s: sharding.rendezvous_owner(s, [*members, "d"]) for s in range(64)}
    assert all(joined[s] in (before[s], "d") for s in range(64))  # a join only takes


@pytest.mark.parametrize("kwargs", [{"shards": 0}, {"skew_margin": 0},
                                    {"skew_margin": 14}, {"name": ""},
                                    {"lease_duration": 5, "renew_deadline": 10}])
def test_config_is_validated(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"shard|skew|name|lease|renew"):
        sharding.ShardingConfig(**{"name": "g", **kwargs})


class Gate:
    """A coordinator's engine-facing half, driven by hand."""

    def __init__(self) -> None:
        self.held = True
        self.running: set[asyncio.Task[Any]] = set()

    def owns(self, key: str) -> bool:
        return self.held

    def enter(self, key: str, task: asyncio.Task[Any]) -> bool:
        if self.held:
            self.running.add(task)
        return self.held

    def leave(self, key: str, task: asyncio.Task[Any]) -> None:
        self.running.discard(task)

    def lose(self) -> None:
        self.held = False
        for task in self.running:
            task.cancel()


async def test_losing_the_shard_cancels_the_reconcile_not_the_worker(
        clock: FakeAsyncClock) -> None:
    gate = Gate()
    started = asyncio.Event()
    finished: list[str] = []

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.Event().wait()  # a long call, cut by the fence
        finished.append(request.name)

    e = engine.Engine("q", FuncReconciler(reconcile), workers=1, clock=clock, shards=gate)
    e.enqueue(Request("default", "a"))
    task = asyncio.ensure_future(e.process(await e.queue.get()))
    await started.wait()
    gate.lose()
    assert await task == "error"  # the worker carries on; nothing is requeued here
    assert finished == []
    assert (len(e.queue), e.queue.delayed) == (0, 0)
    e.enqueue(Request("default", "b"))  # a key of a shard not held is skipped
    assert await e.process(await e.queue.get()) == engine.RESULT_SKIPPED
