"""Pod networking: every pod gets its own IP address, so pods can all use the same port.

:class:`PodNetwork` is the seam; two implementations:

* :class:`LoopbackNetwork` (unprivileged): pods share the host's network, and each gets its own
  loopback address from a pool (``127.64.0.0/16`` by default: Linux routes all of
  ``127.0.0.0/8`` to ``lo`` without configuration). The address is the pod's IP and its
  ``POD_IP``; a server must bind to it (``--bind $(POD_IP)``) rather than to ``0.0.0.0`` for
  two pods to use one port. Nothing is created, nothing to clean up.
* :class:`BridgeNetwork` (root, iproute2): what the CNI bridge plugin does. Each pod gets a
  network namespace (``/run/netns/<name>``) with ``lo`` and an ``eth0`` that is one end of a
  veth pair whose other end is attached to a host bridge (``setpoint0``) holding the gateway
  address, the first of the pod CIDR (``10.244.0.0/16`` by default). The agent that creates
  the bridge labels it (its ``ifalias``, ``setpoint-…``). Several agents on one machine may
  share the bridge (each with a pod CIDR of its own, each adding its gateway address): an
  agent left with no pod removes its gateway address, and removes the bridge only when no
  interface is attached to it any more — whichever agent created it —, so that one agent
  stopping never cuts the pods of another off. The pod's default
  route is the gateway: pods reach each other and the host, and nothing else — the runtime enables
  neither IP forwarding nor NAT, so packets to or from pod addresses never leave the machine
  (with forwarding off, as it is by default). Deleting the namespace deletes the veth pair.

Addresses are allocated lowest first, skipping the network and gateway (and broadcast)
addresses, and recorded with the pod so an agent that restarts reuses them
(:meth:`PodNetwork.restore`). Both implementations connect to a pod's port for
``port-forward`` (:meth:`PodNetwork.connect`): in a namespace, to ``localhost`` inside it (as
Kubernetes does, so a server bound to 127.0.0.1 in the pod is reachable), then to the pod IP.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import heapq
import ipaddress
import logging
import os
import socket
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["BridgeNetwork", "LoopbackNetwork", "NetworkError", "PodAddress", "PodNetwork"]

logger = logging.getLogger(__name__)

_CLONE_NEWNET = 0x40000000
_NETNS_DIR = Path("/run/netns")
_DELETE_ATTEMPTS = 40


class NetworkError(Exception):
    """A pod's network could not be set up (the message says which command failed)."""


@dataclass(frozen=True, slots=True)
class PodAddress:
    """Where a pod is: its IP, and its network namespace's path (None: the host's)."""

    ip: str
    netns: str | None = None

    def to_json(self) -> dict[str, str | None]:
        return {"ip": self.ip, "netns": self.netns}

    @classmethod
    def from_json(cls, data: dict[str, str | None]) -> PodAddress:
        return cls(ip=str(data.get("ip") or ""), netns=data.get("netns"))


class PodNetwork(Protocol):
    async def setup(self, uid: str) -> PodAddress:
        """Give pod ``uid`` an address (idempotent for a uid already set up)."""

    def restore(self, uid: str, address: PodAddress) -> None:
        """Record an address a previous agent gave (after a restart)."""

    async def teardown(self, uid: str) -> None:
        """Release the pod's address and whatever was created for it."""

    async def connect(self, address: PodAddress, port: int
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A TCP connection to ``port`` of the pod."""

    async def cleanup(self, keep: Iterable[str]) -> None:
        """Remove what a previous agent created for pods not in ``keep``."""

    async def close(self) -> None:
        """Release shared resources (the bridge) once no pod uses them."""


class _Pool:
    """Addresses of a CIDR, lowest free first, O(log n) per allocation."""

    def __init__(self, cidr: str, reserved: int) -> None:
        network = ipaddress.ip_network(cidr)
        if not isinstance(network, ipaddress.IPv4Network) or network.num_addresses < 4:
            raise ValueError(f"a pod CIDR must be IPv4 with room for pods: {cidr}")
        self.network: ipaddress.IPv4Network = network
        self._base = int(network.network_address)
        self._next = reserved  # offsets below were never handed out
        self._limit = network.num_addresses - 1  # the broadcast address stays free
        self._freed: list[int] = []
        self._by_uid: dict[str, int] = {}
        self._used: set[int] = set()

    def allocate(self, uid: str) -> str:
        if uid in self._by_uid:
            return self._ip(self._by_uid[uid])
        while self._freed:
            offset = heapq.heappop(self._freed)
            if offset not in self._used:
                return self._take(uid, offset)
        while self._next < self._limit:
            offset = self._next
            self._next += 1
            if offset not in self._used:
                return self._take(uid, offset)
        raise NetworkError(f"no free address in {self.network}")

    def _ip(self, offset: int) -> str:
        return str(ipaddress.IPv4Address(self._base + offset))

    def _take(self, uid: str, offset: int) -> str:
        self._used.add(offset)
        self._by_uid[uid] = offset
        return self._ip(offset)

    def claim(self, uid: str, ip: str) -> None:
        offset = int(ipaddress.IPv4Address(ip)) - self._base
        self._by_uid[uid] = offset
        self._used.add(offset)

    def release(self, uid: str) -> None:
        offset = self._by_uid.pop(uid, None)
        if offset is not None:
            self._used.discard(offset)
            if offset < self._next:
                heapq.heappush(self._freed, offset)

    def __len__(self) -> int:
        return len(self._by_uid)


async def _open(host: str, port: int, timeout: float
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    async with asyncio.timeout(timeout):
        return await asyncio.open_connection(host, port)


class LoopbackNetwork:
    """Each pod its own 127.x.y.z; see the module docstring."""

    def __init__(self, cidr: str = "127.64.0.0/16", *, connect_timeout: float = 5.0) -> None:
        self._pool = _Pool(cidr, reserved=2)
        if not self._pool.network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
            raise ValueError(f"a loopback pod CIDR must be inside 127.0.0.0/8: {cidr}")
        self._timeout = connect_timeout

    async def setup(self, uid: str) -> PodAddress:
        return PodAddress(self._pool.allocate(uid))

    def restore(self, uid: str, address: PodAddress) -> None:
        self._pool.claim(uid, address.ip)

    async def teardown(self, uid: str) -> None:
        self._pool.release(uid)

    async def connect(self, address: PodAddress, port: int
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await _open(address.ip, port, self._timeout)

    async def cleanup(self, keep: Iterable[str]) -> None:
        return None

    async def close(self) -> None:
        return None


async def _ip(*args: str, stdin: str | None = None, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        "ip", *args, stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate(stdin.encode() if stdin is not None else None)
    if check and proc.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {err.decode(errors='replace').strip()}")
    return out.decode(errors="replace")


def _exists(path: str | Path) -> bool:
    # sysfs and /run are in memory: checking them does not wait on a disk.
    return os.path.exists(path)


def _attached(bridge: str) -> bool:
    """Whether any interface (a pod's veth, of any agent) is attached to ``bridge``."""
    try:
        with os.scandir(f"/sys/class/net/{bridge}/brif") as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _netns_names() -> list[str]:
    try:
        return os.listdir(_NETNS_DIR)
    except FileNotFoundError:
        return []


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _connect_in_netns(netns: str, hosts: list[str], port: int, timeout: float
                      ) -> socket.socket:
    """A connected socket created inside ``netns`` (runs in a thread of its own)."""
    libc = _libc()
    own = os.open(f"/proc/{os.getpid()}/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    target = os.open(netns, os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            raise NetworkError(f"setns {netns}: {os.strerror(ctypes.get_errno())}")
        try:
            last: OSError | None = None
            for host in hosts:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.settimeout(timeout)
                try:
                    sock.connect((host, port))
                except OSError as e:
                    sock.close()
                    last = e
                    continue
                sock.settimeout(None)
                sock.setblocking(False)
                return sock
            raise last or OSError("no address to connect to")
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:  # this thread is discarded anyway
                logger.error("could not return a thread to the host network namespace")
    finally:
        os.close(own)
        os.close(target)


class BridgeNetwork:
    """A network namespace per pod on a host bridge; see the module docstring."""

    def __init__(self, *, agent_id: str, cidr: str = "10.244.0.0/16", bridge: str = "setpoint0",
                 connect_timeout: float = 5.0) -> None:
        if not 0 < len(bridge) <= 15:
            raise ValueError("a bridge name has 1 to 15 characters")
        self._pool = _Pool(cidr, reserved=2)
        self._gateway = str(self._pool.network.network_address + 1)
        self._prefix = self._pool.network.prefixlen
        self._bridge = bridge
        self._agent = agent_id
        self._owner = f"setpoint-{agent_id}"
        self._timeout = connect_timeout
        self._lock = asyncio.Lock()
        self._bridge_ready = False

    @property
    def gateway(self) -> str:
        return self._gateway

    def _names(self, uid: str) -> tuple[str, str]:
        netns = f"setpoint-{self._agent}-{uid}"
        veth = "spv" + hashlib.sha256(netns.encode()).hexdigest()[:10]
        return netns, veth

    async def _ensure_bridge(self) -> None:
        async with self._lock:
            # another agent sharing it may have removed it since (it had no pod attached)
            if self._bridge_ready and _exists(f"/sys/class/net/{self._bridge}"):
                return
            if not _exists(f"/sys/class/net/{self._bridge}"):
                await _ip("link", "add", self._bridge, "type", "bridge")
                # Whose bridge it is survives the agent: the last one out removes it.
                await _ip("link", "set", self._bridge, "alias", self._owner)
            addrs = await _ip("-o", "-4", "addr", "show", "dev", self._bridge)
            if f" {self._gateway}/{self._prefix} " not in addrs:
                await _ip("addr", "add", f"{self._gateway}/{self._prefix}", "dev", self._bridge)
            await _ip("link", "set", self._bridge, "up")
            self._bridge_ready = True

    async def setup(self, uid: str) -> PodAddress:
        try:
            return await self._setup(uid)
        except NetworkError:
            if _exists(f"/sys/class/net/{self._bridge}"):
                raise
            # removed by another agent between our check and the attach: once more
            return await self._setup(uid)

    async def _setup(self, uid: str) -> PodAddress:
        await self._ensure_bridge()
        netns, veth = self._names(uid)
        ip = self._pool.allocate(uid)
        path = str(_NETNS_DIR / netns)
        if _exists(path):
            await _ip("netns", "delete", netns, check=False)  # half made: start over
        try:
            await _ip("-batch", "-", stdin="\n".join([
                f"netns add {netns}",
                f"link add {veth} type veth peer name eth0 netns {netns}",
                f"link set {veth} master {self._bridge}",
                f"link set {veth} up",
            ]) + "\n")
            await _ip("-n", netns, "-batch", "-", stdin="\n".join([
                "link set lo up",
                f"addr add {ip}/{self._prefix} dev eth0",
                "link set eth0 up",
                f"route add default via {self._gateway}",
            ]) + "\n")
        except NetworkError:
            await _ip("netns", "delete", netns, check=False)
            await _ip("link", "delete", veth, check=False)
            self._pool.release(uid)
            raise
        return PodAddress(ip, path)

    def restore(self, uid: str, address: PodAddress) -> None:
        self._pool.claim(uid, address.ip)

    async def teardown(self, uid: str) -> None:
        netns, veth = self._names(uid)
        for _ in range(_DELETE_ATTEMPTS):
            if not _exists(_NETNS_DIR / netns):
                break
            # "Device or resource busy" while a dying process still holds a copy of the file
            await _ip("netns", "delete", netns, check=False)
            if _exists(_NETNS_DIR / netns):
                await asyncio.sleep(0.05)
        else:
            logger.error("network namespace %s could not be deleted", netns)
        if _exists(f"/sys/class/net/{veth}"):
            await _ip("link", "delete", veth, check=False)
        self._pool.release(uid)

    async def connect(self, address: PodAddress, port: int
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if address.netns is None:
            return await _open(address.ip, port, self._timeout)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[socket.socket] = loop.create_future()

        def work() -> None:
            try:
                sock = _connect_in_netns(address.netns or "", ["127.0.0.1", address.ip], port,
                                         self._timeout)
            except BaseException as e:  # handed to the awaiting coroutine
                loop.call_soon_threadsafe(_fail, future, e)
            else:
                loop.call_soon_threadsafe(_succeed, future, sock)

        # A thread of its own: it changes its network namespace and is then discarded.
        threading.Thread(target=work, name="setpoint-netns-connect", daemon=True).start()
        sock = await future
        return await asyncio.open_connection(sock=sock)

    async def cleanup(self, keep: Iterable[str]) -> None:
        wanted = {self._names(uid)[0] for uid in keep}
        prefix = f"setpoint-{self._agent}-"
        for name in _netns_names():
            if name.startswith(prefix) and name not in wanted:
                await self.teardown(name[len(prefix):])

    async def close(self) -> None:
        async with self._lock:
            if len(self._pool) or not _exists(f"/sys/class/net/{self._bridge}"):
                return
            if not _read(f"/sys/class/net/{self._bridge}/ifalias").startswith("setpoint-"):
                return  # not a bridge an agent made: never ours to change
            await _ip("addr", "del", f"{self._gateway}/{self._prefix}", "dev", self._bridge,
                      check=False)
            if not _attached(self._bridge):
                await _ip("link", "delete", self._bridge, check=False)
            self._bridge_ready = False


def _fail(future: asyncio.Future[socket.socket], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


def _succeed(future: asyncio.Future[socket.socket], sock: socket.socket) -> None:
    if future.done():
        with contextlib.suppress(OSError):
            sock.close()
    else:
        future.set_result(sock)
