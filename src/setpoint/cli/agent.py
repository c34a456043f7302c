"""``setpoint agent``: a node that runs pods, joined to a setpoint (or Kubernetes) API server.

::

    setpoint agent --kubeconfig FILE [--name NAME] [--root-dir DIR]
                   [--pod-runtime process|simulate] [--node-ip IP] [--address IP]
                   [--port PORT] [--node-labels k=v,...] [--max-pods N]

Registers the Node ``NAME`` (default: the host name), heartbeats, runs the pods bound to it
as processes (or simulated ones) and serves their logs, exec and port-forward to the API
server (see :mod:`setpoint.node`, ``docs/agent.md``). The kubeconfig's user should be the
node's own identity, ``system:node:NAME`` in group ``system:nodes`` (``setpoint serve``
writes one for its own agent; ``setpoint node-kubeconfig`` makes one for another node).

Stopping: SIGTERM or SIGINT stops the agent and leaves its pods' processes running for the
next agent on the same ``--root-dir`` to adopt; a second signal, or ``--shutdown-timeout``
seconds, ends it at once. Started by ``setpoint serve``, it also ends when that process dies,
even by ``kill -9`` (its pods keep running and are adopted by the next one).

Exit codes: 0 after a stop; 2 for a usage problem; 3 when another agent uses ``--root-dir``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import process
from setpoint.agent import ProcessRuntime, ProcessRuntimeConfig, RootDirInUse
from setpoint.agent.proxy import ProxyConfig
from setpoint.node import POD_RUNTIMES, AgentConfig, NodeAgent, default_node_name
from setpoint.process import eventloop

log = logging.getLogger("setpoint.agent")

EXIT_ROOT_DIR_IN_USE: Final = 3
USER_AGENT: Final = "setpoint-agent"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "agent", help="join a node that runs pods",
        description="Run setpoint's node agent: register a Node with the API server the "
                    "kubeconfig names and run the pods bound to it, until SIGINT/SIGTERM.")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="the node's credentials (default: KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use")
    parser.add_argument("--server", default=None, metavar="URL",
                        help="reach the API server at URL instead of the kubeconfig's")
    parser.add_argument("--name", default=None, metavar="NAME",
                        help="the node's name (default: the host name, lowercased)")
    parser.add_argument("--root-dir", type=Path, default=None, metavar="DIR",
                        help="where the agent keeps its pods' state, volumes and logs "
                        "(default: .setpoint-agent/NAME); one agent per directory")
    parser.add_argument("--pod-runtime", choices=POD_RUNTIMES, default="process",
                        help="run containers as processes (default) or simulate them")
    parser.add_argument("--isolation", choices=("auto", "namespaces", "none"),
                        default="auto",
                        help="process pods: namespaces and cgroups (as root) or a loopback "
                        "address per pod (default: auto)")
    parser.add_argument("--pod-cidr", default=None, metavar="CIDR",
                        help="process pods' addresses (default: 10.244.0.0/16 with "
                        "namespaces, 127.64.0.0/16 without; agents sharing a machine need "
                        "ranges of their own)")
    parser.add_argument("--node-ip", default="", metavar="IP",
                        help="the node's InternalIP (default: the address this machine "
                        "reaches the API server from)")
    parser.add_argument("--address", default="", metavar="IP",
                        help="where the agent's HTTPS endpoint listens (default: the node IP)")
    parser.add_argument("--port", type=int, default=10250,
                        help="the endpoint's port (default: 10250, as the kubelet's; 0: any "
                        "free port, published in the Node's status)")
    parser.add_argument("--node-labels", default="", metavar="K=V,...",
                        help="labels to add to the Node at registration")
    parser.add_argument("--max-pods", type=int, default=110,
                        help="pods this node runs at most (default: 110)")
    parser.add_argument("--service-proxy", choices=("auto", "routes", "loopback", "off"),
                        default="auto",
                        help="the service proxy: cluster IPs made local with routes (root), "
                        "NodePort Services on 127.0.0.1 only, or none (default: auto, routes "
                        "when root on Linux)")
    parser.add_argument("--service-cidr", default="", metavar="CIDR[,CIDR]",
                        help="the cluster's service CIDRs, routed to this machine as a whole "
                        "(default: each cluster IP on its own)")
    parser.add_argument("--shutdown-timeout", type=float, default=15.0, metavar="SECONDS",
                        help="after SIGINT/SIGTERM, end at once if not stopped within this "
                        "time (default: 15)")
    parser.add_argument("--stop-pods", action="store_true",
                        help="do not join: stop every pod whose processes an earlier agent on "
                        "--root-dir left running (after SIGTERM, or kill -9), remove their "
                        "directories, and exit (no API server needed)")
    parser.add_argument("--log-level", default="INFO")
    return parser


def parse_labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"invalid node label {item!r}: use key=value")
        labels[key] = value
    return labels


def agent_config(args: argparse.Namespace) -> AgentConfig:
    name = args.name or default_node_name()
    root = args.root_dir if args.root_dir is not None else Path(".setpoint-agent") / name
    return AgentConfig(node_name=name, root_dir=root.resolve(), pod_runtime=args.pod_runtime,
                       node_ip=args.node_ip, address=args.address, port=args.port,
                       labels=parse_labels(args.node_labels), max_pods=args.max_pods,
                       isolation=args.isolation, pod_cidr=args.pod_cidr,
                       service_proxy=ProxyConfig(
                           mode=args.service_proxy,
                           service_cidrs=tuple(c.strip() for c in args.service_cidr.split(",")
                                               if c.strip())))


def client_config(args: argparse.Namespace) -> sp_client.ClientConfig:
    overrides: dict[str, Any] = {"user_agent": USER_AGENT, "max_connections": 64}
    if args.server:
        overrides["server"] = args.server
    if args.kubeconfig is not None or args.context is not None:
        return sp_client.load_kubeconfig(args.kubeconfig, args.context, **overrides)
    return sp_client.auto_config(**overrides)


async def run(agent: NodeAgent, *, shutdown_timeout: float,
              lifeline: process.Lifeline | None) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopping = asyncio.Event()

    def stop() -> None:
        stopping.set()

    guard = process.ShutdownGuard(loop, stop, timeout=shutdown_timeout,
                                  name="setpoint agent")
    with guard:
        if lifeline is not None:
            lifeline.watch(lambda: guard.trigger("parent gone"))
        running = asyncio.ensure_future(agent.run(
            on_ready=lifeline.ready if lifeline is not None else None))
        stopped = asyncio.ensure_future(stopping.wait())
        try:
            await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not running.done():
                running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
    log.info("stopped; the pods' processes keep running for the next agent to adopt")



async def stop_pods(config: AgentConfig) -> int:
    """Adopt what the process runtime recorded under ``config.root_dir`` and remove every pod
    (SIGTERM, each container's grace period, then SIGKILL of its whole process tree); the
    number of pods stopped."""
    runtime = ProcessRuntime(ProcessRuntimeConfig(
        root_dir=config.root_dir / "pods", node_name=config.node_name,
        isolation=config.isolation, pod_cidr=config.pod_cidr))
    async with runtime:
        count = len(runtime.pods())
        await runtime.shutdown_pods()
    return count


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.stop_pods:
        if args.root_dir is None:
            print("setpoint agent: error: --stop-pods needs --root-dir", file=sys.stderr,
                  flush=True)
            return 2
        if not (args.root_dir / "pods").is_dir():
            return 0
        try:
            stopped = asyncio.run(stop_pods(agent_config(args)))
        except RootDirInUse as e:
            print(f"setpoint agent: error: {e}", file=sys.stderr, flush=True)
            return EXIT_ROOT_DIR_IN_USE
        log.info("stopped %d pods left in %s", stopped, args.root_dir)
        return 0
    lifeline = process.Lifeline.from_environment()
    if lifeline is not None and not lifeline.bind_to_parent():
        print("setpoint agent: the process that started it is gone", file=sys.stderr,
              flush=True)
        return 0
    try:
        if args.shutdown_timeout <= 0:
            raise ValueError("--shutdown-timeout must be positive")
        agent = NodeAgent(client_config(args), agent_config(args))
    except (ValueError, sp_client.ConfigError, OSError) as e:
        print(f"setpoint agent: error: {e}", file=sys.stderr, flush=True)
        return 2
    try:
        eventloop.run(run(agent, shutdown_timeout=args.shutdown_timeout,
                            lifeline=lifeline))
    except RootDirInUse as e:
        print(f"setpoint agent: error: {e}", file=sys.stderr, flush=True)
        return EXIT_ROOT_DIR_IN_USE
    except ValueError as e:
        print(f"setpoint agent: error: {e}", file=sys.stderr, flush=True)
        return 2
    finally:
        if lifeline is not None:
            lifeline.close()
    return 0
