"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Several replicas of a manager compete for one Lease; the one whose identity is in
``spec.holderIdentity`` leads and runs the controllers, the others wait (with warm caches).

How it works (client-go's ``leaderelection`` package):

- **Acquire**: every ``retry_period`` (jittered up to x2.2), read the Lease. Take it when it
  does not exist (create it), when ``holderIdentity`` is empty (released), or when it has
  **expired**: it has not changed for ``lease_duration`` as *this* process observed it
  (``monotonic()`` since the record was last seen to change, which tolerates clock skew
  between machines), **and** its ``renewTime + lease_duration`` is past by the injected
  clock's wall time. Taking it from another holder increments ``leaseTransitions``.
- **Renew**: the leader writes ``renewTime`` every ``retry_period``. Every write is an update
  carrying the ``resourceVersion`` read, so of two candidates racing for a free Lease exactly
  one wins (the other gets 409 Conflict and stays a follower).
- **Lose**: a leader that has not renewed successfully for ``renew_deadline`` (measured from
  its last successful renewal), or that sees another holder in the Lease, stops leading at
  once: ``lead()`` is cancelled and ``on_stopped_leading`` is called.
- **Release**: when ``lead()`` returns, or :meth:`LeaderElector.run` is cancelled while
  leading, and ``release_on_shutdown`` is set, the Lease is written with an empty holder and
  ``leaseDurationSeconds: 1``, so another candidate takes over at its next attempt instead of
  after ``lease_duration``. A release that meets 409 Conflict (a renewal of its own that
  landed unseen, its answer cancelled) reads the Lease once more and releases it if it is
  still this process's.

Timings default to client-go's (15 s / 10 s / 2 s) and are validated:
``lease_duration > renew_deadline > 1.2 x retry_period`` (1.2 being the jitter factor).
Times in the Lease are ``MicroTime`` (RFC 3339, six fractional digits).

Non-guarantees (as client-go states them):

- **No fencing.** Leadership is a belief, not a lock. A leader paused (stopped process, long
  GC, starved event loop) for longer than ``lease_duration - renew_deadline`` may act after
  another replica has taken over. Writes that must never interleave need their own guard
  (e.g. ``resourceVersion`` preconditions).
- Clock **skew** between machines is tolerated (expiry is judged by local observation as well
  as by ``renewTime``), but a skew larger than ``lease_duration`` delays takeover by the
  holder's lead; clock **rate** differences (one clock running faster) are not tolerated.
- The renewal loop must run: a blocked event loop cannot renew, and loses the lease.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import socket
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol

from setpoint import client as sp_client
from setpoint.apimachinery import errors, timeutil
from setpoint.runtime import clock as rtclock
from setpoint.runtime import deadlines
from setpoint.runtime import metrics as rtmetrics

logger = logging.getLogger(__name__)

Obj = Mapping[str, Any]

LEASE: Final = ("coordination.k8s.io/v1", "Lease")
#: client-go's JitterFactor for the acquire loop
JITTER_FACTOR: Final = 1.2


def default_identity() -> str:
    """``<hostname>_<random uuid>``, unique per process (as client-go's examples build it)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionConfig:
    """Which Lease to compete for, as whom, and how fast."""

    lease_name: str
    lease_namespace: str = "default"
    identity: str = field(default_factory=default_identity)
    #: how long a Lease stays valid after its last renewal, for the other candidates
    lease_duration: float = 15.0
    #: how long the leader keeps trying to renew before it gives up leading
    renew_deadline: float = 10.0
    #: the pause between attempts to acquire or renew
    retry_period: float = 2.0
    #: release the Lease on a graceful stop, so that a standby takes over at once
    release_on_shutdown: bool = True

    def __post_init__(self) -> None:
        if not self.lease_name or not self.lease_namespace:
            raise ValueError("leader election needs a lease name and namespace")
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if min(self.lease_duration, self.renew_deadline, self.retry_period) <= 0:
            raise ValueError("lease_duration, renew_deadline and retry_period must be positive")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period:
            raise ValueError(f"renew_deadline must be greater than {JITTER_FACTOR} x "
                             "retry_period")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election fields of a Lease's spec."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def of(cls, lease: Obj) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(str(spec.get("holderIdentity") or ""),
                   int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime"), spec.get("renewTime"),
                   int(spec.get("leaseTransitions") or 0))

    def spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder,
                "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.transitions}

    def renewed_at(self) -> datetime | None:
        if not self.renew_time:
            return None
        try:
            return timeutil.parse_time(self.renew_time)
        except ValueError:
            return None


class LeaseAPI(Protocol):
    """The three Lease calls an elector makes."""

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        """The Lease; raises ``NotFound``."""

    async def create(self, lease: Obj) -> dict[str, Any]:
        """Create the Lease; raises ``AlreadyExists``."""

    async def update(self, lease: Obj) -> dict[str, Any]:
        """Replace the Lease; raises ``Conflict`` when its ``resourceVersion`` is stale."""


class ClientLeaseAPI:
    """:class:`LeaseAPI` through a :class:`setpoint.client.Client`."""

    def __init__(self, client: sp_client.Client) -> None:
        self.client = client

    async def get(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.client.get(LEASE, name, namespace=namespace)

    async def create(self, lease: Obj) -> dict[str, Any]:
        return await self.client.create(lease)

    async def update(self, lease: Obj) -> dict[str, Any]:
        return await self.client.update(lease)


class LeaderElector:
    """Competes for one Lease and runs ``lead()`` while holding it; see the module docstring."""

    def __init__(self, api: LeaseAPI, config: LeaderElectionConfig, *,
                 clock: rtclock.AsyncClock | None = None, rng: random.Random | None = None,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 metrics: rtmetrics.MetricsRegistry | None = None) -> None:
        self.api = api
        self.config = config
        self._clock: rtclock.AsyncClock = clock or rtclock.SystemAsyncClock()
        self._rng = rng or random.Random()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._metrics = rtmetrics.LeaderMetrics(metrics or rtmetrics.MetricsRegistry(),
                                                config.lease_name)
        self._lease: dict[str, Any] | None = None  # the last Lease read or written
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # monotonic time the observed record last changed
        self._leading = False

    # --- observing ---------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        return self._leading

    @property
    def leader(self) -> str:
        """The holder last observed ("" when none)."""
        return self._observed.holder if self._observed else ""

    def _observe(self, lease: dict[str, Any]) -> LeaseRecord:
        record = LeaseRecord.of(lease)
        self._lease = lease
        if record != self._observed:
            previous = self.leader
            self._observed = record
            self._observed_at = self._clock.monotonic()
            if record.holder and record.holder != previous and self._on_new_leader:
                self._callback(self._on_new_leader, record.holder)
        return record

    def note(self, lease: dict[str, Any]) -> LeaseRecord:
        """Take a Lease seen elsewhere (a watch event) as observed now: its expiry is judged
        from the last change seen, exactly as after a read of our own."""
        return self._observe(lease)

    def expires_at(self) -> float | None:
        """The monotonic time at which the observed Lease, held by another, may be taken
        (the moment :meth:`try_acquire_or_renew` would judge it expired); None when it has
        no holder or is ours (nothing to wait for)."""
        record = self._observed
        if record is None or not record.holder or record.holder == self.identity:
            return None
        duration = self.config.lease_duration
        when = self._observed_at + duration
        renewed = record.renewed_at()
        if renewed is not None:
            left = (renewed + timedelta(seconds=duration) - self._clock.now()).total_seconds()
            when = max(when, self._clock.monotonic() + left)
        return when

    def _expired(self, record: LeaseRecord) -> bool:
        duration = self.config.lease_duration
        if self._clock.monotonic() < self._observed_at + duration:
            return False  # not unchanged long enough by our own clock
        renewed = record.renewed_at()
        return renewed is None or self._clock.now() >= renewed + timedelta(seconds=duration)

    # --- one attempt ---------------------------------------------------------------------

    def _record(self, *, holder: str, acquire_time: str | None, transitions: int,
                duration_seconds: int | None = None) -> LeaseRecord:
        now = timeutil.format_micro_time(self._clock.now())
        seconds = (duration_seconds if duration_seconds is not None
                   else max(1, math.ceil(self.config.lease_duration)))
        return LeaseRecord(holder, seconds, acquire_time or now, now, transitions)

    def _lease_body(self, record: LeaseRecord, base: Obj | None) -> dict[str, Any]:
        metadata = dict((base or {}).get("metadata") or {})
        metadata.update(name=self.config.lease_name, namespace=self.config.lease_namespace)
        body = {"apiVersion": LEASE[0], "kind": LEASE[1], "metadata": metadata}
        spec = dict((base or {}).get("spec") or {})
        spec.update(record.spec())
        body["spec"] = spec
        return body

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the Lease; True when this process holds it now."""
        c = self.config
        try:
            lease = await self.api.get(c.lease_namespace, c.lease_name)
        except errors.NotFound:
            record = self._record(holder=self.identity, acquire_time=None, transitions=0)
            try:
                created = await self.api.create(self._lease_body(record, None))
            except errors.Conflict:  # AlreadyExists: another candidate was first
                return False
            self._observe(created)
            return True
        record = self._observe(lease)
        ours = record.holder == self.identity
        if record.holder and not ours and not self._expired(record):
            return False
        if ours:
            new = self._record(holder=self.identity, acquire_time=record.acquire_time,
                               transitions=record.transitions)
        else:
            new = self._record(holder=self.identity, acquire_time=None,
                               transitions=record.transitions + 1)
        try:
            updated = await self.api.update(self._lease_body(new, lease))
        except errors.Conflict:
            return False
        self._observe(updated)
        return True

    async def observe(self) -> None:
        """Read the Lease and note whether it changed, without writing (a candidate that
        watches a Lease it does not want yet, so that its expiry is judged from the last
        change seen, not from the first read). ``NotFound`` when there is none."""
        c = self.config
        self._observe(await self.api.get(c.lease_namespace, c.lease_name))

    async def release(self) -> bool:
        """Give the Lease up (empty holder) if this process holds it; True on success."""
        c = self.config
        lease = self._lease
        if lease is None or LeaseRecord.of(lease).holder != self.identity:
            return False
        try:
            try:
                updated = await self._write_release(lease)
            except errors.Conflict:
                # a write of ours whose answer was not seen (a renewal cancelled in flight)
                # moved the Lease on: read it again and release that version, once
                lease = await self.api.get(c.lease_namespace, c.lease_name)
                if self._observe(lease).holder != self.identity:
                    return False
                updated = await self._write_release(lease)
        except Exception as e:
            logger.warning("could not release lease %s/%s: %s", c.lease_namespace,
                           c.lease_name, e)
            return False
        self._observe(updated)
        logger.info("released lease %s/%s", self.config.lease_namespace, self.config.lease_name)
        return True

    async def _write_release(self, lease: dict[str, Any]) -> dict[str, Any]:
        old = LeaseRecord.of(lease)
        record = self._record(holder="", acquire_time=None, transitions=old.transitions,
                              duration_seconds=1)
        return await self.api.update(self._lease_body(record, lease))

    # --- loops -------------------------------------------------------------------------

    async def _attempt(self, limit: float) -> bool:
        try:
            return await deadlines.wait_for(self.try_acquire_or_renew(), self._clock, limit)
        except TimeoutError:
            logger.info("lease %s: attempt timed out", self.config.lease_name)
        except (errors.ApiError, OSError) as e:
            logger.info("lease %s: attempt failed: %s", self.config.lease_name, e)
        return False

    async def acquire(self) -> None:
        """Return once this process holds the Lease (attempting every jittered retry period)."""
        c = self.config
        while not await self._attempt(c.renew_deadline):
            jitter = 1.0 + self._rng.random() * JITTER_FACTOR
            await rtclock.sleep(self._clock, c.retry_period * jitter)
        logger.info("%s acquired lease %s/%s", self.identity, c.lease_namespace, c.lease_name)

    async def _keep(self) -> None:
        """Renew every retry period; return when leadership is lost."""
        c = self.config
        last = self._clock.monotonic()
        while True:
            await rtclock.sleep(self._clock, c.retry_period)
            while True:
                remaining = last + c.renew_deadline - self._clock.monotonic()
                if remaining <= 0:
                    logger.warning("%s: failed to renew lease %s within %gs; stopping",
                                   self.identity, c.lease_name, c.renew_deadline)
                    return
                if await self._attempt(remaining):
                    last = self._clock.monotonic()
                    break
                if self.leader and self.leader != self.identity:
                    logger.warning("%s: lease %s is now held by %s; stopping", self.identity,
                                   c.lease_name, self.leader)
                    return
                await rtclock.sleep(self._clock, min(c.retry_period, remaining))

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> bool:
        """Acquire the Lease, then run ``lead()`` while renewing it.

        Returns True when ``lead()`` returned (the Lease is then released if configured) and
        False when leadership was lost (``lead()`` was cancelled). Cancelling ``run`` while
        leading cancels ``lead()`` and releases the Lease if configured. An exception from
        ``lead()`` propagates (in an ``ExceptionGroup``).
        """
        await self.acquire()
        self._set_leading(True)
        completed = False
        lost = False
        try:
            async with asyncio.TaskGroup() as group:
                work = group.create_task(lead(), name=f"lead {self.config.lease_name}")
                keeper = group.create_task(self._keep(), name=f"renew {self.config.lease_name}")
                await asyncio.wait({work, keeper}, return_when=asyncio.FIRST_COMPLETED)
                if keeper.done():
                    lost = True
                    work.cancel()
                else:
                    keeper.cancel()
            completed = work.done() and not work.cancelled()
        finally:
            self._set_leading(False)
            if not lost and self.config.release_on_shutdown:
                # bounded: a shutdown must not hang on an unreachable server
                try:
                    await deadlines.wait_for(self.release(), self._clock,
                                             self.config.retry_period)
                except TimeoutError:
                    logger.warning("releasing lease %s timed out", self.config.lease_name)
        return completed

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        self._metrics.set_leading(leading)
        callback = self._on_started if leading else self._on_stopped
        if callback is not None:
            self._callback(callback)

    @staticmethod
    def _callback(func: Callable[..., None], *args: str) -> None:
        try:
            func(*args)
        except Exception:
            logger.exception("a leader election callback failed")
