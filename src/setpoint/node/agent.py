"""The node agent: a :class:`PodRuntime` connected to an API server (setpoint's kubelet).

``await NodeAgent(client_config, AgentConfig(...)).run()`` until cancelled:

1. opens the runtime (:class:`~setpoint.agent.ProcessRuntime` on ``root_dir``, which first
   adopts what a previous agent on that directory left running, or the
   :class:`~setpoint.agent.simulated.SimulatedRuntime`);
2. starts its HTTPS endpoint (:mod:`setpoint.node.endpoint`) for the API server's streams
   and its resource metrics (:mod:`setpoint.node.usage`, for ``kubectl top``);
3. registers its Node and keeps its Lease and status fresh (:mod:`setpoint.node.heartbeat`);
4. watches Services and EndpointSlices (:mod:`setpoint.node.services`): the service variables
   of the pods it starts, and the service proxy (:mod:`setpoint.agent.proxy`) that makes
   cluster IPs reach ready endpoints (not with the simulated runtime);
5. runs the pods bound to the node (:mod:`setpoint.node.pods`).

Stopping (cancellation, SIGTERM of ``setpoint agent``) stops watching and reporting and
**leaves the pods' processes running**, as stopping a kubelet leaves its containers: the
next agent on the same ``root_dir`` adopts them (never starting one twice), and removes
those whose pods were deleted meanwhile. The Node stays registered; without heartbeats its
Lease expires. The simulated runtime keeps nothing: its pods are started again by the next
agent. The service proxy's listeners close and its routes are removed on stop; routes left by
an agent killed with -9 are removed by the next one on the same ``root_dir``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from setpoint import client as sp_client
from setpoint.agent import PodRuntime, ProcessRuntime, ProcessRuntimeConfig
from setpoint.agent.proxy import ProxyConfig
from setpoint.agent.simulated import SimulatedRuntime
from setpoint.apimachinery import resourcemetrics as rm
from setpoint.node import endpoint, machine, usage
from setpoint.node.heartbeat import Heartbeat, HeartbeatConfig
from setpoint.node.pods import PodLoop, PodLoopConfig
from setpoint.node.services import ServiceWatch
from setpoint.pki import files

log = logging.getLogger(__name__)

PodRuntimeKind = Literal["process", "simulate"]
POD_RUNTIMES = ("process", "simulate")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    node_name: str
    root_dir: Path
    pod_runtime: PodRuntimeKind = "process"
    #: the node's InternalIP ("": the address this machine reaches the API server from)
    node_ip: str = ""
    #: where the endpoint listens ("": the node IP) and its port (0: any free one)
    address: str = ""
    port: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)
    max_pods: int = 110
    isolation: Literal["auto", "namespaces", "none"] = "auto"
    #: the process pods' addresses (None: the runtime's default for the isolation)
    pod_cidr: str | None = None
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    pod_workers: int = 8
    status_workers: int = 16
    #: the service proxy (its mode ``off`` with the simulated runtime whatever is given)
    service_proxy: ProxyConfig = field(default_factory=ProxyConfig)

    def __post_init__(self) -> None:
        if not self.node_name or len(self.node_name) > 253 or self.node_name != \
                self.node_name.lower() or any(ch not in "abcdefghijklmnopqrstuvwxyz0123456789-."
                                              for ch in self.node_name):
            raise ValueError(f"invalid node name {self.node_name!r}: lowercase letters, "
                             "digits, '-' and '.' (at most 253)")
        if self.pod_runtime not in POD_RUNTIMES:
            raise ValueError(f"pod_runtime must be one of {', '.join(POD_RUNTIMES)}")
        if not 0 <= self.port <= 65535:
            raise ValueError("port out of range")
        if not 1 <= self.max_pods <= 100_000:
            raise ValueError("max_pods must be between 1 and 100000")


def default_node_name() -> str:
    """The machine's host name, lowercased (the kubelet's default)."""
    return socket.gethostname().split(".")[0].lower() or "localhost"


class NodeAgent:
    """See the module docstring."""

    def __init__(self, client_config: sp_client.ClientConfig, config: AgentConfig) -> None:
        self.client_config = client_config
        self.config = config
        self.runtime: PodRuntime | None = None
        self.pods: PodLoop | None = None
        self.heartbeat: Heartbeat | None = None
        self.services: ServiceWatch | None = None
        self.port = 0
        self.ready = asyncio.Event()

    def _node_ip(self) -> str:
        if self.config.node_ip:
            return self.config.node_ip
        url = urlsplit(self.client_config.server)
        return machine.route_address(url.hostname or "127.0.0.1", url.port or 443)

    def _client_ca(self) -> bytes | None:
        if self.client_config.ca_data:
            return self.client_config.ca_data
        if self.client_config.ca_file is not None:
            return self.client_config.ca_file.read_bytes()
        return None

    def _make_runtime(self, node_ip: str) -> PodRuntime:
        if self.config.pod_runtime == "simulate":
            return SimulatedRuntime(node_name=self.config.node_name, host_ip=node_ip,
                                    max_pods=self.config.max_pods,
                                    pod_cidr=self.config.pod_cidr or "10.96.0.0/12")
        return ProcessRuntime(ProcessRuntimeConfig(
            root_dir=self.config.root_dir / "pods", node_name=self.config.node_name,
            host_ip=node_ip, max_pods=self.config.max_pods, isolation=self.config.isolation,
            pod_cidr=self.config.pod_cidr))

    async def run(self, on_ready: Callable[[], None] | None = None) -> None:
        config = self.config
        files.private_dir(config.root_dir)
        node_ip = self._node_ip()
        listen = config.address or node_ip
        ca = self._client_ca()
        secure = ca is not None
        if not secure and not endpoint.is_loopback(listen):
            raise ValueError(f"without a cluster CA (a plain-HTTP server) the agent's "
                             f"endpoint has no authentication and serves on loopback only, "
                             f"not {listen}")
        context = None
        if ca is not None:
            hosts = list(dict.fromkeys([node_ip, listen, config.node_name, "localhost",
                                        "127.0.0.1"]))
            crt, key = await asyncio.to_thread(endpoint.serving_certificate, config.root_dir,
                                               config.node_name, hosts)
            context = endpoint.tls_context(crt, key, ca)
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(sp_client.Client(self.client_config))
            runtime = self._make_runtime(node_ip)
            await stack.enter_async_context(runtime)
            self.runtime = runtime
            proxy_config = config.service_proxy
            if config.pod_runtime == "simulate":
                proxy_config = ProxyConfig(mode="off")
            services = ServiceWatch(client, proxy_config, config.root_dir)
            self.services = services
            pods = PodLoop(client, runtime, PodLoopConfig(
                node_name=config.node_name, workers=config.pod_workers,
                status_workers=config.status_workers), service_env=services.env)
            self.pods = pods

            def lookup(namespace: str, name: str) -> Mapping[str, Any] | None:
                informer = pods.informer
                return None if informer is None else informer.cache.get(f"{namespace}/{name}")

            def bound_pods() -> list[Mapping[str, Any]]:
                informer = pods.informer
                return [] if informer is None else list(informer.cache.list())

            node_probe = usage.NodeProbe()

            async def resource_metrics() -> str:
                scrape = await usage.collect(runtime, bound_pods(), node_probe, time.time)
                return rm.render(scrape)

            app = endpoint.build_app(runtime, lookup, secure=secure,
                                     resource_metrics=resource_metrics)
            ep = await stack.enter_async_context(
                endpoint.Endpoint(app, listen, config.port, context))
            self.port = ep.port
            kind = "process" if config.pod_runtime == "process" else "simulated"
            identity = machine.NodeIdentity(
                name=config.node_name, address=node_ip, hostname=socket.gethostname(),
                port=ep.port, max_pods=config.max_pods,
                runtime_version=f"setpoint-{kind}://{machine.AGENT_VERSION.lstrip('v')}",
                labels=dict(config.labels))
            probe = machine.Probe(config.root_dir)
            heartbeat = Heartbeat(client, identity, probe.sample, config.heartbeat)
            self.heartbeat = heartbeat
            async with asyncio.TaskGroup() as group:
                group.create_task(heartbeat.run(), name="heartbeat")
                await heartbeat.registered.wait()
                group.create_task(services.run(), name="services")
                await services.synced.wait()
                group.create_task(pods.run(), name="pods")
                await pods.synced.wait()
                log.info("node %s ready (%s runtime, endpoint %s:%s)", config.node_name, kind,
                         listen, ep.port)
                self.ready.set()
                if on_ready is not None:
                    on_ready()
