"""The node's registration and heartbeats: its Node object and its Lease.

As the kubelet does:

* at start the agent **registers** its Node (:func:`~setpoint.node.machine.node_object`):
  created if missing; if it exists (an agent restarted), its labels are brought up to date
  and its status replaced;
* it **renews its Lease** ``kube-node-lease/<node>`` every ``renew_interval`` seconds (10 s,
  the kubelet's: a quarter of the 40 s ``leaseDurationSeconds``), ``holderIdentity`` the node,
  owned by the Node (deleting the Node deletes the Lease);
* it **reports the Node's status** every ``status_interval`` seconds (capacity, conditions
  with ``lastHeartbeatTime``, addresses, nodeInfo), and at once when a condition changes.

A Node deleted while the agent runs is registered again at the next report. Failures are
logged and retried at the next tick; they never stop the agent. Time is the injected clocks'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors, timeutil
from setpoint.apimachinery.clock import Clock, SystemClock
from setpoint.node import machine
from setpoint.runtime import clock as rtclock

log = logging.getLogger(__name__)

Obj = dict[str, Any]

LEASE_NAMESPACE: Final = "kube-node-lease"
LEASE: Final = ("coordination.k8s.io/v1", "Lease")
NODE: Final = ("v1", "Node")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatConfig:
    lease_duration: int = 40
    renew_interval: float = 10.0
    status_interval: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.renew_interval < self.lease_duration:
            raise ValueError("renew_interval must be positive and below lease_duration")
        if self.status_interval <= 0:
            raise ValueError("status_interval must be positive")


class Heartbeat:
    """Registers the node, then keeps its Lease and status fresh; ``run()`` until cancelled."""

    def __init__(self, client: sp_client.Client, identity: machine.NodeIdentity,
                 sample: Callable[[], machine.MachineFacts], config: HeartbeatConfig, *,
                 clock: runtime.AsyncClock | None = None, wall: Clock | None = None) -> None:
        self.client = client
        self.identity = identity
        self.sample = sample
        self.config = config
        self.clock: runtime.AsyncClock = clock or runtime.SystemAsyncClock()
        self.wall = wall or SystemClock()
        self.node_uid = ""
        self._status: Obj = {}
        self._lease: Obj | None = None
        self.registered = asyncio.Event()
        self.renewals = 0

    @property
    def name(self) -> str:
        return self.identity.name

    async def register(self) -> Obj:
        facts = await asyncio.to_thread(self.sample)
        node = machine.node_object(self.identity, facts, self.wall.now())
        try:
            stored = await self.client.create(node)
        except errors.AlreadyExists:
            stored = await self.client.patch(NODE, self.name, {"metadata": {
                "labels": machine.node_labels(self.identity, facts)}})
            stored = await self.client.patch_status(NODE, self.name,
                                                    {"status": node["status"]})
        self.node_uid = str(stored["metadata"]["uid"])
        self._status = stored.get("status") or node["status"]
        self.registered.set()
        log.info("registered node %s", self.name)
        return stored

    async def run(self) -> None:
        while not self.registered.is_set():
            try:
                await self.register()
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.warning("registering node %s failed (will retry): %s", self.name, e)
                await rtclock.sleep(self.clock, self.config.renew_interval)
        async with asyncio.TaskGroup() as group:
            group.create_task(self._leases(), name="node lease")
            group.create_task(self._reports(), name="node status")

    async def _leases(self) -> None:
        while True:
            try:
                await self.renew()
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.warning("renewing the lease of node %s failed: %s", self.name, e)
                self._lease = None
            await rtclock.sleep(self.clock, self.config.renew_interval)

    async def renew(self) -> Obj:
        """Renew (or create) the node's Lease."""
        now = timeutil.format_micro_time(self.wall.now())
        if self._lease is not None:
            lease = {**self._lease, "spec": {**self._lease.get("spec", {}), "renewTime": now,
                                             "holderIdentity": self.name,
                                             "leaseDurationSeconds":
                                                 self.config.lease_duration}}
            try:
                self._lease = await self.client.update(lease)
                self.renewals += 1
                return self._lease
            except (errors.Conflict, errors.NotFound):
                self._lease = None
        try:
            self._lease = await self.client.get(LEASE, self.name, namespace=LEASE_NAMESPACE)
            return await self.renew()
        except errors.NotFound:
            pass
        owner = [{"apiVersion": "v1", "kind": "Node", "name": self.name,
                  "uid": self.node_uid}] if self.node_uid else []
        self._lease = await self.client.create({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE,
                         "ownerReferences": owner},
            "spec": {"holderIdentity": self.name,
                     "leaseDurationSeconds": self.config.lease_duration,
                     "renewTime": now}})
        self.renewals += 1
        return self._lease

    async def _reports(self) -> None:
        while True:
            await rtclock.sleep(self.clock, self.config.status_interval)
            try:
                await self.report()
            except (TimeoutError, errors.ApiError, OSError) as e:
                log.warning("reporting the status of node %s failed: %s", self.name, e)

    async def report(self) -> Obj:
        """Write the node's current status (registering it again if it was deleted)."""
        facts = await asyncio.to_thread(self.sample)
        status = machine.node_status(self.identity, facts, self.wall.now(), self._status)
        try:
            stored = await self.client.patch_status(NODE, self.name, {"status": status})
        except errors.NotFound:
            log.info("node %s was deleted: registering it again", self.name)
            self.registered.clear()
            stored = await self.register()
        self._status = stored.get("status") or status
        return stored
