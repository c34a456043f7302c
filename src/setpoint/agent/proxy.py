"""A userspace service proxy: ``clusterIP:port`` forwarded to a Service's ready endpoints.

:class:`ServiceProxy` holds a table of :class:`Frontend` -> backends, set as a whole by
:meth:`ServiceProxy.apply` (the caller computes it from Services and EndpointSlices, see
:func:`rules_from`). For each frontend with at least one backend it listens on the
frontend's address and forwards every accepted TCP connection to the next backend, in
round-robin order; a backend that does not accept within ``connect_timeout`` is skipped for
the next one (at most ``connect_attempts`` tried). A frontend without backends has **no
listener**, so a client's connection is refused, as kube-proxy's REJECT rule makes it. When
a frontend leaves the table its listener is closed and its connections are cut.

Cluster IPs are made local to this machine by a :class:`RouteTable` (root, Linux, iproute2):
a ``local <cidr> dev lo`` route for each service CIDR when they are known (``service_cidrs``,
what ``setpoint serve`` passes its agent), else one ``local <ip>/32`` route per cluster IP; in
the ``local`` table, where the kernel looks for the addresses a socket may bind. The proxy
then binds ``clusterIP:port`` and packets to cluster IPs, from the host or from pods whose
default route is the host, are delivered to it and never leave the machine (with the CIDR
routes, not even for an address no Service holds: the connection is refused). Each route is
recorded in a file before it is added; on start the table removes every route the file
lists (a previous agent killed with -9 left them), then adds again those still wanted
(``ip route replace``: adding twice is harmless).
Routes are removed when their Service goes and when the proxy stops; listeners die with the
process.

Non-guarantees: TCP only (UDP and SCTP ports are skipped); no session affinity; no
``externalTrafficPolicy``/``internalTrafficPolicy``; the client's address is not preserved
(backends see the proxy's). Two proxies on one machine for Services with the same cluster IP
conflict: the second cannot bind (it logs and retries), and whichever stops first removes the
shared route.

Bounds: ``max_connections`` open connections per frontend (more are closed at accept),
``buffer_size`` bytes read at a time per direction, ``connect_timeout`` per attempt,
``max_frontends`` listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import shutil
import socket
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Frontend", "ProxyConfig", "RouteTable", "ServiceProxy", "rules_from"]

log = logging.getLogger(__name__)

ProxyMode = Literal["auto", "routes", "loopback", "off"]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

Obj = Mapping[str, Any]
Address = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyConfig:
    #: ``routes``: cluster IPs made local (root); ``loopback``: only NodePort Services, on
    #: 127.0.0.1:nodePort; ``auto``: ``routes`` when root on Linux with ``ip``, else
    #: ``loopback``; ``off``: no proxy
    mode: ProxyMode = "auto"
    max_connections: int = 1024
    buffer_size: int = 65536
    connect_timeout: float = 3.0
    connect_attempts: int = 3
    max_frontends: int = 10_000
    #: seconds between retries of a listener that could not bind
    retry_interval: float = 5.0
    #: the service CIDRs made local as a whole (empty: each cluster IP on its own)
    service_cidrs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "routes", "loopback", "off"):
            raise ValueError("mode must be auto, routes, loopback or off")
        if min(self.max_connections, self.buffer_size, self.connect_attempts,
               self.max_frontends) < 1:
            raise ValueError("max_connections, buffer_size, connect_attempts and "
                             "max_frontends must be >= 1")
        if self.connect_timeout <= 0 or self.retry_interval <= 0:
            raise ValueError("connect_timeout and retry_interval must be positive")
        for cidr in self.service_cidrs:
            ipaddress.ip_network(cidr)  # ValueError for a malformed one


def resolve_mode(mode: ProxyMode) -> ProxyMode:
    if mode != "auto":
        return mode
    if sys.platform == "linux" and os.geteuid() == 0 and shutil.which("ip"):
        return "routes"
    return "loopback"


@dataclass(frozen=True, slots=True)
class Frontend:
    """Where the proxy listens for one port of one Service."""

    ip: str
    port: int
    #: ``namespace/name:portName`` (for logs)
    service: str = field(default="", compare=False)


def _ready(endpoint: Obj) -> bool:
    ready = (endpoint.get("conditions") or {}).get("ready")
    return ready is None or ready is True


def rules_from(services: Iterable[Obj], slices: Iterable[Obj], mode: ProxyMode
               ) -> dict[Frontend, tuple[Address, ...]]:
    """The proxy's table: each TCP port of each Service with a cluster IP -> ready backends.

    In ``loopback`` mode only NodePort ports are served, on ``127.0.0.1:nodePort``.
    """
    by_service: dict[tuple[str, str], list[Obj]] = {}
    for s in slices:
        meta = s.get("metadata") or {}
        name = (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if name and s.get("addressType", "IPv4") in ("IPv4", "IPv6"):
            by_service.setdefault((str(meta.get("namespace") or ""), str(name)), []).append(s)
    table: dict[Frontend, tuple[Address, ...]] = {}
    for svc in services:
        meta = svc.get("metadata") or {}
        spec = svc.get("spec") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        ip = spec.get("clusterIP")
        if not isinstance(ip, str) or ip in ("", "None") or spec.get("type") == "ExternalName":
            continue
        for port in spec.get("ports") or []:
            if (port.get("protocol") or "TCP") != "TCP":
                continue
            pname = str(port.get("name") or "")
            backends: list[Address] = []
            for s in by_service.get((ns, name), []):
                target = next((p.get("port") for p in s.get("ports") or []
                               if str(p.get("name") or "") == pname
                               and (p.get("protocol") or "TCP") == "TCP"), None)
                if not isinstance(target, int):
                    continue
                for ep in s.get("endpoints") or []:
                    if not _ready(ep):
                        continue
                    for addr in (ep.get("addresses") or [])[:1]:
                        if (str(addr), target) not in backends:
                            backends.append((str(addr), target))
            label = f"{ns}/{name}:{pname or port.get('port')}"
            if mode == "loopback":
                if isinstance(port.get("nodePort"), int) and port["nodePort"]:
                    table[Frontend("127.0.0.1", int(port["nodePort"]), label)] = tuple(backends)
            else:
                table[Frontend(ip, int(port.get("port") or 0), label)] = tuple(backends)
    return table


class RouteTable:
    """``local <prefix> dev lo`` routes, recorded in ``record`` (one prefix a line)."""

    def __init__(self, record: Path, ip_command: str = "ip") -> None:
        self.record = record
        self.ip_command = ip_command
        self.routes: set[str] = set()

    async def _ip(self, *args: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            self.ip_command, *args, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        return proc.returncode or 0, err.decode(errors="replace").strip()

    def _write(self) -> None:
        self.record.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.record.with_suffix(".tmp")
        tmp.write_text("".join(f"{ip}\n" for ip in sorted(self.routes)))
        os.replace(tmp, self.record)

    async def _run(self, verb: str, prefix: str) -> tuple[int, str]:
        net = ipaddress.ip_network(prefix, strict=False)
        return await self._ip(f"-{net.version}", "route", verb, "local", str(net), "dev", "lo",
                              "table", "local")

    async def recover(self) -> None:
        """Remove the routes a previous proxy on this record left."""
        with contextlib.suppress(FileNotFoundError):
            for line in self.record.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    await self._run("del", str(ipaddress.ip_network(line.strip())))
        self.routes.clear()
        self._write()

    async def ensure(self, ip: str) -> bool:
        if ip in self.routes:
            return True
        self.routes.add(ip)
        self._write()  # recorded before it exists: a crash never leaves one unrecorded
        code, err = await self._run("replace", ip)
        if code != 0:
            log.warning("could not make cluster IP %s local: %s", ip, err)
            self.routes.discard(ip)
            self._write()
            return False
        return True

    async def remove(self, ip: str) -> None:
        if ip not in self.routes:
            return
        code, err = await self._run("del", ip)
        if code != 0 and "No such process" not in err:
            log.warning("could not remove the route of cluster IP %s: %s", ip, err)
        self.routes.discard(ip)
        self._write()

    async def clear(self) -> None:
        for ip in sorted(self.routes):
            await self.remove(ip)


class _Listener:
    def __init__(self, proxy: ServiceProxy, frontend: Frontend,
                 backends: tuple[Address, ...]) -> None:
        self.proxy = proxy
        self.frontend = frontend
        self.backends = backends
        self.next = 0
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()
        self.failed = False

    async def start(self) -> bool:
        family = socket.AF_INET6 if ":" in self.frontend.ip else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.frontend.ip, self.frontend.port))
            sock.listen(128)
            sock.setblocking(False)
            self.server = await asyncio.start_server(self._accept, sock=sock)
        except OSError as e:
            sock.close()
            if not self.failed:
                log.warning("service proxy: cannot listen on %s:%s for %s: %s",
                            self.frontend.ip, self.frontend.port, self.frontend.service, e)
            self.failed = True
            return False
        self.failed = False
        return True

    def pick(self) -> list[Address]:
        n = len(self.backends)
        if n == 0:
            return []
        start = self.next % n
        self.next = start + 1
        order = [*self.backends[start:], *self.backends[:start]]
        return order[:self.proxy.config.connect_attempts]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if len(self.connections) >= self.proxy.config.max_connections or task is None:
            writer.close()
            return
        self.connections.add(task)
        try:
            await self._forward(reader, writer)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        config = self.proxy.config
        for host, port in self.pick():
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port, limit=config.buffer_size),
                    config.connect_timeout)
            except (OSError, TimeoutError) as e:
                log.debug("service proxy: %s -> %s:%s failed: %s", self.frontend.service,
                          host, port, e)
                continue
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._pump(reader, up_writer))
                    group.create_task(self._pump(up_reader, writer))
            except* (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                up_writer.close()
            return

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        size = self.proxy.config.buffer_size
        while data := await src.read(size):
            dst.write(data)
            await dst.drain()
        if dst.can_write_eof():
            with contextlib.suppress(OSError):
                dst.write_eof()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for task in list(self.connections):
            task.cancel()
        for task in list(self.connections):
            with contextlib.suppress(BaseException):
                await task


class ServiceProxy:
    """See the module docstring. ``async with ServiceProxy(...)``, then :meth:`apply`."""

    def __init__(self, config: ProxyConfig, state_dir: Path) -> None:
        self.config = config
        self.mode = resolve_mode(config.mode)
        self.routes: RouteTable | None = (RouteTable(state_dir / "proxy-routes")
                                          if self.mode == "routes" else None)
        self.listeners: dict[Frontend, _Listener] = {}
        self._retry: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ServiceProxy:
        if self.routes is not None:
            await self.routes.recover()
        if self.mode == "loopback":
            why = " (not root on Linux with iproute2)" if self.config.mode == "auto" else ""
            log.warning("service proxy: cluster IPs are not reachable on this node%s; "
                        "NodePort Services are served on 127.0.0.1:<nodePort>", why)
        self._retry = asyncio.get_running_loop().create_task(self._retry_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._retry is not None:
            self._retry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retry
        for listener in list(self.listeners.values()):
            await listener.close()
        self.listeners.clear()
        if self.routes is not None:
            await self.routes.clear()

    def listening(self) -> dict[Frontend, tuple[Address, ...]]:
        """The frontends with a bound listener, and their backends."""
        return {f: lis.backends for f, lis in self.listeners.items() if lis.server is not None}

    async def apply(self, table: Mapping[Frontend, tuple[Address, ...]]) -> None:
        """Make the listeners (and routes) match ``table``."""
        if self.mode == "off":
            return
        wanted = {f: b for f, b in table.items() if b}
        if len(wanted) > self.config.max_frontends:
            log.warning("service proxy: %d frontends, serving the first %d", len(wanted),
                        self.config.max_frontends)
            wanted = dict(sorted(wanted.items(), key=lambda kv: (kv[0].ip, kv[0].port))
                          [:self.config.max_frontends])
        for frontend in [f for f in self.listeners if f not in wanted]:
            await self.listeners.pop(frontend).close()
        if self.routes is not None:
            ips = {str(ipaddress.ip_network(c, strict=False))
                   for c in self.config.service_cidrs} or {
                str(ipaddress.ip_network(f.ip)) for f in table}
            for ip in sorted(self.routes.routes - ips):
                await self.routes.remove(ip)
            for ip in sorted(ips):
                await self.routes.ensure(ip)
        for frontend, backends in wanted.items():
            listener = self.listeners.get(frontend)
            if listener is None:
                listener = _Listener(self, frontend, backends)
                self.listeners[frontend] = listener
                await listener.start()
            elif listener.backends != backends:
                listener.backends = backends

    async def _retry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retry_interval)
            for listener in list(self.listeners.values()):
                if listener.server is None and self.listeners.get(listener.frontend) is listener:
                    await listener.start()
