"""Cluster IPs and node ports of Services: allocated from ranges, reserved in storage.

Every address or port a Service holds has a reservation key in storage, created with
create-if-absent before the Service is written:
``/registry/networking.k8s.io/ipaddresses/<ip>`` (as Kubernetes' IPAddress objects) and
``/registry/core/servicenodeports/<port>``, naming the Service that holds it. So two creates
never get the same address, whether they race on one server or on several servers sharing
one etcd, and nothing is remembered only in memory: after a restart the reservations (and
the Services, which carry their addresses) are where they were.

* A Service that names its ``clusterIP`` or a ``nodePort`` gets exactly that, or a 422
  (outside the range, or already allocated). One that leaves them empty gets a random free
  one: cluster IPs from the upper part of the range first (the lower part, with the range's
  first address that the ``kubernetes`` Service holds, is kept for addresses asked for by
  name, as Kubernetes does), node ports from the whole range.
* A write that does not land releases what was reserved for it; a Service deleted, or
  updated to hold less (``type: ClusterIP`` after ``NodePort``), releases what it no longer
  holds once the write has landed.
* A reservation whose Service is gone, or holds another address, is *stale* (a server that
  stopped between reserving and writing, or between deleting and releasing): it is taken
  over once it is older than :data:`STALE_AFTER` seconds, so nothing leaks for good and a
  Service being created elsewhere right now is never robbed of its address.

Non-guarantees: releasing is best effort (a storage error leaves a stale reservation,
reclaimed later as above); only single-stack IPv4 or IPv6 Services (``ipFamilyPolicy:
SingleStack``) are allocated.
"""

from __future__ import annotations

import ipaddress
import logging
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson

from setpoint.apimachinery import errors, fields, timeutil
from setpoint.apimachinery.clock import Clock
from setpoint.registry import storageerrors
from setpoint.registry import watchcache as wc
from setpoint.storage import interface as st

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

IP_PREFIX = "/registry/networking.k8s.io/ipaddresses/"
PORT_PREFIX = "/registry/core/servicenodeports/"
SERVICES_PREFIX = "/registry/core/services/"
DEFAULT_CLUSTER_IP_RANGE = "10.96.0.0/12"
DEFAULT_NODE_PORT_RANGE = (30000, 32767)
#: the largest service range, as kube-apiserver allows (2^20 addresses)
MAX_RANGE_BITS = 20
#: seconds after which a reservation whose Service does not hold it may be taken over
STALE_AFTER = 60.0
#: random picks tried before the free values are enumerated
RANDOM_TRIES = 32
NEEDS_NODE_PORTS = ("NodePort", "LoadBalancer")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceNetworkConfig:
    """The ranges Services are allocated from (``--service-cluster-ip-range``,
    ``--service-node-port-range``)."""

    cluster_ip_range: str = DEFAULT_CLUSTER_IP_RANGE
    node_port_range: tuple[int, int] = DEFAULT_NODE_PORT_RANGE
    network: Network = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            network = ipaddress.ip_network(self.cluster_ip_range, strict=False)
        except ValueError as e:
            raise ValueError(f"invalid service cluster IP range {self.cluster_ip_range!r}: "
                             f"{e}") from e
        host_bits = network.max_prefixlen - network.prefixlen
        if host_bits > MAX_RANGE_BITS:
            raise ValueError(f"service cluster IP range {self.cluster_ip_range} is too large: "
                             f"the mask must be at least /{network.max_prefixlen - 20}")
        if host_bits < 3:
            raise ValueError(f"service cluster IP range {self.cluster_ip_range} is too small: "
                             "it needs at least 8 addresses")
        low, high = self.node_port_range
        if not 1 <= low <= high <= 65535:
            raise ValueError(f"invalid node port range {low}-{high}")
        object.__setattr__(self, "network", network)

    @property
    def first_ip(self) -> str:
        """The range's first usable address: the ``kubernetes`` Service's."""
        return str(self.network.network_address + 1)

    @property
    def family(self) -> str:
        return "IPv4" if self.network.version == 4 else "IPv6"

    def ip_range_text(self) -> str:
        return str(self.network)

    def port_range_text(self) -> str:
        return f"{self.node_port_range[0]}-{self.node_port_range[1]}"


def parse_port_range(text: str) -> tuple[int, int]:
    """``30000-32767`` (or a single port) as a pair."""
    low, sep, high = text.partition("-")
    try:
        first = int(low)
        last = int(high) if sep else first
    except ValueError as e:
        raise ValueError(f"invalid port range {text!r}: expected LOW-HIGH") from e
    return first, last


def owner_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def cluster_ips(obj: Obj) -> list[str]:
    spec = obj.get("spec") or {}
    ips = [ip for ip in spec.get("clusterIPs") or [] if isinstance(ip, str)]
    if not ips and isinstance(spec.get("clusterIP"), str):
        ips = [spec["clusterIP"]]
    return [ip for ip in ips if ip and ip != "None"]


def node_ports(obj: Obj) -> list[int]:
    spec = obj.get("spec") or {}
    ports = []
    for port in spec.get("ports") or []:
        value = port.get("nodePort") if isinstance(port, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            ports.append(value)
    if isinstance(spec.get("healthCheckNodePort"), int) and spec["healthCheckNodePort"] > 0:
        ports.append(spec["healthCheckNodePort"])
    return ports


class _Reservations:
    """What one write reserved, and what it will release once it lands."""

    def __init__(self, allocator: ServiceAllocator, owner: tuple[str, str]) -> None:
        self._allocator = allocator
        self._owner = owner
        self.reserved: list[str] = []
        self.release_after: list[str] = []

    async def commit(self) -> None:
        for key in self.release_after:
            await self._allocator.release_key(key, self._owner)

    async def abort(self) -> None:
        for key in self.reserved:
            await self._allocator.release_key(key, self._owner)


class ServiceAllocator:
    """The :class:`~setpoint.registry.store.Allocator` of the Services store."""

    def __init__(self, config: ServiceNetworkConfig, backend: st.Backend,
                 cache: wc.WatchCache, *, clock: Clock, rng: random.Random) -> None:
        self.config = config
        self._backend = backend
        self._cache = cache
        self._clock = clock
        self._rng = random.Random(rng.getrandbits(64))
        network = config.network
        self._base = int(network.network_address)
        self._size = network.num_addresses
        # the usable offsets: not the network address, nor (IPv4) the broadcast one
        self._last = self._size - 2 if network.version == 4 else self._size - 1
        self._split = min(max(16, self._size // 16), 256)

    # --- keys ----------------------------------------------------------------------------

    def _ip_key(self, ip: str) -> str:
        return IP_PREFIX + ip

    @staticmethod
    def _port_key(port: int) -> str:
        return f"{PORT_PREFIX}{port}"

    def _record(self, key: str, owner: tuple[str, str]) -> bytes:
        name = key.rsplit("/", 1)[1]
        kind = ("IPAddress", "networking.k8s.io/v1") if key.startswith(IP_PREFIX) \
            else ("ServiceNodePort", "v1")
        return orjson.dumps({
            "apiVersion": kind[1], "kind": kind[0],
            "metadata": {"name": name,
                         "creationTimestamp": timeutil.format_time(self._clock.now())},
            "spec": {"parentRef": {"group": "", "resource": "services",
                                   "namespace": owner[0], "name": owner[1]}}})

    # --- reserving -----------------------------------------------------------------------

    async def _reserve(self, key: str, owner: tuple[str, str]) -> bool:
        """Create the reservation (or take over a stale one); False if someone holds it."""
        try:
            await self._backend.create(key, self._record(key, owner))
            return True
        except st.KeyExists:
            pass
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        try:
            kv = await self._backend.get(key)
            if kv is None:
                await self._backend.create(key, self._record(key, owner))
                return True
            held = orjson.loads(kv.value)
            if self._held_by(held, key) == owner:
                return True  # ours already (a repeated write)
            if not self._stale(held, key):
                return False
            await self._backend.update(key, self._record(key, owner), kv.mod_revision)
            log.info("took over the stale reservation %s", key)
            return True
        except (st.KeyExists, st.RevisionConflict, st.KeyNotFound):
            return False
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        except orjson.JSONDecodeError:
            return False

    @staticmethod
    def _held_by(record: Any, key: str) -> tuple[str, str] | None:
        ref = ((record or {}).get("spec") or {}).get("parentRef") or {}
        if not isinstance(ref, dict):
            return None
        return str(ref.get("namespace") or ""), str(ref.get("name") or "")

    def _stale(self, record: Any, key: str) -> bool:
        owner = self._held_by(record, key)
        if owner is None:
            return True
        service = self._cache.get(f"{SERVICES_PREFIX}{owner[0]}/{owner[1]}")
        value = key.rsplit("/", 1)[1]
        if service is not None:
            holds = cluster_ips(service) if key.startswith(IP_PREFIX) else [
                str(p) for p in node_ports(service)]
            if value in holds:
                return False
        created = ((record or {}).get("metadata") or {}).get("creationTimestamp")
        try:
            age = self._clock.now() - timeutil.parse_time(str(created))
        except ValueError:
            return True
        return age > timedelta(seconds=STALE_AFTER)

    async def release_key(self, key: str, owner: tuple[str, str]) -> None:
        """Delete the reservation ``key`` if ``owner`` holds it (best effort)."""
        try:
            kv = await self._backend.get(key)
            if kv is None or self._held_by(orjson.loads(kv.value), key) != owner:
                return
            await self._backend.delete(key, kv.mod_revision)
        except (st.KeyNotFound, st.RevisionConflict, orjson.JSONDecodeError):
            return
        except st.StorageError:
            log.warning("could not release %s; it will be reclaimed as stale", key,
                        exc_info=True)

    # --- choosing ------------------------------------------------------------------------

    def _ip_at(self, offset: int) -> str:
        return str(ipaddress.ip_address(self._base + offset))

    def _in_use(self, prefix: str) -> set[str]:
        return {key[len(prefix):] for key, _ in self._cache.items(prefix)}

    def _ip_candidates(self) -> list[str]:
        used = self._in_use(IP_PREFIX)
        picks = []
        upper = (self._split, self._last)
        if upper[0] <= upper[1]:
            for _ in range(RANDOM_TRIES):
                ip = self._ip_at(self._rng.randint(*upper))
                if ip not in used:
                    picks.append(ip)
        if not picks:  # crowded: every free address, upper part first
            order = [*range(self._split, self._last + 1), *range(1, self._split)]
            picks = [ip for ip in map(self._ip_at, order) if ip not in used][:RANDOM_TRIES]
        return picks

    def _port_candidates(self) -> list[int]:
        used = self._in_use(PORT_PREFIX)
        low, high = self.config.node_port_range
        picks = [p for p in (self._rng.randint(low, high) for _ in range(RANDOM_TRIES))
                 if str(p) not in used]
        if not picks:
            picks = [p for p in range(low, high + 1) if str(p) not in used][:RANDOM_TRIES]
        return picks

    def in_range(self, ip: str) -> bool:
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        offset = int(address) - self._base
        return address.version == self.config.network.version and 1 <= offset <= self._last

    # --- the Allocator protocol ----------------------------------------------------------

    async def allocate(self, new: Obj, old: Obj | None, dry_run: bool) -> _Reservations:
        done = _Reservations(self, owner_of(new))
        try:
            await self._allocate(new, old, dry_run, done)
        except BaseException:
            await done.abort()
            raise
        return done

    async def _allocate(self, new: Obj, old: Obj | None, dry_run: bool,
                        done: _Reservations) -> None:
        owner = owner_of(new)
        name = owner[1]
        spec = new.get("spec")
        if not isinstance(spec, dict):
            return
        kind = spec.get("type") or "ClusterIP"
        old_ips = cluster_ips(old) if old is not None else []
        old_ports = node_ports(old) if old is not None else []
        if kind != "ExternalName" and spec.get("clusterIP") == "None":
            spec["clusterIPs"] = ["None"]  # headless: no address, one family all the same
            spec.setdefault("ipFamilies", [self.config.family])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        elif kind != "ExternalName":
            wanted = spec.get("clusterIP") or ""
            if not wanted:
                ip = await self._pick_ip(owner, dry_run, done, name)
                spec["clusterIP"] = ip
            elif wanted not in old_ips:
                await self._claim_ip(wanted, owner, dry_run, done, name)
            spec["clusterIPs"] = [spec["clusterIP"]]
            spec.setdefault("ipFamilies", [self.config.family])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        if kind in NEEDS_NODE_PORTS:
            claimed: set[int] = set()
            for i, port in enumerate(spec.get("ports") or []):
                if not isinstance(port, dict):
                    continue
                wanted_port = port.get("nodePort")
                if wanted_port:
                    if wanted_port not in old_ports and wanted_port not in claimed:
                        await self._claim_port(wanted_port, i, owner, dry_run, done, name)
                else:
                    port["nodePort"] = await self._pick_port(owner, dry_run, done, name)
                claimed.add(port["nodePort"])
        new_ips, new_ports = set(cluster_ips(new)), set(node_ports(new))
        done.release_after = [self._ip_key(ip) for ip in old_ips if ip not in new_ips] + [
            self._port_key(p) for p in old_ports if p not in new_ports]

    def _invalid(self, name: str, path: str, value: Any, detail: str) -> errors.Invalid:
        return errors.invalid("Service", "", name, [fields.invalid(path, value, detail)])

    async def _claim_ip(self, ip: str, owner: tuple[str, str], dry_run: bool,
                        done: _Reservations, name: str) -> None:
        if not self.in_range(ip):
            raise self._invalid(name, "spec.clusterIPs[0]", [ip], (
                f"failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid "
                f"range. The range of valid IPs is {self.config.ip_range_text()}"))
        key = self._ip_key(ip)
        if dry_run:
            if ip in self._in_use(IP_PREFIX):
                raise self._invalid(name, "spec.clusterIPs", [ip], (
                    f"failed to allocate IP {ip}: provided IP is already allocated"))
            return
        if not await self._reserve(key, owner):
            raise self._invalid(name, "spec.clusterIPs", [ip], (
                f"failed to allocate IP {ip}: provided IP is already allocated"))
        done.reserved.append(key)

    async def _pick_ip(self, owner: tuple[str, str], dry_run: bool, done: _Reservations,
                       name: str) -> str:
        for _ in range(3):
            candidates = self._ip_candidates()
            if not candidates:
                break
            if dry_run:
                return candidates[0]
            for ip in candidates:
                if await self._reserve(self._ip_key(ip), owner):
                    done.reserved.append(self._ip_key(ip))
                    return ip
            await self._cache.wait_fresh()
        raise self._invalid(name, "spec.clusterIPs", [], (
            "failed to allocate a serviceIP: range is full"))

    async def _claim_port(self, port: Any, index: int, owner: tuple[str, str], dry_run: bool,
                          done: _Reservations, name: str) -> None:
        low, high = self.config.node_port_range
        path = f"spec.ports[{index}].nodePort"
        if not isinstance(port, int) or not low <= port <= high:
            raise self._invalid(name, path, port, (
                "provided port is not in the valid range. The range of valid ports is "
                f"{self.config.port_range_text()}"))
        key = self._port_key(port)
        if dry_run:
            if str(port) in self._in_use(PORT_PREFIX):
                raise self._invalid(name, path, port, "provided port is already allocated")
            return
        if not await self._reserve(key, owner):
            raise self._invalid(name, path, port, "provided port is already allocated")
        done.reserved.append(key)

    async def _pick_port(self, owner: tuple[str, str], dry_run: bool, done: _Reservations,
                         name: str) -> int:
        for _ in range(3):
            candidates = self._port_candidates()
            if not candidates:
                break
            if dry_run:
                return candidates[0]
            for port in candidates:
                if await self._reserve(self._port_key(port), owner):
                    done.reserved.append(self._port_key(port))
                    return port
            await self._cache.wait_fresh()
        raise self._invalid(name, "spec.ports", [], (
            "failed to allocate a nodePort: range is full"))

    async def release(self, obj: Obj) -> None:
        owner = owner_of(obj)
        for key in [*map(self._ip_key, cluster_ips(obj)), *map(self._port_key, node_ports(obj))]:
            await self.release_key(key, owner)
