"""Two managers, one Lease: only the leader reconciles; the other takes over when it stops."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import aiohttp

from setpoint.client import Client
from setpoint.runtime import Context, Controller, LeaderElectionConfig, Manager, Request, Result
from setpoint.server.server import Server

from .conftest import BOOK, book, eventually, install_books, make_client

LEASE = ("coordination.k8s.io/v1", "Lease")


def election(identity: str, *, release: bool) -> LeaderElectionConfig:
    return LeaderElectionConfig(lease_name="library-lock", identity=identity,
                                lease_duration=2.0, renew_deadline=1.5, retry_period=0.2,
                                release_on_shutdown=release)


def replica(server: Server, identity: str, seen: list[tuple[str, str]], *,
            release: bool) -> Manager:
    async def reconcile(request: Request, ctx: Context) -> Result:
        seen.append((identity, request.name))
        return Result.done()

    return Manager(make_client(server), [Controller(for_=BOOK, reconcile=reconcile)],
                   leader_election=election(identity, release=release), health_port=0,
                   metrics_port=0)


def micro_time(value: str) -> datetime.datetime:
    return datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


async def record_lease(client: Client, history: list[dict[str, Any]]) -> None:
    """Append the spec of every version of the Lease, in order, until cancelled."""
    async with client.watch(LEASE, namespace="default",
                            field_selector="metadata.name=library-lock") as events:
        async for event in events:
            if event.type in ("ADDED", "MODIFIED"):
                history.append(dict(event.object["spec"]))


async def run_pair(server: Server, client: Client, *, release: bool) -> list[dict[str, Any]]:
    """Start a leader and a standby, stop the leader; returns every version of the Lease's
    spec from the first leader's first renewal to the standby's takeover."""
    await install_books(client)
    seen: list[tuple[str, str]] = []
    history: list[dict[str, Any]] = []
    first = replica(server, "first", seen, release=release)
    second = replica(server, "second", seen, release=release)
    try:
        async with asyncio.TaskGroup() as group:
            recorder = group.create_task(record_lease(client, history))
            run_first = group.create_task(first.run())
            await eventually(lambda: first.is_leader)
            run_second = group.create_task(second.run())
            await eventually(lambda: second.ready)
            assert not second.is_leader
            async with aiohttp.ClientSession() as http:
                assert second.health_url is not None
                async with http.get(second.health_url + "/readyz") as r:
                    assert r.status == 200  # ready with warm caches, though not leading
                assert second.metrics_url is not None
                async with http.get(second.metrics_url + "/metrics") as r:
                    assert 'leader_election_master_status{name="library-lock"} 0' in (
                        await r.text()).splitlines()
            await client.create(book("one"))
            await eventually(lambda: ("first", "one") in seen)
            # the standby, ready with warm caches, watches the leader renew three times more
            # and reconciles nothing meanwhile
            renewals = len(history)
            await eventually(lambda: len(history) >= renewals + 3)
            assert {who for who, _ in seen} == {"first"}

            run_first.cancel()  # a graceful stop; without release, as abrupt as a crash
            await asyncio.wait({run_first})
            await eventually(lambda: second.is_leader)
            await eventually(lambda: any(h.get("holderIdentity") == "second" for h in history))
            await client.create(book("two"))
            await eventually(lambda: ("second", "two") in seen)
            assert ("second", "one") in seen  # the new leader reconciles everything once
            assert ("first", "two") not in seen
            lease = await client.get(LEASE, "library-lock")
            assert lease["spec"]["holderIdentity"] == "second"
            assert lease["spec"]["leaseTransitions"] == 1
            assert lease["spec"]["leaseDurationSeconds"] == 2
            renew = lease["spec"]["renewTime"]
            assert len(renew.split(".")[1]) == len("000000Z")  # MicroTime: six digits
            second.stop()
            await asyncio.wait({run_second})
            recorder.cancel()
        return history
    finally:
        await first.client.close()
        await second.client.close()


async def test_the_standby_takes_over_after_the_lease_expires(server: Server,
                                                              client: Client) -> None:
    history = await run_pair(server, client, release=False)
    holders = [h["holderIdentity"] for h in history]
    last_renewal = max(i for i, holder in enumerate(holders) if holder == "first")
    takeover = holders.index("second")
    assert takeover == last_renewal + 1  # nobody in between: the lease was never released
    # the standby took it only once the leader's last renewal was a lease duration old, as
    # the Lease's own timestamps show
    silent = (micro_time(history[takeover]["acquireTime"])
              - micro_time(history[last_renewal]["renewTime"]))
    assert silent >= datetime.timedelta(seconds=history[last_renewal]["leaseDurationSeconds"])


async def test_a_released_lease_is_taken_over_without_waiting_for_it_to_expire(
        server: Server, client: Client) -> None:
    history = await run_pair(server, client, release=True)
    holders = [h["holderIdentity"] for h in history]
    # the leader gave the lease up on its way out, and the standby took it from there
    # without waiting for it to expire
    takeover = holders.index("second")
    assert holders[takeover - 1] == ""
    assert holders[takeover - 2] == "first"
    # what lets it: a released Lease says it lasts one second, not the leader's two
    assert history[takeover - 1]["leaseDurationSeconds"] == 1
    assert history[takeover]["leaseTransitions"] == history[takeover - 2]["leaseTransitions"] + 1


async def test_losing_the_lease_stops_the_controllers(server: Server, client: Client) -> None:
    await install_books(client)
    seen: list[tuple[str, str]] = []
    history: list[dict[str, Any]] = []
    manager = replica(server, "only", seen, release=True)
    try:
        async with asyncio.TaskGroup() as group:
            recorder = group.create_task(record_lease(client, history))
            run = group.create_task(manager.run())
            await eventually(lambda: manager.is_leader)
            await client.create(book("one"))
            await eventually(lambda: ("only", "one") in seen)
            lease = await client.get(LEASE, "library-lock")
            lease["spec"]["holderIdentity"] = "intruder"  # another replica took it over
            await client.update(lease)
            await eventually(lambda: not manager.is_leader, timeout=2)
            lost_at = len(seen)
            await client.create(book("two"))
            # the intruder never renews: the Lease expires and the manager leads again
            await eventually(lambda: manager.is_leader)
            await eventually(lambda: ("only", "two") in seen)
            # and only then reconciles what was created while another held the Lease
            holders = [h["holderIdentity"] for h in history]
            assert holders[-1] == "only"
            assert "intruder" in holders
            assert sorted(seen[lost_at:]) == [("only", "one"), ("only", "two")]
            lease = await client.get(LEASE, "library-lock")
            assert lease["spec"]["holderIdentity"] == "only"
            assert lease["spec"]["leaseTransitions"] == 1
            manager.stop()
            await asyncio.wait({run})
            recorder.cancel()
    finally:
        await manager.client.close()
