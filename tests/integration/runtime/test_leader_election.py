"""Two managers, one Lease: only the leader reconciles; the other takes over when it stops."""

from __future__ import annotations

import asyncio
import time

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


async def run_pair(server: Server, client: Client, *, release: bool) -> float:
    """Start a leader and a standby, stop the leader; returns the takeover delay."""
    await install_books(client)
    seen: list[tuple[str, str]] = []
    first = replica(server, "first", seen, release=release)
    second = replica(server, "second", seen, release=release)
    try:
        async with asyncio.TaskGroup() as group:
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
            await asyncio.sleep(0.5)  # the standby keeps watching the Lease being renewed
            assert {who for who, _ in seen} == {"first"}

            run_first.cancel()  # a graceful stop; without release, as abrupt as a crash
            stopped = time.monotonic()
            await asyncio.wait({run_first})
            await eventually(lambda: second.is_leader, timeout=5)
            takeover = time.monotonic() - stopped
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
        return takeover
    finally:
        await first.client.close()
        await second.client.close()


async def test_the_standby_takes_over_after_the_lease_expires(server: Server,
                                                              client: Client) -> None:
    takeover = await run_pair(server, client, release=False)
    print(f"\nunreleased lease taken over after {takeover:.2f}s")
    # not before the lease (2 s) has gone unrenewed, give or take the last renewal (0.2 s);
    # within it plus the standby's polling (twice 0.2 s x 2.2 at most)
    assert 1.7 <= takeover <= 2.0 + 2 * 0.44 + 0.3


async def test_a_released_lease_is_taken_over_at_once(server: Server, client: Client) -> None:
    takeover = await run_pair(server, client, release=True)
    print(f"\nreleased lease taken over after {takeover:.2f}s")
    assert takeover < 1.0


async def test_losing_the_lease_stops_the_controllers(server: Server, client: Client) -> None:
    await install_books(client)
    seen: list[tuple[str, str]] = []
    manager = replica(server, "only", seen, release=True)
    try:
        async with asyncio.TaskGroup() as group:
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
            await asyncio.sleep(0.5)
            assert len(seen) == lost_at  # no controller runs while another holds the Lease
            # the intruder never renews: the Lease expires and the manager leads again
            await eventually(lambda: manager.is_leader, timeout=5)
            await eventually(lambda: ("only", "two") in seen)
            lease = await client.get(LEASE, "library-lock")
            assert lease["spec"]["holderIdentity"] == "only"
            assert lease["spec"]["leaseTransitions"] == 1
            manager.stop()
            await asyncio.wait({run})
    finally:
        await manager.client.close()
