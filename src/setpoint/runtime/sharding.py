"""Sharded active-active controllers: N replicas split the keys, one Lease per shard.

Leader election runs a controller in one replica at a time; the others only wait. With
sharding, every replica reconciles, each its own part of the keys:

- **Keys to shards** are fixed: ``shard_of(key) = sha256(key) mod shards`` (``shards``
  Leases, ``<name>-shard-<i>``, in ``namespace``). The number of shards bounds the number of
  useful replicas; keep it well above the replica count (default 16).
- **Shards to replicas** by rendezvous hashing over the live members: each replica keeps a
  membership Lease ``<name>-member-<hash of its identity>`` (labelled
  ``setpoint.dev/shard-group=<name>``) renewed every ``retry_period``, after its shard
  Leases. A member is live while its membership Lease changed less than
  ``lease_duration`` ago by *this* replica's monotonic clock (and its ``renewTime +
  leaseDurationSeconds`` is in the future). The shard ``s`` belongs to the live member with
  the highest ``sha256(s, identity)``, so a replica that joins takes about ``1/N`` of the
  shards from the others and one that leaves gives its shards to the rest, spread evenly,
  and no other shard moves.
- **Owning a shard** is holding its Lease, with leader election's rules
  (:class:`~setpoint.runtime.leaderelection.LeaderElector`): a free or released Lease is
  taken at once, another holder's only once *this* replica has seen it unchanged for
  ``lease_duration`` (by its own monotonic clock) and its ``renewTime`` is that old. A
  replica gives up a shard that rendezvous hashing now gives to another (a join): it stops
  reconciling its keys first, then releases the Lease.
- **Watching, not polling**: each replica watches the Leases of its namespace (an
  :class:`~setpoint.runtime.informer.Informer`). Every change seen restarts that Lease's
  expiry by the local clock, and a timer wakes the replica just after a Lease held by
  another (or a membership) would expire, for a round that takes what is now its own. A
  released shard Lease, a membership that appears or is deleted, also wake it. So a dead
  replica's shards are taken ``lease_duration`` after the survivors saw its last renewal,
  plus the watch's delivery and one woken round's Lease calls; a replica stopped gracefully
  releases its shards and deletes its membership, and the others take them at once. The
  periodic round (every ``retry_period``, jittered up to x1.2) renews the held shards and
  the membership: ``2 x held + 2`` calls; a woken round reads and writes only the shards
  it wants that are free or whose expiry has come (the others wait for their timers).
- A replica that acquires a shard enqueues every cached key of it (trigger ``initial``):
  whatever its previous owner left unfinished is reconciled.

**Fencing**: each shard has a *fence*, ``t0 + lease_duration - skew_margin``, ``t0`` being
the monotonic time just *before* the last successful acquire or renew was sent. A key is
handed to a reconcile only while its shard is held and its fence is in the future; when the
fence passes without a renewal, or the shard is lost or given up, the reconciles of its keys
still running are **cancelled**. Another replica can take the Lease only after it has seen
the renewal land (after ``t0``) and then ``lease_duration`` of its own time pass; so, with
clocks that run at the same *rate* (offsets between machines do not matter: all expiry is
measured on local monotonic clocks), the takeover comes at least ``skew_margin`` after this
replica stopped reconciling that shard.

What is guaranteed: no two replicas *run* reconciles of one key at the same time, given
clock rates that differ by less than ``skew_margin / lease_duration`` and an event loop that
runs the fence timers no later than ``skew_margin`` after they are due. What is not: a write
a cancelled reconcile already sent may still land after the takeover (cancellation cannot
unsend it: make writes conditional on ``resourceVersion`` where it matters); a blocking
(thread) reconcile cannot be cancelled at all, so sharding refuses controllers with one; a
replica whose loop stalls longer than ``skew_margin`` breaks the guarantee (as with leader
election, there is no lock, only a lease). Between a replica's death and the takeover its
shards are reconciled by nobody (``lease_duration`` plus the delivery of a watch event and
one round's calls). A replica that cannot watch (the watch is retried with backoff) sees no
expiry, so it takes nothing over until its watch is back; nothing is taken before the first
list of Leases has arrived (or a starting replica would see itself alone).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from setpoint import client as sp_client
from setpoint.apimachinery import errors, timeutil
from setpoint.runtime import clock as rtclock
from setpoint.runtime import informer as rtinformer
from setpoint.runtime import informercache as rtcache
from setpoint.runtime import leaderelection

logger = logging.getLogger(__name__)

#: the label of membership Leases (its value: the shard group's name)
GROUP_LABEL: Final = "setpoint.dev/shard-group"
#: the most shards a group may have
MAX_SHARDS: Final = 1024
#: a wake-up for an expiry comes this long after it (so the expiry is past when checked)
EXPIRY_EPSILON: Final = 0.001
#: a woken round waits this long first, so that a burst of watch events makes one round
MIN_WOKEN_GAP: Final = 0.005
#: the Lease resource (the coordinator watches its namespace's Leases)
LEASE_REF: Final = sp_client.ResourceRef(group="coordination.k8s.io", version="v1",
                                        resource="leases", kind="Lease", namespaced=True)

Obj = Mapping[str, Any]


def shard_of(key: str, shards: int) -> int:
    """The shard of a key (``namespace/name``): stable across processes and versions."""
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def rendezvous_owner(shard: int, members: list[str] | set[str] | tuple[str, ...]) -> str:
    """The member a shard belongs to: the highest ``sha256(shard, member)``."""
    if not members:
        raise ValueError("no members")
    return max(members, key=lambda m: (hashlib.sha256(f"{shard}\x00{m}".encode()).digest(), m))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingConfig:
    """A shard group: its Leases and timings (leader election's, per shard)."""

    name: str
    namespace: str = "default"
    identity: str = field(default_factory=leaderelection.default_identity)
    shards: int = 16
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: how much earlier than the Lease's expiry this replica stops reconciling a shard
    skew_margin: float = 2.0
    #: release the Leases on a graceful stop, so the others take over at once
    release_on_shutdown: bool = True

    def __post_init__(self) -> None:
        if not self.name or not self.namespace or not self.identity:
            raise ValueError("sharding needs a name, a namespace and an identity")
        if len(self.name) > 40:
            raise ValueError("a shard group name is at most 40 characters")
        if not 1 <= self.shards <= MAX_SHARDS:
            raise ValueError(f"shards must be in [1, {MAX_SHARDS}]")
        # the same checks as leader election's
        self.election("x")
        if not 0 < self.skew_margin < self.lease_duration - self.retry_period:
            raise ValueError("need 0 < skew_margin < lease_duration - retry_period")

    def election(self, lease_name: str) -> leaderelection.LeaderElectionConfig:
        return leaderelection.LeaderElectionConfig(
            lease_name=lease_name, lease_namespace=self.namespace, identity=self.identity,
            lease_duration=self.lease_duration, renew_deadline=self.renew_deadline,
            retry_period=self.retry_period, release_on_shutdown=self.release_on_shutdown)

    def shard_lease(self, shard: int) -> str:
        return f"{self.name}-shard-{shard}"

    def member_lease(self, identity: str) -> str:
        return f"{self.name}-member-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


class ShardCoordinator:
    """Keeps this replica's membership and shard Leases; see the module docstring.

    :meth:`owns` says whether a key may be reconciled now; :meth:`enter` and
    :meth:`leave` bracket a reconcile, which is cancelled when its shard is lost in
    between. ``on_acquired(shard)`` is called when a shard is taken (to enqueue its keys).
    """

    def __init__(self, client: sp_client.Client, config: ShardingConfig, *,
                 clock: rtclock.AsyncClock | None = None, rng: random.Random | None = None,
                 on_acquired: Callable[[int], None] | None = None,
                 on_held: Callable[[int], None] | None = None) -> None:
        self.client = client
        self.config = config
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._rng = rng or random.Random()
        self.on_acquired = on_acquired
        #: called with the number of shards held whenever it changes (budgets follow it)
        self.on_held = on_held
        api = leaderelection.ClientLeaseAPI(client)
        self._electors = [leaderelection.LeaderElector(api, config.election(
            config.shard_lease(s)), clock=self._clock, rng=self._rng)
            for s in range(config.shards)]
        #: shard -> monotonic fence time, for the shards held now
        self._fences: dict[int, float] = {}
        self._timers: dict[int, rtclock.Timer] = {}
        self._running: dict[int, set[asyncio.Task[Any]]] = {}
        self.members: list[str] = [config.identity]
        self._shard_names = {config.shard_lease(s): s for s in range(config.shards)}
        #: membership Lease name -> (its record, monotonic time it was seen to change)
        self._member_seen: dict[str, tuple[leaderelection.LeaseRecord, float]] = {}
        self._member_timers: dict[str, rtclock.Timer] = {}
        self._expiry_timers: dict[int, rtclock.Timer] = {}
        self._woken = asyncio.Event()
        #: (monotonic time, event, shard) of acquisitions and losses, the last 1000
        self.log: list[tuple[float, str, int]] = []

    # --- asking ------------------------------------------------------------------------

    @property
    def held(self) -> list[int]:
        """The shards this replica may reconcile now."""
        now = self._clock.monotonic()
        return sorted(s for s, fence in self._fences.items() if fence > now)

    def shard(self, key: str) -> int:
        return shard_of(key, self.config.shards)

    def owns(self, key: str) -> bool:
        fence = self._fences.get(self.shard(key))
        return fence is not None and fence > self._clock.monotonic()

    def enter(self, key: str, task: asyncio.Task[Any]) -> bool:
        """Before reconciling ``key`` in ``task``: False when its shard is not held now;
        otherwise ``task`` is cancelled if the shard is lost before :meth:`leave`."""
        if not self.owns(key):
            return False
        self._running.setdefault(self.shard(key), set()).add(task)
        return True

    def leave(self, key: str, task: asyncio.Task[Any]) -> None:
        running = self._running.get(self.shard(key))
        if running is not None:
            running.discard(task)

    # --- holding -------------------------------------------------------------------------

    def _set_fence(self, shard: int, started: float) -> None:
        fence = started + self.config.lease_duration - self.config.skew_margin
        newly = shard not in self._fences
        self._fences[shard] = fence
        old = self._timers.pop(shard, None)
        if old is not None:
            old.cancel()
        self._timers[shard] = self._clock.call_at(fence, lambda: self._drop(shard, "fenced"))
        if newly:
            self._held_changed()
            self._note("acquired", shard)
            logger.info("%s acquired shard %d of %s", self.config.identity, shard,
                        self.config.name)
            if self.on_acquired is not None:
                try:
                    self.on_acquired(shard)
                except Exception:
                    logger.exception("enqueueing the keys of shard %d failed", shard)

    def _drop(self, shard: int, why: str) -> None:
        """Stop reconciling ``shard`` at once: no new keys, running reconciles cancelled."""
        if self._fences.pop(shard, None) is None:
            return
        timer = self._timers.pop(shard, None)
        if timer is not None:
            timer.cancel()
        for task in self._running.pop(shard, set()):
            task.cancel()
        self._held_changed()
        self._note(why, shard)
        logger.info("%s stopped reconciling shard %d of %s (%s)", self.config.identity, shard,
                    self.config.name, why)

    def _held_changed(self) -> None:
        if self.on_held is not None:
            try:
                self.on_held(len(self._fences))
            except Exception:
                logger.exception("a shard count callback failed")

    def _note(self, event: str, shard: int) -> None:
        self.log.append((self._clock.monotonic(), event, shard))
        del self.log[:-1000]

    # --- watching ----------------------------------------------------------------------

    def _seen(self, lease: Obj) -> None:
        """A Lease of the namespace as the watch delivers it (added, changed, relisted)."""
        metadata = lease.get("metadata") or {}
        name = str(metadata.get("name") or "")
        shard = self._shard_names.get(name)
        if shard is not None:
            elector = self._electors[shard]
            record = elector.note(dict(lease))
            self._arm(self._expiry_timers, shard, elector.expires_at())
            if not record.holder and shard not in self._fences:
                self._wake()  # released: whoever it belongs to takes it at once
            return
        if (metadata.get("labels") or {}).get(GROUP_LABEL) != self.config.name:
            return
        record = leaderelection.LeaseRecord.of(lease)
        before = self._member_seen.get(name)
        if before is None or before[0] != record:
            now = self._clock.monotonic()
            self._member_seen[name] = (record, now)
            self._arm(self._member_timers, name, now + self.config.lease_duration)
        if record.holder not in self.members:
            self._wake()  # a replica joined: rebalance now

    def _gone(self, lease: Obj) -> None:
        name = str((lease.get("metadata") or {}).get("name") or "")
        if self._member_seen.pop(name, None) is not None:
            timer = self._member_timers.pop(name, None)
            if timer is not None:
                timer.cancel()
            self._wake()  # a replica left: its shards are free or will be
        elif name in self._shard_names:
            self._wake()

    def _arm(self, timers: dict[Any, rtclock.Timer], key: Any, when: float | None) -> None:
        """(Re)schedule a wake-up for ``key`` just after ``when`` (none when None)."""
        old = timers.pop(key, None)
        if old is not None:
            old.cancel()
        if when is not None:
            timers[key] = self._clock.call_at(when + EXPIRY_EPSILON, self._wake)

    def _wake(self) -> None:
        self._woken.set()

    def _live_members(self) -> list[str]:
        """This replica and every member whose membership Lease changed less than
        ``lease_duration`` ago by this replica's clock (and whose ``renewTime`` is not that
        old either)."""
        c = self.config
        mono = self._clock.monotonic()
        now = self._clock.now()
        live = {c.identity}
        for record, seen in self._member_seen.values():
            renewed = record.renewed_at()
            if record.holder and seen + c.lease_duration > mono and renewed is not None and \
                    renewed + timedelta(seconds=record.lease_duration_seconds) > now:
                live.add(record.holder)
        return sorted(live)

    # --- membership ----------------------------------------------------------------------

    async def _renew_membership(self) -> None:
        c = self.config
        name = c.member_lease(c.identity)
        spec = {"holderIdentity": c.identity,
                "leaseDurationSeconds": max(1, int(c.lease_duration + 0.999)),
                "renewTime": timeutil.format_micro_time(self._clock.now())}
        try:
            lease = await self.client.get(leaderelection.LEASE, name, namespace=c.namespace)
        except errors.NotFound:
            await self.client.create({
                "apiVersion": leaderelection.LEASE[0], "kind": leaderelection.LEASE[1],
                "metadata": {"name": name, "namespace": c.namespace,
                             "labels": {GROUP_LABEL: c.name}}, "spec": spec})
            return
        lease = dict(lease)
        lease["spec"] = {**(lease.get("spec") or {}), **spec}
        await self.client.update(lease)

    # --- the loop ------------------------------------------------------------------------

    async def _round(self, *, renew: bool) -> None:
        """One pass over the shards. ``renew``: the periodic round (membership and every
        held shard renewed); otherwise a woken one, which only takes the shards that are now
        this replica's and gives up the ones that are not."""
        c = self.config
        self.members = self._live_members()
        for shard, elector in enumerate(self._electors):
            wanted = rendezvous_owner(shard, self.members) == c.identity
            held = shard in self._fences
            if held and not wanted:
                self._drop(shard, "handed over")
                await self._release(elector)
                continue
            if not wanted or (held and not renew):
                continue
            if not renew and not held:
                due = elector.expires_at()
                if due is not None and due > self._clock.monotonic():
                    continue  # the watch shows it held and not yet expired: its timer wakes us
            started = self._clock.monotonic()
            try:
                ok = await elector.try_acquire_or_renew()
            except (errors.ApiError, OSError) as e:
                logger.info("%s: shard %d attempt failed: %s", c.identity, shard, e)
                continue  # the fence decides when a held shard must stop
            if ok:
                self._set_fence(shard, started)
            elif held:
                self._drop(shard, "lost")
        if renew:
            # last: a replica that dies within a round has renewed its membership after
            # every shard Lease it renewed in the rounds before, so its membership never
            # outlives those Leases by more than one round's calls (the others take a shard
            # only once both have expired)
            try:
                await self._renew_membership()
            except (errors.ApiError, OSError) as e:
                logger.info("%s: membership of %s failed: %s", c.identity, c.name, e)

    async def _release(self, elector: leaderelection.LeaderElector) -> None:
        try:
            await elector.release()
        except (errors.ApiError, OSError) as e:
            logger.info("releasing %s failed: %s", elector.config.lease_name, e)

    async def _wait_until(self, when: float) -> None:
        """Sleep until ``when`` (monotonic) or until woken, whichever comes first."""
        timer = self._clock.call_at(when, self._wake)
        try:
            await self._woken.wait()
        finally:
            timer.cancel()

    async def run(self) -> None:
        """Keep the Leases until cancelled; then stop every shard and, when configured,
        release them and the membership."""
        c = self.config
        informer = rtinformer.Informer(
            rtinformer.ClientListWatcher(self.client, LEASE_REF, namespace=c.namespace),
            clock=self._clock, rng=random.Random(self._rng.random()),
            name=f"leases of shard group {c.name}")
        subscription = informer.cache.subscribe(rtcache.Handlers(
            add=self._seen, update=lambda _old, new: self._seen(new), delete=self._gone))
        try:
            async with asyncio.TaskGroup() as group:
                watching = group.create_task(informer.run(), name=f"leases {c.name}")
                try:
                    # membership is judged from the watch: nothing is taken before it has
                    # listed the Leases (or this replica would see itself alone)
                    await informer.cache.wait_synced()
                    next_renew = self._clock.monotonic()
                    while True:
                        self._woken.clear()
                        renew = self._clock.monotonic() >= next_renew
                        await self._round(renew=renew)
                        if renew:
                            jitter = 1.0 + self._rng.random() * 0.2
                            next_renew = self._clock.monotonic() + c.retry_period * jitter
                        await self._wait_until(next_renew)
                        if self._clock.monotonic() < next_renew:
                            # woken: let a burst of watch events make one round
                            await rtclock.sleep(self._clock, MIN_WOKEN_GAP)
                finally:
                    watching.cancel()
        finally:
            subscription.cancel()
            for timers in (self._expiry_timers, self._member_timers):
                for timer in timers.values():
                    timer.cancel()
                timers.clear()
            held = list(self._fences)
            for shard in held:
                self._drop(shard, "stopped")
            # and any whose acquisition landed unseen but was shown by the watch
            held += [s for s, e in enumerate(self._electors)
                     if s not in held and e.leader == c.identity]
            if c.release_on_shutdown:
                await asyncio.shield(self._shutdown(held))

    async def _shutdown(self, held: list[int]) -> None:
        c = self.config
        for shard in held:
            await self._release(self._electors[shard])
        try:
            await self.client.delete(leaderelection.LEASE, c.member_lease(c.identity),
                                     namespace=c.namespace)
        except (errors.ApiError, OSError) as e:
            logger.info("deleting the membership of %s failed: %s", c.identity, e)
