"""``setpoint controller-manager``: the built-in controllers in a process of their own.

::

    setpoint controller-manager [--kubeconfig PATH] [--context NAME] [--server URL]
                                [--controllers NAMES] [--leader-elect]
                                [--graceful-shutdown-timeout SECONDS]

``setpoint serve`` starts it as its child by default (``--controllers-mode process``, see
:mod:`setpoint.controlplane`), with the admin kubeconfig it wrote and its loopback URL; it
can also be run by hand against any setpoint server, as kube-controller-manager is run
against an API server. It runs a :class:`setpoint.runtime.Manager` with the built-in
controllers ``--controllers`` names (all by default: ``garbagecollector``, ``namespace``,
``crd``), talking to the server only through its API.

Stopping: SIGTERM or SIGINT, or (when ``setpoint serve`` started it) the end of its lifeline
to the parent, stops the manager gracefully (queued work finishes within
``--graceful-shutdown-timeout``, the Lease is released); if the process is still running
:data:`STOP_MARGIN` seconds after that, it ends anyway (exit code 1), however busy it is (see
:mod:`setpoint.process.shutdown`). Started by ``setpoint serve``, it also ends when that
process dies, even by ``kill -9`` (:mod:`setpoint.process.lifeline`).

Exit codes: 0 after a graceful stop (or when the parent that started it is already gone); 1
when it had to be ended; 2 for a usage problem (unknown controllers, unusable kubeconfig).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import controllers as builtin_controllers
from setpoint import process
from setpoint.controllers import csrsigning
from setpoint.controllers.nodelifecycle import DEFAULT_GRACE_PERIOD, NodeLifecycleConfig
from setpoint.controlplane import parse_controllers
from setpoint.pki.certs import KeyPair
from setpoint.process import eventloop

log = logging.getLogger("setpoint.controller-manager")

#: seconds the process may take beyond the graceful shutdown timeout before it is ended
STOP_MARGIN: Final = 5.0
#: connections the controllers' client may open to the server
MAX_CONNECTIONS: Final = 256
DEFAULT_NODE_MONITOR_GRACE_PERIOD: Final = DEFAULT_GRACE_PERIOD


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "controller-manager", help="run the built-in controllers against a server",
        description="Run setpoint's built-in controllers (garbage collector, namespace "
                    "lifecycle, scheduler, workloads, nodes, endpoints, certificates: "
                    "--controllers lists them) against the server a kubeconfig names, "
                    "until SIGINT/SIGTERM.")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="default: KUBECONFIG, the in-cluster account, ~/.kube/config")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use")
    parser.add_argument("--credentials-dir", type=Path, default=None, metavar="DIR",
                        help="a directory of kubeconfigs, as setpoint serve writes them: "
                        "manager.kubeconfig (reads, the Lease) and <controller>.kubeconfig "
                        "for each controller's own identity; instead of --kubeconfig")
    parser.add_argument("--server", default=None, metavar="URL",
                        help="reach the server at URL instead of the kubeconfig's address")
    parser.add_argument("--controllers", default=None, metavar="NAMES",
                        help="built-in controllers to run, comma-separated, of "
                        f"{','.join(builtin_controllers.NAMES)} (default: "
                        f"{','.join(builtin_controllers.DEFAULT_NAMES)})")
    parser.add_argument("--node-monitor-grace-period", type=float,
                        default=DEFAULT_NODE_MONITOR_GRACE_PERIOD, metavar="SECONDS",
                        help="how long a node may stay silent before it is marked Unknown "
                        f"(default: {DEFAULT_NODE_MONITOR_GRACE_PERIOD:g})")
    parser.add_argument("--leader-elect", action="store_true",
                        help="run the controllers only while holding the Lease "
                        f"kube-system/{builtin_controllers.LEASE_NAME}")
    parser.add_argument("--graceful-shutdown-timeout", type=float, default=5.0,
                        metavar="SECONDS",
                        help="how long queued work may take to finish when stopping "
                        "(default: 5)")
    parser.add_argument("--cluster-signing-cert-file", type=Path, default=None, metavar="PATH",
                        help="the CA certificate (PEM) the csrsigning controller signs "
                        "approved CertificateSigningRequests with; with "
                        "--cluster-signing-key-file (without both, csrsigning does not run)")
    parser.add_argument("--cluster-signing-duration", type=float,
                        default=csrsigning.DEFAULT_SIGNING_DURATION, metavar="SECONDS",
                        help="the longest certificate csrsigning issues (at least 600; "
                        f"default: {csrsigning.DEFAULT_SIGNING_DURATION:g}, a year)")
    parser.add_argument("--cluster-signing-key-file", type=Path, default=None, metavar="PATH",
                        help="the private key (PEM) of --cluster-signing-cert-file")
    parser.add_argument("--log-level", default="INFO")
    return parser


def signing_ca(args: argparse.Namespace) -> KeyPair | None:
    """The CA of ``--cluster-signing-cert-file`` and ``--cluster-signing-key-file``."""
    cert, key = args.cluster_signing_cert_file, args.cluster_signing_key_file
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ValueError("--cluster-signing-cert-file and --cluster-signing-key-file go "
                         "together")
    pair = KeyPair(cert.read_bytes(), key.read_bytes())
    pair.private_key()  # refuse a key that is not one now, not at the first approval
    return pair


def client_config(args: argparse.Namespace, name: str | None = None,
                  max_connections: int = MAX_CONNECTIONS) -> sp_client.ClientConfig:
    """The configuration of the manager's shared client, or (``name``) of one controller's
    own client from ``--credentials-dir``."""
    overrides: dict[str, Any] = {"max_connections": max_connections,
                                 "user_agent": builtin_controllers.USER_AGENT}
    if args.server:
        overrides["server"] = args.server
    if args.credentials_dir is not None:
        return sp_client.load_kubeconfig(
            args.credentials_dir / f"{name or 'manager'}.kubeconfig", **overrides)
    if args.kubeconfig is not None or args.context is not None:
        return sp_client.load_kubeconfig(args.kubeconfig, args.context, **overrides)
    return sp_client.auto_config(**overrides)


async def run(config: sp_client.ClientConfig, names: Sequence[str], *, leader_election: bool,
              graceful_shutdown_timeout: float, lifeline: process.Lifeline | None,
              own: Mapping[str, sp_client.ClientConfig] | None = None,
              settings: builtin_controllers.Settings | None = None,
              signing: KeyPair | None = None) -> None:
    """Run the controllers until stopped (see the module docstring); ``own`` gives
    controllers their own identities."""
    loop = asyncio.get_running_loop()
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(sp_client.Client(config))
        clients = {name: await stack.enter_async_context(sp_client.Client(c))
                   for name, c in (own or {}).items()}
        ca = config.ca_data.decode() if config.ca_data else None
        manager = builtin_controllers.manager(
            client, names, leader_election=leader_election,
            graceful_shutdown_timeout=graceful_shutdown_timeout, clients=clients,
            ca_pem=ca, settings=settings, signing_ca=signing)
        guard = process.ShutdownGuard(loop, manager.stop,
                                      timeout=graceful_shutdown_timeout + STOP_MARGIN,
                                      name="setpoint controller-manager")
        with guard:
            if lifeline is not None:
                lifeline.watch(lambda: guard.trigger("parent gone"))
            async with asyncio.TaskGroup() as group:
                running = group.create_task(manager.run(), name="controller manager")
                ready = group.create_task(manager.wait_ready(), name="ready")
                await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
                if ready.done() and not ready.cancelled() and ready.exception() is None:
                    log.info("built-in controllers ready: %s", ", ".join(names))
                    if lifeline is not None:
                        lifeline.ready()
                else:
                    ready.cancel()
    log.info("stopped")



def main(args: argparse.Namespace) -> int:
    lifeline = process.Lifeline.from_environment()
    if lifeline is not None and not lifeline.bind_to_parent():
        print("setpoint controller-manager: the process that started it is gone",
              file=sys.stderr, flush=True)
        return 0
    try:
        names = [n for n in builtin_controllers.NAMES
                 if n in parse_controllers(args.controllers)]
        if args.graceful_shutdown_timeout <= 0:
            raise ValueError("--graceful-shutdown-timeout must be positive")
        config = client_config(args)
        settings = builtin_controllers.Settings(
            node_lifecycle=NodeLifecycleConfig(grace_period=args.node_monitor_grace_period),
            signing=csrsigning.signing_config(args.cluster_signing_duration))
        own: dict[str, sp_client.ClientConfig] = {
            name: client_config(args, name, 64) for name in names} \
            if args.credentials_dir is not None else {}
        signing = signing_ca(args)
    except (ValueError, sp_client.ConfigError, OSError) as e:
        print(f"setpoint controller-manager: error: {e}", file=sys.stderr, flush=True)
        return 2
    try:
        eventloop.run(run(config, names, leader_election=args.leader_elect,
                            graceful_shutdown_timeout=args.graceful_shutdown_timeout,
                            lifeline=lifeline, own=own, settings=settings,
                            signing=signing))
    finally:
        if lifeline is not None:
            lifeline.close()
    return 0
