"""A whole control plane: the API server and the built-in controllers, as ``setpoint serve``
runs them.

``async with ControlPlane(ControlPlaneConfig(server=ServerConfig(...))) as cp:`` starts a
:class:`~setpoint.server.server.Server`, then the built-in controllers
(:mod:`setpoint.controllers`: the garbage collector, the namespace lifecycle and CRD cleanup,
all by default). They talk to that server through a :class:`setpoint.client.Client` over
loopback HTTP, exactly as an operator run elsewhere would, and never touch storage. Where
they run is ``controllers_mode``:

- ``"process"`` (what ``setpoint serve`` does by default): a child process,
  ``setpoint controller-manager`` (:mod:`setpoint.cli.controller_manager`), with the admin
  kubeconfig the server wrote, owned by a :class:`~setpoint.process.Supervisor`: started
  with the control plane, restarted with backoff if it dies, stopped with it (SIGTERM, then
  SIGKILL after ``controller_stop_timeout``), and ending by
  itself if this process dies, even by ``kill -9``. Nothing the controllers do (a malformed
  owner graph, a burst of events) can take CPU from the event loop that serves requests;
  it costs the server the controllers' requests, and memory for a second interpreter.
- ``"inline"`` (the default of this class, and of :mod:`setpoint.testing`): a
  :class:`~setpoint.runtime.Manager` in this event loop (:attr:`ControlPlane.manager`),
  which tests can reach into. Its work is bounded and yields between items, but shares the
  loop with the server.

The server is told which controllers run where its behaviour depends on it: with the
garbage collector, DELETE honours ``propagationPolicy: Foreground`` and ``Orphan`` (and
``orphanDependents``) by adding the ``foregroundDeletion`` / ``orphan`` finalizers; without
it, those would hang forever, so they delete at once.

Invariants:

- Everything runs in one task group; leaving the block stops the controllers first
  (gracefully, bounded by ``graceful_shutdown_timeout``), then closes their client, then
  stops the server (open watches end, storage closes after its last acknowledged write).
- Inline, a failure of the controllers' manager ends the block with that failure (the server
  is stopped too): a control plane whose controllers died is not left half running. As a
  process, a controller manager that dies is restarted instead (its state lives in the API).
- State lives in the API objects: a control plane started on the data of one that was
  killed in the middle of a deletion finishes that deletion.

With ``leader_election``, the controllers run only while this process holds the Lease
``kube-system/setpoint-controller-manager`` (for several servers sharing one storage); without
it (the default, one server) they run at once.

Non-guarantees: ``__aenter__`` returns once the server serves and the controllers' caches
have synced (at most ``controllers_ready_timeout`` seconds; after that it returns anyway and
the controllers catch up; as a process, "synced" is what the child reports). Without the
``namespace`` controller a deleted namespace stays Terminating; without ``crd`` a deleted
CRD keeps its cleanup finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal

from setpoint import client as sp_client
from setpoint import controllers as builtin_controllers
from setpoint import process, runtime
from setpoint.pki.certs import KeyPair
from setpoint.server import kubeconfigs
from setpoint.server.securing import MANAGER
from setpoint.server.server import Server, ServerConfig

log = logging.getLogger(__name__)

#: every built-in controller, by name
CONTROLLERS: Final = builtin_controllers.NAMES
#: the ones run when none are named
DEFAULT_CONTROLLERS: Final = builtin_controllers.DEFAULT_NAMES
#: the Lease the built-in controllers of several servers compete for (in kube-system)
LEASE_NAME: Final = builtin_controllers.LEASE_NAME
#: where the built-in controllers run (see the module docstring)
ControllersMode = Literal["process", "inline"]
CONTROLLERS_MODES: Final = ("process", "inline")
#: how the child controller manager is started; its options are appended
CONTROLLER_MANAGER_COMMAND: Final = (sys.executable, "-m", "setpoint", "controller-manager")
#: seconds a stopping controller manager process gets beyond its graceful shutdown timeout
#: before SIGKILL (it ends itself ``STOP_MARGIN`` seconds after it, see the command)
PROCESS_STOP_MARGIN: Final = 10.0
#: connections the controller manager's shared client may open to the server
MAX_CONNECTIONS: Final = 256
#: how the node agent is started; its options are appended
AGENT_COMMAND: Final = (sys.executable, "-m", "setpoint", "agent")
#: what runs the pods of the control plane's own node
POD_RUNTIMES: Final = ("process", "simulate")
#: the label of the control plane's own Node (k3s puts it on its server nodes)
CONTROL_PLANE_LABEL: Final = "node-role.kubernetes.io/control-plane"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeAgentConfig:
    """The node agent the control plane runs for its own machine (``setpoint agent`` as a
    child process, with its own identity ``system:node:NAME``)."""

    node_name: str
    root_dir: Path
    pod_runtime: str = "process"
    #: the process runtime's isolation: auto, namespaces or none
    isolation: str = "auto"
    #: the pods' addresses (None: the runtime's default)
    pod_cidr: str | None = None
    #: the service CIDRs (``--service-cluster-ip-range``) the agent's proxy routes locally
    service_cidr: str = ""
    command: tuple[str, ...] = AGENT_COMMAND
    #: seconds between SIGTERM and SIGKILL when stopping it
    stop_timeout: float = 20.0
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if self.pod_runtime not in POD_RUNTIMES:
            raise ValueError(f"pod_runtime must be one of {', '.join(POD_RUNTIMES)}")
        if not self.node_name:
            raise ValueError("node_name is required")
        if self.stop_timeout <= 0:
            raise ValueError("stop_timeout must be positive")


def parse_controllers(text: str | None) -> frozenset[str]:
    """``--controllers`` as given: None means the defaults (:data:`DEFAULT_CONTROLLERS`),
    ``""`` none, else comma-separated names.

    Raises ``ValueError`` naming unknown controllers.
    """
    if text is None:
        return frozenset(DEFAULT_CONTROLLERS)
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
    controllers: frozenset[str] = frozenset(DEFAULT_CONTROLLERS)
    #: the options of the built-in controllers (the scheduler's, the node lifecycle's)
    controller_settings: builtin_controllers.Settings = field(
        default_factory=builtin_controllers.Settings)
    graceful_shutdown_timeout: float = 5.0
    controllers_ready_timeout: float = 10.0
    #: compete for the Lease ``kube-system/setpoint-controller-manager`` and run the
    #: controllers only while holding it: for several servers sharing one storage, so that
    #: one set of built-in controllers runs at a time
    leader_election: bool = False
    #: where the controllers run: a child process ("process", needs
    #: ``server.kubeconfig_path``) or this event loop ("inline")
    controllers_mode: ControllersMode = "inline"
    #: the command that starts the controller manager process
    controller_manager_command: tuple[str, ...] = CONTROLLER_MANAGER_COMMAND
    #: seconds a stopping controller manager process gets before SIGKILL (None:
    #: ``graceful_shutdown_timeout`` + :data:`PROCESS_STOP_MARGIN`)
    controller_stop_timeout: float | None = None
    #: seconds before a controller manager process that died is started again (doubling)
    restart_backoff: float = 1.0
    max_restart_backoff: float = 30.0
    #: the controller manager process's log level
    log_level: str = "INFO"
    #: run a node agent for this machine (``setpoint serve`` does unless ``--no-agent``)
    agent: ServeAgentConfig | None = None

    def __post_init__(self) -> None:
        if self.agent is not None and self.server.kubeconfig_path is None:
            raise ValueError("the node agent needs server.kubeconfig_path (its credentials "
                             "are written beside it)")
        unknown = sorted(set(self.controllers) - set(CONTROLLERS))
        if unknown:
            raise ValueError(f"unknown controllers: {', '.join(unknown)}")
        if self.graceful_shutdown_timeout <= 0 or self.controllers_ready_timeout <= 0:
            raise ValueError("timeouts must be positive")
        if self.controllers_mode not in CONTROLLERS_MODES:
            raise ValueError(f"controllers_mode must be one of {', '.join(CONTROLLERS_MODES)}")
        if self.controllers_mode == "process" and self.server.kubeconfig_path is None \
                and self.controllers:
            raise ValueError("controllers in a process need server.kubeconfig_path (they "
                             "reach the server with that kubeconfig)")
        if self.controller_stop_timeout is not None and self.controller_stop_timeout <= 0:
            raise ValueError("controller_stop_timeout must be positive")
        if not 0 < self.restart_backoff <= self.max_restart_backoff:
            raise ValueError("restart backoffs must be positive, the first not above the max")


def loopback_url(host: str, port: int, scheme: str = "http") -> str:
    """The URL the controllers use: the server's, or loopback when it listens everywhere."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class ControlPlane:
    """A running server and its built-in controllers; see the module docstring."""

    def __init__(self, config: ControlPlaneConfig) -> None:
        self.config = config
        self.server = Server(dataclasses.replace(
            config.server, garbage_collection="garbagecollector" in config.controllers))
        self.manager: runtime.Manager | None = None
        self.client: sp_client.Client | None = None
        #: the controller manager process's supervisor ("process" mode)
        self.supervisor: process.Supervisor | None = None
        #: the node agent process's supervisor
        self.agent_supervisor: process.Supervisor | None = None
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
        await self._start_controllers()
        if self.config.agent is not None:
            await self._start_agent(self.config.agent)

    async def _start_controllers(self) -> None:
        names = [n for n in CONTROLLERS if n in self.config.controllers]
        if not names:
            return
        if self.config.controllers_mode == "process":
            await self._start_process(names)
            return
        client = sp_client.Client(self._client_config(MANAGER, MAX_CONNECTIONS))
        self._stack.push_async_callback(client.close)
        self.client = client
        clients: dict[str, sp_client.Client] = {}
        if self._secure:
            for name in names:
                clients[name] = sp_client.Client(self._client_config(name, 64))
                self._stack.push_async_callback(clients[name].close)
        manager = builtin_controllers.manager(
            client, names, leader_election=self.config.leader_election,
            graceful_shutdown_timeout=self.config.graceful_shutdown_timeout,
            clients=clients, ca_pem=self._ca_pem(), settings=self.config.controller_settings,
            signing_ca=self._signing_ca())
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

    @property
    def _secure(self) -> bool:
        return self.server.config.security is not None

    @property
    def _loopback(self) -> str:
        return loopback_url(self.server.config.host, self.server.port, self.server.scheme)

    def _client_config(self, name: str, max_connections: int) -> sp_client.ClientConfig:
        """How controller ``name`` (or :data:`MANAGER`) reaches the server: its own
        certificate when the server is secured."""
        options: dict[str, Any] = {"max_connections": max_connections,
                                   "user_agent": builtin_controllers.USER_AGENT}
        if not self._secure:
            return sp_client.ClientConfig(server=self._loopback, **options)
        return sp_client.config_from_document(
            self.server.controller_kubeconfig(name, self._loopback), **options)

    def _ca_pem(self) -> str | None:
        secured = self.server.secured
        if secured is None or secured.authority is None:
            return None
        return secured.authority.ca.cert_pem.decode()

    def _signing_ca(self) -> KeyPair | None:
        """The cluster CA with its key, for the csrsigning controller (none: insecure)."""
        secured = self.server.secured
        if secured is None or secured.authority is None:
            return None
        return secured.authority.ca

    def write_credentials(self, names: Sequence[str]) -> Path:
        """Write the controller manager's and each controller's kubeconfig (0600, in a
        0700 ``controllers`` directory beside the admin kubeconfig), for the process."""
        kubeconfig = self.server.config.kubeconfig_path
        assert kubeconfig is not None
        directory = kubeconfig.parent / "controllers"
        for name in (MANAGER, *names):
            kubeconfigs.write(directory / f"{name}.kubeconfig",
                              self.server.controller_kubeconfig(name, self._loopback))
        return directory

    def controller_manager_argv(self, names: Sequence[str]) -> tuple[str, ...]:
        """The command line of the controller manager process."""
        kubeconfig = self.server.config.kubeconfig_path
        assert kubeconfig is not None
        credentials = ["--credentials-dir", str(self.write_credentials(names))] \
            if self._secure else ["--kubeconfig", str(kubeconfig)]
        argv = [*self.config.controller_manager_command, *credentials,
                "--server", self._loopback,
                "--controllers", ",".join(names),
                "--graceful-shutdown-timeout", f"{self.config.graceful_shutdown_timeout:g}",
                "--log-level", self.config.log_level,
                "--node-monitor-grace-period",
                f"{self.config.controller_settings.node_lifecycle.grace_period:g}",
                "--cluster-signing-duration",
                f"{self.config.controller_settings.signing.max_duration.total_seconds():g}"]
        if self.config.leader_election:
            argv.append("--leader-elect")
        secured = self.server.secured
        if secured is not None and secured.authority is not None:
            cert, key = secured.authority.paths("ca")
            argv += ["--cluster-signing-cert-file", str(cert),
                     "--cluster-signing-key-file", str(key)]
        return tuple(argv)

    async def _start_process(self, names: Sequence[str]) -> None:
        supervisor = process.Supervisor(process.SupervisorConfig(
            name="controller manager", argv=self.controller_manager_argv(names),
            stop_timeout=self.config.controller_stop_timeout
            or self.config.graceful_shutdown_timeout + PROCESS_STOP_MARGIN,
            restart_backoff=self.config.restart_backoff,
            max_restart_backoff=self.config.max_restart_backoff))
        self.supervisor = supervisor
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        self._run = group.create_task(supervisor.run(), name="controller manager process")
        self._stack.push_async_callback(self._stop_supervisor)
        ready = group.create_task(supervisor.ready.wait())
        await asyncio.wait({ready, self._run}, timeout=self.config.controllers_ready_timeout,
                           return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not supervisor.ready.is_set():
            log.warning("the controller manager process is not ready after %gs; carrying on",
                        self.config.controllers_ready_timeout)
        log.info("built-in controllers running in process %s: %s", supervisor.pid,
                 ", ".join(names))

    def agent_argv(self, agent: ServeAgentConfig) -> tuple[str, ...]:
        """The node agent's command line, its kubeconfig (``system:node:NAME``) written."""
        kubeconfig = agent.root_dir / "kubeconfig"
        kubeconfigs.write(kubeconfig, self.server.node_kubeconfig(agent.node_name,
                                                                  self._loopback))
        return (*agent.command, "--kubeconfig", str(kubeconfig), "--name", agent.node_name,
                "--root-dir", str(agent.root_dir), "--pod-runtime", agent.pod_runtime,
                "--isolation", agent.isolation,
                *(("--pod-cidr", agent.pod_cidr) if agent.pod_cidr else ()),
                *(("--service-cidr", agent.service_cidr) if agent.service_cidr else ()),
                # simulated pods cost about a KiB each: the node is not the limit
                *(("--max-pods", "100000") if agent.pod_runtime == "simulate" else ()),
                "--port", "0", "--node-labels", f"{CONTROL_PLANE_LABEL}=true",
                "--shutdown-timeout", f"{max(agent.stop_timeout - 5.0, 1.0):g}",
                "--log-level", agent.log_level)

    async def _start_agent(self, agent: ServeAgentConfig) -> None:
        supervisor = process.Supervisor(process.SupervisorConfig(
            name="node agent", argv=self.agent_argv(agent), stop_timeout=agent.stop_timeout,
            restart_backoff=self.config.restart_backoff,
            max_restart_backoff=self.config.max_restart_backoff))
        self.agent_supervisor = supervisor
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        run = group.create_task(supervisor.run(), name="node agent process")

        async def stop() -> None:
            supervisor.stop()
            await asyncio.wait({run})

        self._stack.push_async_callback(stop)
        log.info("node agent %s starting (%s pods)", agent.node_name, agent.pod_runtime)

    async def _stop_supervisor(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop()
        if self._run is not None:
            await asyncio.wait({self._run})

    def kill_controllers(self) -> None:
        """SIGKILL the controller manager and node agent processes, if any: for a process
        about to end abruptly (safe from a signal handler or another thread). The agent's
        pods keep running, for the next agent to adopt."""
        if self.supervisor is not None:
            self.supervisor.kill_now()
        if self.agent_supervisor is not None:
            self.agent_supervisor.kill_now()

    async def _stop_manager(self) -> None:
        if self.manager is not None:
            self.manager.stop()
        if self._run is not None:
            await asyncio.wait({self._run})

    async def stop(self) -> None:
        await self._stack.aclose()
