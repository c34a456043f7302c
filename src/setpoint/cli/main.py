"""The ``setpoint`` command: arguments in, config dataclasses out, then run.

``setpoint serve`` runs the control plane (the API server and the built-in controllers that
``--controllers`` names, see :mod:`setpoint.controlplane`; by default in a child process,
``--controllers-mode process``) until SIGINT or SIGTERM, then shuts down gracefully
(controllers first, then open watches end, storage closes after its last acknowledged
write). A stop signal always ends it: if it has not exited ``--shutdown-timeout`` seconds
after the first one, or at a second one, it ends at once with exit code 1 (its controller
process killed first; see :mod:`setpoint.process.shutdown`). With ``--storage etcd`` several
servers may share one etcd cluster; the built-in controllers then run under leader election
(``--leader-elect``, on by default there), so that one server at a time runs them. One server
at a time uses a data directory (:mod:`setpoint.cli.datadir`): a second one exits with status
3 before touching it.
``setpoint run FILE_OR_MODULE`` runs the controllers a file or module defines (see
:mod:`setpoint.cli.run`); ``setpoint controller-manager`` runs the built-in ones (see
:mod:`setpoint.cli.controller_manager`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from setpoint import controlplane, process
from setpoint.audit.log import AuditLogConfig
from setpoint.cli import agent as agent_command
from setpoint.cli import controller_manager as controller_manager_command
from setpoint.cli import crd as crd_command
from setpoint.cli import datadir
from setpoint.cli import kubeconfig as kubeconfig_command
from setpoint.cli import run as run_command
from setpoint.cli import uilogin as uilogin_command
from setpoint.controllers import NodeLifecycleConfig, Settings
from setpoint.controllers.csrsigning import (
    DEFAULT_SIGNING_DURATION,
    signing_config,
)
from setpoint.controllers.nodelifecycle import DEFAULT_GRACE_PERIOD
from setpoint.node import default_node_name
from setpoint.pki import files
from setpoint.pki.authority import Authority
from setpoint.process import eventloop
from setpoint.registry import listbudget
from setpoint.registry import watchcache as watch_cache
from setpoint.registry.serviceips import (
    DEFAULT_CLUSTER_IP_RANGE,
    ServiceNetworkConfig,
    parse_port_range,
)
from setpoint.server.limits import Limits
from setpoint.server.securing import SecurityConfig
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig, create_backend
from setpoint.storage import Unavailable as StorageUnavailable
from setpoint.storage.encryption import generate_config as generate_encryption
from setpoint.storage.encryption import load_config as load_encryption

DEFAULT_NODE_MONITOR_GRACE_PERIOD = DEFAULT_GRACE_PERIOD

log = logging.getLogger("setpoint")

#: the exit status of ``setpoint serve`` when another server holds the data directory
EXIT_DATA_DIR_IN_USE = 3
#: seconds ``setpoint serve`` may take to stop gracefully after a stop signal
DEFAULT_SHUTDOWN_TIMEOUT = 30.0

DEFAULT_WATCH_EVENTS = watch_cache.DEFAULT_CAPACITY
DEFAULT_WATCH_BYTES = watch_cache.DEFAULT_MAX_BYTES
DEFAULT_LIST_BYTES = listbudget.DEFAULT_MAX_BYTES


#: what ``setpoint --help`` says (plain text: the module docstring is for the API docs)
DESCRIPTION = (
    "setpoint: a Kubernetes-compatible control plane and controller runtime. "
    "'setpoint serve' runs the control plane (the API server and the built-in controllers) "
    "until SIGINT or SIGTERM; 'setpoint run FILE_OR_MODULE' runs the controllers a Python "
    "file or module defines; 'setpoint controller-manager' runs the built-in controllers "
    "against any cluster; 'setpoint kubeconfig' writes a kubeconfig for a ServiceAccount; "
    "'setpoint crd generate MODULE:Model' prints the CRD of a typed resource. "
    "'setpoint COMMAND --help' describes each.")


#: ``setpoint serve``'s flags for :class:`Limits` fields: (flag, field, type, metavar, help
#: with ``{default}``)
_LIMIT_FLAGS: tuple[tuple[str, str, type, str, str], ...] = (
    ("--max-requests-inflight", "max_requests_inflight", int, "N",
     "read-only requests served at once; more are answered 429 (default: {default}; watches "
     "are not counted)"),
    ("--max-mutating-requests-inflight", "max_mutating_requests_inflight", int, "N",
     "writes served at once; more are answered 429 (default: {default})"),
    ("--max-connections", "max_connections", int, "N",
     "open client connections (default: {default}, lowered to fit the file descriptor limit)"),
    ("--header-timeout", "header_timeout", float, "SECONDS",
     "a connection that has not sent a whole request header in this time is closed "
     "(default: {default})"),
    ("--body-timeout", "body_timeout", float, "SECONDS",
     "a request body that has not arrived in this time is answered 408 (default: {default})"),
    ("--idle-timeout", "idle_timeout", float, "SECONDS",
     "a kept-alive connection idle this long is closed (default: {default})"),
    ("--tcp-keepalive-idle", "keepalive_idle", int, "SECONDS",
     "TCP keep-alive probes start after this much silence on a connection (default: "
     "{default})"),
    ("--tcp-keepalive-interval", "keepalive_interval", int, "SECONDS",
     "seconds between keep-alive probes (default: {default})"),
    ("--tcp-keepalive-count", "keepalive_count", int, "N",
     "unanswered keep-alive probes after which the connection is dropped (default: "
     "{default})"),
    ("--tcp-user-timeout", "tcp_user_timeout", float, "SECONDS",
     "sent data unacknowledged (or unread behind a closed receive window) this long drops "
     "the connection (default: {default}: the kernel's limit, as kube-apiserver)"),
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="setpoint", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the control plane")
    serve.add_argument("--data-dir", type=Path, default=Path(".setpoint"),
                       help="where data and the admin kubeconfig live (default: .setpoint)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443, help="0 picks any free port")
    serve.add_argument("--storage", choices=("sqlite", "memory", "etcd"), default="sqlite")
    serve.add_argument("--etcd-endpoints", default="", metavar="URLS",
                       help="with --storage etcd: the etcd members' client URLs, "
                       "comma-separated (http://127.0.0.1:2379,http://127.0.0.2:2379); "
                       "https:// ones (all or none) for TLS")
    serve.add_argument("--etcd-cafile", type=Path, default=None, metavar="PATH",
                       help="with https:// etcd endpoints: the PEM CA certificates etcd's "
                       "serving certificate must chain to (default: the public roots "
                       "gRPC ships with)")
    serve.add_argument("--etcd-certfile", type=Path, default=None, metavar="PATH",
                       help="with https:// etcd endpoints: the PEM client certificate "
                       "presented to etcd (etcd --client-cert-auth); with --etcd-keyfile")
    serve.add_argument("--etcd-keyfile", type=Path, default=None, metavar="PATH",
                       help="the unencrypted PEM private key of --etcd-certfile")
    serve.add_argument("--etcd-prefix", default="", metavar="PREFIX",
                       help="with --storage etcd: put every key under PREFIX (e.g. "
                       "/clusters/a) so that several clusters can share one etcd; "
                       "default: none, keys are /registry/...")
    serve.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                       help="run the built-in controllers only while holding the Lease "
                       f"kube-system/{controlplane.LEASE_NAME} (default: on with --storage "
                       "etcd, where several servers may share the storage; else off)")
    serve.add_argument("--compaction-interval", type=float, default=300.0, metavar="SECONDS",
                       help="compact storage history this often, each time to the revision "
                       "seen one interval earlier (default: 300; 0: never)")
    serve.add_argument("--watch-cache-events", type=int, default=DEFAULT_WATCH_EVENTS,
                       metavar="N",
                       help="events the watch cache keeps for watches that resume from a "
                       f"resourceVersion (older ones: 410 Gone; default: {DEFAULT_WATCH_EVENTS})")
    serve.add_argument("--watch-cache-bytes", type=byte_size, default=DEFAULT_WATCH_BYTES,
                       metavar="SIZE",
                       help="stored bytes of those events at most, e.g. 256Mi (default: "
                       f"{format_size(DEFAULT_WATCH_BYTES)})")
    serve.add_argument("--list-budget-bytes", type=byte_size, default=DEFAULT_LIST_BYTES,
                       metavar="SIZE",
                       help="estimated response bytes of the LISTs built at once; more wait "
                       "up to 5 s, then get 429 (default: "
                       f"{format_size(DEFAULT_LIST_BYTES)})")
    limits = Limits()
    for flag, name, kind, metavar, text in _LIMIT_FLAGS:
        default = getattr(limits, name)
        serve.add_argument(flag, type=kind, metavar=metavar, default=default, dest=name,
                           help=text.format(default=f"{default:g}"))
    serve.add_argument("--service-cluster-ip-range", default=DEFAULT_CLUSTER_IP_RANGE,
                       metavar="CIDR",
                       help="the addresses Services get their cluster IP from; the first is "
                            "the kubernetes Service's (default %(default)s)")
    serve.add_argument("--service-node-port-range", default="30000-32767",
                       metavar="LOW-HIGH",
                       help="the ports NodePort Services get (default %(default)s)")
    secure = serve.add_argument_group(
        "security", "TLS with a certificate from DATA_DIR/pki, client certificates, tokens, "
        "RBAC, Secrets encrypted at rest: all on unless --insecure-plain-http")
    secure.add_argument("--insecure-plain-http", action="store_true",
                        help="serve plain HTTP with no authentication: every request runs as "
                        "an administrator. For local experiments only; refused on a "
                        "non-loopback --host unless --insecure-plain-http-on-network")
    secure.add_argument("--insecure-plain-http-on-network", action="store_true",
                        help="allow --insecure-plain-http on an address others can reach")
    secure.add_argument("--pki-dir", type=Path, default=None, metavar="DIR",
                        help="where the CA, certificates, the token signing key and the "
                        "generated encryption key live (default: DATA_DIR/pki); servers "
                        "sharing one etcd must share it")
    secure.add_argument("--tls-san", action="append", default=[], metavar="NAME",
                        help="another DNS name or IP address for the serving certificate "
                        "(repeatable; localhost, 127.0.0.1, ::1, the host name and --host "
                        "are always included)")
    secure.add_argument("--advertise-address", default=None, metavar="ADDRESS",
                        help="the address clients reach this server at (added to the "
                        "certificate)")
    secure.add_argument("--token-auth-file", type=Path, default=None, metavar="PATH",
                        help="static bearer tokens, CSV: token,user,uid,\"group1,group2\"")
    secure.add_argument("--service-account-issuer", default=None, metavar="URL",
                        help="the iss of ServiceAccount tokens (default: "
                        "https://kubernetes.default.svc.cluster.local)")
    secure.add_argument("--api-audiences", default=None, metavar="AUDIENCES",
                        help="audiences tokens must name, comma-separated (default: the "
                        "issuer)")
    secure.add_argument("--encryption-provider-config", type=Path, default=None,
                        metavar="PATH",
                        help="an EncryptionConfiguration (default: PKI_DIR/encryption.yaml, "
                        "generated on first start with a new key for Secrets)")
    secure.add_argument("--no-encryption", action="store_true",
                        help="store Secrets unencrypted")
    secure.add_argument("--audit-log-path", type=Path, default=None, metavar="PATH",
                        help="write audit events (audit.k8s.io/v1, JSON lines) to PATH")
    secure.add_argument("--audit-policy-file", type=Path, default=None, metavar="PATH",
                        help="an audit.k8s.io/v1 Policy (default: metadata of every request, "
                        "bodies of RBAC writes, nothing of health checks)")
    secure.add_argument("--audit-log-maxsize", type=int, default=100, metavar="MB",
                        help="rotate the audit log at this size (default: 100)")
    secure.add_argument("--audit-log-maxbackup", type=int, default=10, metavar="N",
                        help="rotated audit logs to keep (default: 10)")
    secure.add_argument("--audit-log-maxage", type=int, default=30, metavar="DAYS",
                        help="days to keep rotated audit logs (default: 30)")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--controllers", default=None, metavar="NAMES",
                       help="built-in controllers to run, comma-separated, of "
                       f"{','.join(controlplane.CONTROLLERS)} (default: "
                       f"{','.join(controlplane.DEFAULT_CONTROLLERS)}; empty: none)")
    serve.add_argument("--node-monitor-grace-period", type=float,
                       default=DEFAULT_NODE_MONITOR_GRACE_PERIOD, metavar="SECONDS",
                       help="how long a node may stay silent before it is marked Unknown "
                       "and tainted unreachable (default: "
                       f"{DEFAULT_NODE_MONITOR_GRACE_PERIOD:g})")
    serve.add_argument("--cluster-signing-duration", type=float,
                       default=DEFAULT_SIGNING_DURATION, metavar="SECONDS",
                       help="the longest certificate the csrsigning controller issues for an "
                       "approved CertificateSigningRequest (at least 600; default: "
                       f"{DEFAULT_SIGNING_DURATION:g}, a year)")
    serve.add_argument("--controllers-mode", choices=controlplane.CONTROLLERS_MODES,
                       default="process",
                       help="run the built-in controllers in a child process that the server "
                       "owns (process, the default) or in the server's own event loop "
                       "(inline)")
    serve.add_argument("--shutdown-timeout", type=float, default=DEFAULT_SHUTDOWN_TIMEOUT,
                       metavar="SECONDS",
                       help="after SIGINT/SIGTERM, end the process at once if it has not "
                       f"stopped gracefully within this time (default: "
                       f"{DEFAULT_SHUTDOWN_TIMEOUT:g})")
    node = serve.add_argument_group(
        "node", "the node agent serve runs for its own machine (as k3s server does)")
    node.add_argument("--no-agent", "--disable-agent", dest="agent", action="store_false",
                      help="run no node agent: this machine runs no pods")
    node.add_argument("--pod-runtime", choices=controlplane.POD_RUNTIMES, default="process",
                      help="run pods' containers as processes (default) or simulate them "
                      "(no process: for operator and scale tests)")
    node.add_argument("--pod-isolation", choices=("auto", "namespaces", "none"),
                      default="auto",
                      help="process pods: a network namespace, mounts and cgroups each (as "
                      "root), or a loopback address each (none; the default when not root)")
    node.add_argument("--pod-cidr", default=None, metavar="CIDR",
                      help="its pods' addresses (default: 10.244.0.0/16 with namespaces, "
                      "127.64.0.0/16 without; servers sharing a machine need ranges of "
                      "their own)")
    node.add_argument("--node-name", default=None, metavar="NAME",
                      help="the name of this machine's Node (default: the host name)")
    run_command.add_parser(sub)
    agent_command.add_parser(sub)
    controller_manager_command.add_parser(sub)
    kubeconfig_command.add_parser(sub)
    crd_command.add_parser(sub)
    uilogin_command.add_parser(sub)
    return parser


_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "Ki": 1024, "Mi": 1024**2,
          "Gi": 1024**3}


def byte_size(text: str) -> int:
    """A positive size in bytes, with an optional Kubernetes quantity suffix (``256Mi``)."""
    number = text.rstrip("kKMGi")
    unit = text[len(number):]
    if unit not in _UNITS or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use bytes or a suffix of {', '.join(u for u in _UNITS if u)}")
    value = int(number) * _UNITS[unit]
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return value


def format_size(value: int) -> str:
    for unit in ("Gi", "Mi", "Ki"):
        if value % _UNITS[unit] == 0:
            return f"{value // _UNITS[unit]}{unit}"
    return str(value)


def serve_config(args: argparse.Namespace) -> ServerConfig:
    """The server's configuration; ``ValueError`` for options that do not fit together."""
    tls_files = (args.etcd_cafile, args.etcd_certfile, args.etcd_keyfile)
    if args.storage != "etcd" and (args.etcd_endpoints or args.etcd_prefix or any(tls_files)):
        raise ValueError("--etcd-endpoints, --etcd-prefix and the --etcd TLS files need "
                         "--storage etcd")
    if args.compaction_interval < 0:
        raise ValueError("--compaction-interval must not be negative")
    if args.watch_cache_events < 1:
        raise ValueError("--watch-cache-events must be positive")
    data_dir: Path = args.data_dir.resolve()
    if args.storage == "etcd":
        endpoints = tuple(e.strip() for e in args.etcd_endpoints.split(",") if e.strip())
        if not endpoints:
            raise ValueError("--storage etcd needs --etcd-endpoints")
        if (args.etcd_certfile is None) != (args.etcd_keyfile is None):
            raise ValueError("--etcd-certfile and --etcd-keyfile go together")
        ca_file, cert_file, key_file = (None if path is None else path.resolve()
                                        for path in tls_files)
        storage = StorageConfig(kind="etcd", endpoints=endpoints, prefix=args.etcd_prefix,
                                ca_file=ca_file, cert_file=cert_file, key_file=key_file)
        # validates endpoints and prefix, reads the TLS files; connects only when started
        create_backend(storage)
    elif args.storage == "sqlite":
        storage = StorageConfig(kind="sqlite", path=data_dir / "state.db")
    else:
        storage = StorageConfig(kind="memory")
    limits = Limits(**{name: getattr(args, name) for _, name, _, _, _ in _LIMIT_FLAGS})
    files.private_dir(data_dir)
    for name in ("state.db", "state.db-wal", "state.db-shm", "kubeconfig"):
        files.tighten(data_dir / name)  # written by an older version, or by hand
    return ServerConfig(host=args.host, port=args.port, storage=storage,
                        kubeconfig_path=data_dir / "kubeconfig",
                        compaction_interval=args.compaction_interval or None,
                        watch_cache_capacity=args.watch_cache_events,
                        watch_cache_bytes=args.watch_cache_bytes,
                        list_budget_bytes=args.list_budget_bytes, limits=limits,
                        security=security_config(args, data_dir),
                        encryption_config=encryption_config(args, data_dir),
                        service_network=ServiceNetworkConfig(
                            cluster_ip_range=args.service_cluster_ip_range,
                            node_port_range=parse_port_range(args.service_node_port_range)),
                        advertise_address=args.advertise_address)


LOOPBACK = ("127.0.0.1", "::1", "localhost")


def security_config(args: argparse.Namespace, data_dir: Path) -> SecurityConfig | None:
    """TLS, authentication, RBAC and audit as the flags say; None for plain HTTP."""
    if args.insecure_plain_http:
        if args.host not in LOOPBACK and not args.insecure_plain_http_on_network:
            raise ValueError(f"--insecure-plain-http on {args.host}, an address others can "
                             "reach, would let anyone act as an administrator; add "
                             "--insecure-plain-http-on-network if you really mean it")
        for flag in ("token_auth_file", "audit_log_path", "service_account_issuer"):
            if getattr(args, flag) is not None:
                raise ValueError(f"--{flag.replace('_', '-')} needs TLS (drop "
                                 "--insecure-plain-http)")
        return None
    if args.token_auth_file is not None and not args.token_auth_file.is_file():
        raise ValueError(f"--token-auth-file {args.token_auth_file}: no such file")
    hosts = list(args.tls_san)
    if args.advertise_address:
        hosts.append(args.advertise_address)
    audit = None
    if args.audit_log_path is not None:
        audit = AuditLogConfig(path=args.audit_log_path.resolve(),
                               max_size=args.audit_log_maxsize * 1024 * 1024,
                               max_backups=args.audit_log_maxbackup,
                               max_age_days=args.audit_log_maxage)
    elif args.audit_policy_file is not None:
        raise ValueError("--audit-policy-file needs --audit-log-path")
    options: dict[str, Any] = {}
    if args.service_account_issuer:
        options["service_account_issuer"] = args.service_account_issuer
    if args.api_audiences:
        options["api_audiences"] = tuple(a.strip() for a in args.api_audiences.split(",")
                                         if a.strip())
    return SecurityConfig(pki_dir=pki_dir(args, data_dir), hosts=tuple(hosts),
                          token_auth_file=args.token_auth_file, audit_log=audit,
                          audit_policy_file=args.audit_policy_file, **options)


def encryption_config(args: argparse.Namespace, data_dir: Path) -> Path | None:
    """The EncryptionConfiguration in use (generated on first start), or None."""
    if args.no_encryption:
        if args.encryption_provider_config is not None:
            raise ValueError("--no-encryption and --encryption-provider-config conflict")
        return None
    if args.encryption_provider_config is not None:
        path: Path = args.encryption_provider_config.resolve()
        load_encryption(path)  # refused here, before anything starts, when unusable
        return path
    authority = Authority(pki_dir(args, data_dir))
    path = authority.generated("encryption.yaml", lambda: generate_encryption().encode())
    files.tighten(path)
    return path


def pki_dir(args: argparse.Namespace, data_dir: Path) -> Path:
    return args.pki_dir.resolve() if args.pki_dir is not None else data_dir / "pki"


def raise_file_limit() -> None:
    """Raise the soft limit on open files to the hard one, as Go programs (kube-apiserver)
    do at start: each client connection holds a descriptor."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as e:
            log.debug("could not raise the open file limit to %s: %s", hard, e)


def plane_config(args: argparse.Namespace) -> controlplane.ControlPlaneConfig:
    """The control plane's configuration; ``ValueError`` for options that do not fit."""
    if args.shutdown_timeout <= 0:
        raise ValueError("--shutdown-timeout must be positive")
    server = serve_config(args)
    agent = None
    if args.agent:
        agent = controlplane.ServeAgentConfig(
            node_name=args.node_name or default_node_name(), pod_runtime=args.pod_runtime,
            isolation=args.pod_isolation, pod_cidr=args.pod_cidr,
            service_cidr=args.service_cluster_ip_range,
            root_dir=args.data_dir.resolve() / "agent")
    return controlplane.ControlPlaneConfig(
        server=server, agent=agent,
        controllers=controlplane.parse_controllers(args.controllers),
        controller_settings=Settings(
            node_lifecycle=NodeLifecycleConfig(grace_period=args.node_monitor_grace_period),
            signing=signing_config(args.cluster_signing_duration)),
        leader_election=leader_election(args),
        controllers_mode=args.controllers_mode,
        log_level=args.log_level.upper())


def leader_election(args: argparse.Namespace) -> bool:
    """``--leader-elect`` as given, else on exactly when the storage may be shared (etcd)."""
    if args.leader_elect is None:
        return bool(args.storage == "etcd")
    return bool(args.leader_elect)


async def _serve(plane_config: controlplane.ControlPlaneConfig,
                 shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> None:
    stop = asyncio.Event()
    plane = controlplane.ControlPlane(plane_config)
    guard = process.ShutdownGuard(asyncio.get_running_loop(), stop.set,
                                  timeout=shutdown_timeout, on_force=[plane.kill_controllers],
                                  name="setpoint serve")
    with guard:
        async with plane:
            print(f"setpoint serving on {plane.server.url}; kubeconfig: "
                  f"{plane_config.server.kubeconfig_path}", flush=True)
            await stop.wait()
            log.info("shutting down")



def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        # everything serve writes (database, keys, kubeconfigs, logs) is its user's alone
        os.umask(0o077)
        try:
            config = plane_config(args)
        except (ValueError, OSError) as e:
            print(f"setpoint serve: error: {e}", file=sys.stderr, flush=True)
            return 2
        if config.server.security is None:
            log.warning("*** --insecure-plain-http: serving plain HTTP WITHOUT AUTHENTICATION "
                        "on %s; every request, from anyone who can reach it, runs as an "
                        "administrator ***", config.server.host)
        lock = datadir.DataDirLock(args.data_dir.resolve())
        try:
            lock.acquire()
        except datadir.DataDirInUse as e:
            print(f"setpoint serve: error: {e}", file=sys.stderr, flush=True)
            return EXIT_DATA_DIR_IN_USE
        raise_file_limit()
        try:
            eventloop.run(_serve(config, args.shutdown_timeout))
        except StorageUnavailable as e:
            print(f"setpoint serve: error: storage is unavailable: {e}", file=sys.stderr,
                  flush=True)
            return 1
        finally:
            lock.release()
        return 0
    if args.command == "run":
        return run_command.main(args)
    if args.command == "agent":
        return agent_command.main(args)
    if args.command == "controller-manager":
        return controller_manager_command.main(args)
    if args.command == "kubeconfig":
        return kubeconfig_command.main(args)
    if args.command == "crd":
        return crd_command.main(args)
    if args.command == "ui-login":
        return uilogin_command.main(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
