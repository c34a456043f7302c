"""Leader election against an in-memory Lease API, on a fake clock."""

from __future__ import annotations

import asyncio
import copy
import random
from datetime import timedelta
from typing import Any

import pytest

from setpoint.apimachinery import errors, timeutil
from setpoint.runtime import leaderelection as le
from setpoint.runtime import metrics as rtmetrics
from setpoint.runtime.clock import FakeAsyncClock

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


class FakeLeases:
    """Leases by (namespace, name), with resourceVersion checks; callers can be cut off."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 0
        self.unreachable: set[str] = set()
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def for_(self, identity: str) -> _Caller:
        return _Caller(self, identity)

    def _check(self, identity: str) -> None:
        if identity in self.unreachable:
            raise errors.ServiceUnavailable("connection refused")

    def _store(self, identity: str, lease: Any) -> dict[str, Any]:
        self.rv += 1
        stored = copy.deepcopy(dict(lease))
        stored["metadata"]["resourceVersion"] = str(self.rv)
        key = (stored["metadata"]["namespace"], stored["metadata"]["name"])
        self.leases[key] = stored
        self.writes.append((identity, copy.deepcopy(stored["spec"])))
        return copy.deepcopy(stored)

    def spec(self, name: str = "lock") -> dict[str, Any]:
        return dict(self.leases["default", name]["spec"])


class _Caller:
    def __init__(self, leases: FakeLeases, identity: str) -> None:
        self.leases = leases
        self.identity = identity

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        self.leases._check(self.identity)
        await asyncio.sleep(0)
        try:
            return copy.deepcopy(self.leases.leases[namespace, name])
        except KeyError:
            raise errors.NotFound("lease not found") from None

    async def create(self, lease: Any) -> dict[str, Any]:
        self.leases._check(self.identity)
        await asyncio.sleep(0)
        key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
        if key in self.leases.leases:
            raise errors.AlreadyExists("exists")
        return self.leases._store(self.identity, lease)

    async def update(self, lease: Any) -> dict[str, Any]:
        self.leases._check(self.identity)
        await asyncio.sleep(0)
        key = (lease["metadata"]["namespace"], lease["metadata"]["name"])
        current = self.leases.leases[key]
        if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise errors.Conflict("the object has been modified")
        return self.leases._store(self.identity, lease)


def config(identity: str, **kwargs: Any) -> le.LeaderElectionConfig:
    return le.LeaderElectionConfig(lease_name="lock", identity=identity, **kwargs)


class Candidate:
    def __init__(self, leases: FakeLeases, clock: FakeAsyncClock, identity: str,
                 **kwargs: Any) -> None:
        self.log: list[tuple[str, float]] = []
        self.clock = clock
        self.registry = rtmetrics.MetricsRegistry()
        self.elector = le.LeaderElector(
            leases.for_(identity), config(identity, **kwargs), clock=clock,
            rng=random.Random(1), metrics=self.registry,
            on_started_leading=lambda: self.log.append(("started", clock.monotonic())),
            on_stopped_leading=lambda: self.log.append(("stopped", clock.monotonic())),
            on_new_leader=lambda who: self.log.append((f"leader {who}", clock.monotonic())))
        self.leading = asyncio.Event()
        self.finish = asyncio.Event()
        self.cancelled = False

    async def lead(self) -> None:
        self.leading.set()
        try:
            await self.finish.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.leading.clear()

    def status(self) -> float:
        gauge = self.registry.get("leader_election_master_status")
        assert isinstance(gauge, rtmetrics.Gauge)
        return gauge.value("lock")


async def until(clock: FakeAsyncClock, event: asyncio.Event, limit: float = 120.0) -> float:
    """Advance the clock in small steps until ``event`` is set; returns the clock time."""
    deadline = clock.monotonic() + limit
    while not event.is_set():
        assert clock.monotonic() < deadline, "not within the limit"
        await clock.tick(0.05)
    return clock.monotonic()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"lease_duration": 10, "renew_deadline": 10}, "greater than renew_deadline"),
    ({"renew_deadline": 2.4, "retry_period": 2}, "1.2"),
    ({"retry_period": 0}, "positive"),
    ({"identity": ""}, "identity"),
], ids=["duration <= deadline", "deadline <= jitter x retry", "zero retry", "no identity"])
def test_timings_are_validated(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        config(kwargs.pop("identity", "me"), **kwargs)


def test_defaults_are_client_go_s() -> None:
    c = config("me")
    assert (c.lease_duration, c.renew_deadline, c.retry_period) == (15.0, 10.0, 2.0)
    assert le.default_identity() != le.default_identity()


async def test_first_candidate_creates_and_renews(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        assert a.elector.is_leader
        assert a.status() == 1
        spec = leases.spec()
        assert spec["holderIdentity"] == "a"
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert spec["acquireTime"] == spec["renewTime"] == "2024-01-01T00:00:00.000000Z"
        await clock.tick(2.0)
        await clock.tick(2.0)
        spec = leases.spec()
        assert spec["renewTime"] == "2024-01-01T00:00:04.000000Z"
        assert spec["acquireTime"] == "2024-01-01T00:00:00.000000Z"
        a.finish.set()
        assert await run is True
    assert leases.spec()["holderIdentity"] == ""  # released on return
    assert leases.spec()["leaseDurationSeconds"] == 1
    assert a.status() == 0
    assert [e for e, _ in a.log] == ["leader a", "started", "stopped"]


async def test_a_follower_takes_over_after_the_lease_expires(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a", release_on_shutdown=False)
    b = Candidate(leases, clock, "b")
    async with asyncio.TaskGroup() as group:
        run_a = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        run_b = group.create_task(b.elector.run(b.lead))
        await clock.tick(30)
        assert not b.leading.is_set()  # a keeps renewing: b waits
        assert b.elector.leader == "a"
        last_renewal = clock.monotonic() - (clock.monotonic() % 2.0)
        run_a.cancel()  # a dies without releasing
        took_over = await until(clock, b.leading)
        # no earlier than the lease duration after the last renewal b saw, and within one
        # jittered retry period after that
        assert 15.0 <= took_over - last_renewal <= 15.0 + 2.0 * 2.2 + 0.1
        spec = leases.spec()
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
        b.finish.set()
        await run_b


async def test_a_released_lease_is_taken_at_once(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a")
    b = Candidate(leases, clock, "b")
    async with asyncio.TaskGroup() as group:
        run_a = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        run_b = group.create_task(b.elector.run(b.lead))
        await clock.tick(10)
        released = clock.monotonic()
        a.finish.set()
        await run_a
        took_over = await until(clock, b.leading)
        assert took_over - released <= 2.0 * 2.2 + 0.1
        b.finish.set()
        await run_b


async def test_a_leader_that_cannot_renew_stops_after_the_deadline(
        clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        await clock.tick(4.0)  # renewed at 2 and 4
        leases.unreachable.add("a")
        stopped = asyncio.Event()
        run.add_done_callback(lambda _: stopped.set())
        at = await until(clock, stopped)
        assert await run is False
    assert a.cancelled
    assert 14.0 <= at <= 14.1  # the last renewal (4 s) plus the renew deadline (10 s)
    assert [abs(t - at) < 0.06 for e, t in a.log if e == "stopped"] == [True]
    assert not a.elector.is_leader


async def test_a_leader_that_sees_another_holder_stops_at_once(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        stolen = copy.deepcopy(leases.leases["default", "lock"])
        stolen["spec"]["holderIdentity"] = "intruder"
        leases._store("intruder", stolen)
        await clock.tick(2.05)
        assert run.done()
        assert await run is False


async def test_racing_candidates_elect_exactly_one(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    candidates = [Candidate(leases, clock, f"c{i}") for i in range(5)]
    async with asyncio.TaskGroup() as group:
        runs = [group.create_task(c.elector.run(c.lead)) for c in candidates]
        await clock.tick(0)
        for _ in range(20):
            await clock.tick(1.0)
            assert sum(c.leading.is_set() for c in candidates) == 1
        for run in runs:
            run.cancel()
    creators = {who for who, spec in leases.writes if spec["leaseTransitions"] == 0}
    assert len(creators) == 1


async def test_a_fresh_candidate_waits_a_full_lease_duration(clock: FakeAsyncClock) -> None:
    """An old renewTime is not enough: the record must stay unchanged while watched."""
    leases = FakeLeases()
    stale = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "lock", "namespace": "default"},
             "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 15,
                      "renewTime": timeutil.format_micro_time(clock.now() - timedelta(hours=1)),
                      "leaseTransitions": 3}}
    leases._store("ghost", stale)
    b = Candidate(leases, clock, "b")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(b.elector.run(b.lead))
        took_over = await until(clock, b.leading)
        assert 15.0 <= took_over <= 15.0 + 2.0 * 2.2 + 0.1
        assert leases.spec()["leaseTransitions"] == 4
        run.cancel()


async def test_a_renew_time_in_the_future_delays_takeover(clock: FakeAsyncClock) -> None:
    """A holder whose clock runs ahead is not taken over before its renewTime + duration."""
    leases = FakeLeases()
    ahead = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "lock", "namespace": "default"},
             "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": 15,
                      "renewTime": timeutil.format_micro_time(clock.now()
                                                              + timedelta(seconds=30))}}
    leases._store("ghost", ahead)
    b = Candidate(leases, clock, "b")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(b.elector.run(b.lead))
        took_over = await until(clock, b.leading)
        assert 45.0 <= took_over <= 45.0 + 2.0 * 2.2 + 0.1
        run.cancel()


async def test_cancelling_a_leader_releases_when_configured(clock: FakeAsyncClock) -> None:
    leases = FakeLeases()
    a = Candidate(leases, clock, "a")
    async with asyncio.TaskGroup() as group:
        run = group.create_task(a.elector.run(a.lead))
        await until(clock, a.leading)
        run.cancel()
    assert a.cancelled
    assert leases.spec()["holderIdentity"] == ""


async def test_release_after_a_renewal_whose_answer_was_lost(clock: FakeAsyncClock) -> None:
    """A renewal that landed but whose answer never came (cancelled in flight) leaves the
    elector a stale resourceVersion: the release reads the Lease again and still releases
    it, while a Lease another holder has taken meanwhile is left alone."""
    leases = FakeLeases()
    a = le.LeaderElector(leases.for_("a"), config("a"), clock=clock)
    assert await a.try_acquire_or_renew()
    # "a"'s renewal, as the server stored it, unseen by "a"
    stored = leases.leases["default", "lock"]
    leases._store("a", {**stored, "spec": {**stored["spec"], "renewTime": "later"}})
    assert await a.release()
    assert leases.spec()["holderIdentity"] == ""
    assert leases.spec()["leaseDurationSeconds"] == 1
    # taken by "b" behind "a"'s back: "a" has nothing to release
    assert await a.try_acquire_or_renew()
    stored = leases.leases["default", "lock"]
    leases._store("b", {**stored, "spec": {**stored["spec"], "holderIdentity": "b"}})
    assert not await a.release()
    assert leases.spec()["holderIdentity"] == "b"


async def test_expiry_is_timed_from_the_local_observation(clock: FakeAsyncClock) -> None:
    """A Lease seen (by a watch) at t expires for this candidate at t + lease_duration, by
    its own clock, whatever the holder wrote; later unless the renewTime says later still;
    never for a Lease that is free or its own."""
    a = le.LeaderElector(FakeLeases().for_("a"), config("a"), clock=clock)
    assert a.expires_at() is None  # nothing seen yet

    def lease(holder: str, renewed: timedelta) -> dict[str, Any]:
        return {"metadata": {"name": "lock", "namespace": "default"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                         "renewTime": timeutil.format_micro_time(clock.now() + renewed)}}

    await clock.tick(3.0)
    ancient = lease("b", -timedelta(hours=1))  # the holder's clock says long ago
    a.note(ancient)
    assert a.expires_at() == pytest.approx(3.0 + 15.0)
    await clock.tick(5.0)
    a.note(ancient)  # unchanged: still timed from the change seen
    assert a.expires_at() == pytest.approx(3.0 + 15.0)
    a.note(lease("b", timedelta(seconds=0)))  # renewed: timed from now
    assert a.expires_at() == pytest.approx(8.0 + 15.0)
    a.note(lease("b", timedelta(seconds=30)))  # a renewTime ahead of us delays it
    assert a.expires_at() == pytest.approx(8.0 + 30.0 + 15.0)
    a.note(lease("", timedelta(seconds=0)))
    assert a.expires_at() is None
    a.note(lease("a", timedelta(seconds=0)))
    assert a.expires_at() is None
