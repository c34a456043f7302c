"""A whole control plane: the API server and the built-in controllers, as ``setpoint serve``
runs them.

``async with ControlPlane(ControlPlaneConfig(server=ServerConfig(...))) as cp:`` starts a
:class:`~setpoint.server.server.Server`, then a :class:`~setpoint.runtime.Manager` that runs
the built-in controllers (:mod:`setpoint.controllers`: the garbage collector, the namespace
lifecycle and CRD cleanup, all by default) against that server through a
:class:`setpoint.client.Client` over loopback HTTP, exactly as an operator run elsewhere
would. They never touch storage.

The server is told which controllers run where its behaviour depends on it: with the
garbage collector, DELETE honours ``propagationPolicy: Foreground`` and ``Orphan`` (and
``orphanDependents``) by adding the ``foregroundDeletion`` / ``orphan`` finalizers; without
it, those would hang forever, so they delete at once.

Invariants:

- Everything runs in one task group; leaving the block stops the controllers first
  (gracefully, bounded by ``graceful_shutdown_timeout``), then closes their client, then
  stops the server (open watches end, storage closes after its last acknowledged write).
- A failure of the controllers' manager ends the block with that failure (the server is
  stopped too): a control plane whose controllers died is not left half running.
- State lives in the API objects: a control plane started on the data of one that was
  killed in the middle of a deletion finishes that deletion.

With ``leader_election``, the controllers run only while this process holds the Lease
``kube-system/setpoint-controller-manager`` (for several servers sharing one storage); without
it (the default, one server) they run at once.

Non-guarantees: ``__aenter__`` returns once the server serves and the controllers' caches
have synced (at most ``controllers_ready_timeout`` seconds; after that it returns anyway and
the controllers catch up). Without the ``namespace`` controller a deleted namespace stays
Terminating; without ``crd`` a deleted CRD keeps its cleanup finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

from setpoint import client as sp_client
from setpoint import controllers as builtin_controllers
from setpoint import runtime
from setpoint.server.server import Server, ServerConfig

log = logging.getLogger(__name__)

#: every built-in controller, by name
CONTROLLERS: Final = builtin_controllers.NAMES
#: the Lease the built-in controllers of several servers compete for (in kube-system)
LEASE_NAME: Final = "setpoint-controller-manager"


def parse_controllers(text: str | None) -> frozenset[str]:
    """``--controllers`` as given: None means all, ``""`` none, else comma-separated names.

    Raises ``ValueError`` naming unknown controllers.
    """
    if text is None:
        return frozenset(CONTROLLERS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = sorted(n for n in names if n not in CONTROLLERS)
    if unknown:
        raise ValueError(f"unknown controllers: {', '.join(unknown)} (known: "
                         f"{', '.join(CONTROLLERS)})")
    return frozenset(names)


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlPlaneConfig:
    server: ServerConfig = field(default_factory=ServerConfig)
    #: the built-in controllers to run (a subset of :data:`CONTROLLERS`)
    controllers: frozenset[str] = frozenset(CONTROLLERS)
    graceful_shutdown_timeout: float = 5.0
    controllers_ready_timeout: float = 10.0
    #: compete for the Lease ``kube-system/setpoint-controller-manager`` and run the
    #: controllers only while holding it: for several servers sharing one storage, so that
    #: one set of built-in controllers runs at a time
    leader_election: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.controllers) - set(CONTROLLERS))
        if unknown:
            raise ValueError(f"unknown controllers: {', '.join(unknown)}")
        if self.graceful_shutdown_timeout <= 0 or self.controllers_ready_timeout <= 0:
            raise ValueError("timeouts must be positive")


def loopback_url(host: str, port: int) -> str:
    """The URL the controllers use: the server's, or loopback when it listens everywhere."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class ControlPlane:
    """A running server and its built-in controllers; see the module docstring."""

    def __init__(self, config: ControlPlaneConfig) -> None:
        self.config = config
        self.server = Server(dataclasses.replace(
            config.server, garbage_collection="garbagecollector" in config.controllers))
        self.manager: runtime.Manager | None = None
        self.client: sp_client.Client | None = None
        self._stack = contextlib.AsyncExitStack()
        self._run: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return self.server.url

    async def __aenter__(self) -> ControlPlane:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self) -> None:
        await self._stack.enter_async_context(self.server)
        names = [n for n in CONTROLLERS if n in self.config.controllers]
        if not names:
            return
        controllers, runnables = builtin_controllers.builtin(names)
        client = sp_client.Client(sp_client.ClientConfig(
            server=loopback_url(self.server.config.host, self.server.port),
            max_connections=256,
            user_agent="setpoint-controller-manager"))
        self._stack.push_async_callback(client.close)
        self.client = client
        election = runtime.LeaderElectionConfig(
            lease_name=LEASE_NAME, lease_namespace="kube-system") \
            if self.config.leader_election else None
        manager = runtime.Manager(
            client, controllers, runnables=runnables, leader_election=election,
            graceful_shutdown_timeout=self.config.graceful_shutdown_timeout)
        self.manager = manager
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._run = group.create_task(manager.run(), name="built-in controllers")
        self._stack.push_async_callback(self._stop_manager)
        ready = group.create_task(manager.wait_ready())
        await asyncio.wait({ready, self._run}, timeout=self.config.controllers_ready_timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not manager.ready:
            log.warning("built-in controllers not ready after %gs; carrying on",
                        self.config.controllers_ready_timeout)
        log.info("built-in controllers running: %s", ", ".join(names))

    async def _stop_manager(self) -> None:
        if self.manager is not None:
            self.manager.stop()
        if self._run is not None:
            await asyncio.wait({self._run})

    async def stop(self) -> None:
        await self._stack.aclose()
