"""``setpoint run FILE_OR_MODULE``: run the controllers a file or module defines.

::

    setpoint run operator.py [--kubeconfig PATH] [--context NAME] [--namespace NS]
                 [--health-port N] [--metrics-port N] [--bind-address HOST]
                 [--leader-elect] [--lease-name NAME] [--workers N] [--resync SECONDS]
                 [--shard-group NAME [--shards N]]

Steps: import the target (a path to a ``.py`` file, or a dotted module name), collect its
controllers with :func:`setpoint.runtime.controllers_in` (every ``Registry`` and
``Controller`` among its globals), build a :class:`setpoint.client.Client` from the
kubeconfig (``--kubeconfig``, else ``KUBECONFIG``, the in-cluster service account, or
``~/.kube/config``), check that the server answers and serves every resource the controllers
name, then run a :class:`setpoint.runtime.Manager` until SIGINT or SIGTERM and shut down
gracefully (queued work finishes, the Lease is released, the process exits 0).

``--namespace`` restricts every controller's watches to that namespace (cluster-scoped
resources are still watched whole), is the namespace for calls that name none, and holds the
Lease. ``--workers`` overrides the number of concurrent reconciles of every controller.
``--resync`` replays every cached object to the controllers every SECONDS (each object is
reconciled again: a periodic check of what lives outside the cluster), as client-go's
resync period does; nothing is listed again from the server.
``--shard-group NAME`` runs the replicas active-active instead: they split the keys over
``--shards`` Leases (:mod:`setpoint.runtime.sharding`), in the namespace of the Lease.
Every :class:`setpoint.runtime.Hooks` among the module's globals (its validate, mutate and
convert functions) is served and registered while the manager runs (as a runnable: with
``--leader-elect``, by the leader), and its webhook configurations removed when it stops.
A module-level ``budgets`` mapping (target name to :class:`setpoint.runtime.BudgetConfig`)
declares the external-API budgets its controllers share (``ctx.budget(name)``).
``--leader-elect`` competes for the Lease ``--lease-name`` (default: see
:func:`default_lease_name`), so that of several replicas only one reconciles.

Exit codes: 0 after a graceful stop; 2 for a problem that retrying cannot fix before the
operator starts: a target that cannot be imported (its exception in one line: the file and
line where it happened; ``--log-level DEBUG`` adds the traceback) or defines no controllers,
an unusable kubeconfig, an unreachable server, a resource the server does not serve (install
its CustomResourceDefinition first), or a probe or metrics port that cannot be listened on.
The message says which, on stderr.

Invariants: the operator's module is imported exactly once per process and nothing else is
executed from it; no global state is kept here. Loading a file registers it in
``sys.modules`` (under its stem, or the stem and a short hash of its path when the stem is
taken, as ``operator`` is by the standard library), which dataclasses and pickling need.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import importlib.util
import logging
import os
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.process import eventloop
from setpoint.runtime import manager as rtmanager

log = logging.getLogger("setpoint.run")

#: seconds to wait for the server's first answer before calling it unreachable
REACH_TIMEOUT = 10.0
#: the shortest and longest ``--resync`` period, in seconds
MIN_RESYNC = 1.0
MAX_RESYNC = 7 * 24 * 3600.0


class UsageError(Exception):
    """A problem with what the command was given; it exits 2 with this message."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    """What ``setpoint run`` was asked to do."""

    target: str
    kubeconfig: Path | None = None
    context: str | None = None
    namespace: str | None = None
    health_port: int | None = None
    metrics_port: int | None = None
    bind_address: str = "127.0.0.1"
    leader_elect: bool = False
    lease_name: str | None = None
    workers: int | None = None
    resync: float | None = None
    shard_group: str | None = None
    shards: int | None = None
    #: publish each reconcile as an events.k8s.io Event (bounded per object)
    reconcile_events: bool = True

    def __post_init__(self) -> None:
        if not self.target:
            raise UsageError("name a file or a module to run")
        for port in (self.health_port, self.metrics_port):
            if port is not None and not 0 <= port <= 65535:
                raise UsageError(f"port out of range: {port}")
        if self.workers is not None and not 1 <= self.workers <= 256:
            raise UsageError(f"--workers must be between 1 and 256, not {self.workers}")
        if self.lease_name is not None and not self.leader_elect:
            raise UsageError("--lease-name needs --leader-elect")
        if self.namespace == "":
            raise UsageError("--namespace must not be empty")
        if self.shard_group is not None and self.leader_elect:
            raise UsageError("--shard-group and --leader-elect exclude each other: replicas "
                             "either split the keys or take turns")
        if self.shards is not None and self.shard_group is None:
            raise UsageError("--shards needs --shard-group")
        if self.shard_group is not None:
            try:
                runtime.ShardingConfig(name=self.shard_group,
                                       shards=16 if self.shards is None else self.shards)
            except ValueError as e:
                raise UsageError(f"--shard-group/--shards: {e}") from e
        if self.resync is not None and not MIN_RESYNC <= self.resync <= MAX_RESYNC:
            raise UsageError(f"--resync must be between {MIN_RESYNC:g} and {MAX_RESYNC:g} "
                             f"seconds, not {self.resync:g}")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add the ``run`` subcommand to ``setpoint``'s subparsers."""
    parser: argparse.ArgumentParser = sub.add_parser(
        "run", help="run the controllers a Python file or module defines",
        description="Run the controllers (Registry and Controller globals) that FILE_OR_MODULE "
                    "defines, against the cluster the kubeconfig names, until SIGINT/SIGTERM.")
    parser.add_argument("target", metavar="FILE_OR_MODULE",
                        help="a path to a .py file, or a dotted module name")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="default: KUBECONFIG, the in-cluster account, ~/.kube/config")
    parser.add_argument("--context", default=None, help="the kubeconfig context to use")
    parser.add_argument("--namespace", "-n", default=None,
                        help="watch (and hold the Lease in) this namespace only")
    parser.add_argument("--health-port", type=int, default=None,
                        help="serve /healthz and /readyz here (0: any free port)")
    parser.add_argument("--metrics-port", type=int, default=None,
                        help="serve Prometheus /metrics here (0: any free port)")
    parser.add_argument("--bind-address", default="127.0.0.1",
                        help="the address the probe and metrics ports listen on")
    parser.add_argument("--leader-elect", action="store_true",
                        help="run the controllers only while holding a Lease")
    parser.add_argument("--lease-name", default=None,
                        help="the Lease to compete for (default: <dir>-<file>-leader)")
    parser.add_argument("--shard-group", default=None, metavar="NAME",
                        help="run active-active: the replicas of group NAME split the keys, "
                             "one Lease per shard")
    parser.add_argument("--shards", type=int, default=None,
                        help="shards of the group (default 16; at most 1024)")
    parser.add_argument("--workers", type=int, default=None,
                        help="concurrent reconciles per controller (overrides the code)")
    parser.add_argument("--resync", type=float, default=None, metavar="SECONDS",
                        help="reconcile every cached object again every SECONDS "
                             "(default: only on changes)")
    parser.add_argument("--reconcile-events", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="publish each reconcile as an events.k8s.io Event (action "
                             "Reconcile; bounded per object; default: on)")
    parser.add_argument("--log-level", default="INFO")
    return parser


def config_from_args(args: argparse.Namespace) -> RunConfig:
    return RunConfig(target=args.target, kubeconfig=args.kubeconfig, context=args.context,
                     namespace=args.namespace, health_port=args.health_port,
                     metrics_port=args.metrics_port, bind_address=args.bind_address,
                     leader_elect=args.leader_elect, lease_name=args.lease_name,
                     workers=args.workers, resync=args.resync,
                     shard_group=args.shard_group, shards=args.shards,
                     reconcile_events=args.reconcile_events)


# --- loading --------------------------------------------------------------------------


def is_file_target(target: str | os.PathLike[str]) -> bool:
    """A path (ends in ``.py``, contains a separator, or exists) rather than a module name."""
    text = os.fspath(target)
    return text.endswith(".py") or os.sep in text or "/" in text or Path(text).is_file()


def _module_name(path: Path) -> str:
    stem = "".join(c if c.isalnum() or c == "_" else "_" for c in path.stem) or "operator"
    if stem[0].isdigit():
        stem = "_" + stem
    existing = sys.modules.get(stem)
    if existing is None or getattr(existing, "__file__", None) == str(path):
        return stem
    return f"{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


def load_file(path: str | os.PathLike[str], *, add_to_path: bool = False) -> ModuleType:
    """Import a Python file as a fresh module (each call executes it again).

    ``add_to_path`` puts the file's directory first on ``sys.path`` first, as ``python
    FILE`` does, so the file can import its neighbours.
    """
    resolved = Path(path).resolve()
    if not resolved.is_file():
        raise UsageError(f"{path}: no such file")
    name = _module_name(resolved)
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    if add_to_path and str(resolved.parent) not in sys.path:
        sys.path.insert(0, str(resolved.parent))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_target(target: str | os.PathLike[str], *, add_to_path: bool = False) -> ModuleType:
    """The module a file path or a dotted module name names (see :func:`is_file_target`).

    With ``add_to_path``, a module name is looked up from the working directory first, as
    ``python -m`` does.
    """
    if is_file_target(target):
        return load_file(target, add_to_path=add_to_path)
    name = os.fspath(target)
    if add_to_path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and name.startswith(e.name):
            raise UsageError(f"{name}: no such file or module") from e
        raise


def describe_import_error(target: str, error: BaseException) -> str:
    """One line for an operator that failed to import: what, and where in its own code."""
    if isinstance(error, SyntaxError) and error.filename:
        return (f"cannot import {target}: SyntaxError: {error.msg} "
                f"({error.filename}:{error.lineno})")
    frames = traceback.extract_tb(error.__traceback__)
    ours = [f for f in frames if "importlib" not in f.filename
            and not f.filename.endswith(("/setpoint/cli/run.py", "<frozen importlib._bootstrap>"))]
    where = f" ({ours[-1].filename}:{ours[-1].lineno})" if ours else ""
    message = str(error) or "(no message)"
    return f"cannot import {target}: {type(error).__name__}: {message}{where}"


def controllers_of(module: ModuleType) -> list[runtime.Controller]:
    """The module's controllers; :class:`UsageError` when it defines none."""
    found = runtime.controllers_in(vars(module))
    if not found:
        where = getattr(module, "__file__", None) or module.__name__
        raise UsageError(f"{where} defines no controllers: create a setpoint.runtime.Registry "
                         "(or Controller) at module level and register a reconcile function")
    return found


def hooks_of(module: ModuleType) -> list[runtime.Hooks]:
    """The module's admission and conversion hooks (every :class:`setpoint.runtime.Hooks`
    among its globals): the manager serves and registers them while it runs."""
    return runtime.hooks_in(vars(module))


def budgets_of(module: ModuleType) -> dict[str, runtime.BudgetConfig]:
    """The external-API budgets the module declares in a global ``budgets`` (a mapping of
    target name to :class:`~setpoint.runtime.BudgetConfig`); none when it has no such
    global. :class:`UsageError` when it is not such a mapping."""
    declared = getattr(module, "budgets", None)
    if declared is None:
        return {}
    if not isinstance(declared, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, runtime.BudgetConfig)
            for k, v in declared.items()):
        raise UsageError("the module's 'budgets' must map target names to "
                         "setpoint.runtime.BudgetConfig")
    return dict(declared)


# --- running --------------------------------------------------------------------------


def client_config(config: RunConfig) -> sp_client.ClientConfig:
    overrides: dict[str, Any] = {}
    if config.namespace is not None:
        overrides["namespace"] = config.namespace
    try:
        if config.kubeconfig is not None or config.context is not None:
            return sp_client.load_kubeconfig(config.kubeconfig, config.context, **overrides)
        return sp_client.auto_config(**overrides)
    except sp_client.ConfigError as e:
        raise UsageError(f"kubeconfig: {e}") from e
    except OSError as e:
        raise UsageError(f"kubeconfig: {e}") from e


async def check_server(client: sp_client.Client,
                       controllers: Sequence[runtime.Controller]) -> None:
    """Fail with :class:`UsageError` unless the server answers and serves every resource."""
    try:
        async with asyncio.timeout(REACH_TIMEOUT):
            await client.version()
    except (errors.ServiceUnavailable, errors.Timeout, TimeoutError) as e:
        raise UsageError(f"cannot reach the API server at {client.config.server}: {e}") from e
    for controller in controllers:
        for spec in controller.watch_specs:
            try:
                await client.resolve(spec.resource)
            except sp_client.NoMatchError as e:
                raise UsageError(
                    f"the server at {client.config.server} does not serve {spec.resource!r} "
                    f"(needed by {controller!r}): install its CustomResourceDefinition "
                    f"first ({e})") from e


def default_lease_name(target: str | os.PathLike[str]) -> str:
    """The Lease replicas of one operator compete for, unless ``--lease-name`` says:
    ``<directory>-<stem>-leader`` for a file (``examples/book/operator.py`` gives
    ``book-operator-leader``), ``<dotted-name-with-dashes>-leader`` for a module."""
    if is_file_target(target):
        path = Path(target).resolve()
        base = f"{path.parent.name}-{path.stem}"
    else:
        base = os.fspath(target).replace(".", "-")
    cleaned = "".join(c if c.isalnum() else "-" for c in base.lower())
    while "--" in cleaned:
        cleaned = cleaned.replace("--", "-")
    cleaned = cleaned.strip("-")[:56].rstrip("-") or "setpoint"
    return f"{cleaned}-leader"


def build_manager(config: RunConfig, client: sp_client.Client,
                  controllers: Sequence[runtime.Controller],
                  budgets: Mapping[str, runtime.BudgetConfig] | None = None,
                  hooks: Sequence[runtime.Hooks] = ()) -> runtime.Manager:
    """The manager ``config`` asks for (options applied to ``controllers``)."""
    for controller in controllers:
        controller.with_options(workers=config.workers, namespace=config.namespace)
    election = None
    if config.leader_elect:
        election = runtime.LeaderElectionConfig(
            lease_name=config.lease_name or default_lease_name(config.target),
            lease_namespace=config.namespace or client.config.namespace)
    sharding = None
    if config.shard_group is not None:
        sharding = runtime.ShardingConfig(
            name=config.shard_group, shards=16 if config.shards is None else config.shards,
            namespace=config.namespace or client.config.namespace)
    watcher_config = None
    if config.resync is not None:
        watcher_config = runtime.WatcherConfig(resync_period=config.resync)
    return runtime.Manager(client, controllers, leader_election=election,
                           health_port=config.health_port, metrics_port=config.metrics_port,
                           host=config.bind_address, watcher_config=watcher_config,
                           budgets=budgets, sharding=sharding, runnables=hooks,
                           reconcile_events=runtime.ReconcileEventsConfig()
                           if config.reconcile_events else None)


async def banner(config: RunConfig, client: sp_client.Client,
                 controllers: Sequence[runtime.Controller],
                 hooks: Sequence[runtime.Hooks] = ()) -> str:
    """The line ``setpoint run`` prints when it starts: each controller's name and kind
    (and the hooks it serves, if any)."""
    resolved = [await c.resolve(client) for c in controllers]
    names = ", ".join(f"{r.name} ({r.ref.api_version} {r.ref.kind})" for r in resolved)
    served = "".join(f"; {h!r}" for h in hooks)
    return (f"setpoint run: {len(controllers)} controller(s) from {config.target} against "
            f"{client.config.server}: {names}{served}")


async def run(config: RunConfig, controllers: Sequence[runtime.Controller],
              budgets: Mapping[str, runtime.BudgetConfig] | None = None,
              hooks: Sequence[runtime.Hooks] = ()) -> None:
    """Run ``controllers`` (and serve ``hooks``) as ``config`` says until a stop signal."""
    async with sp_client.Client(client_config(config)) as client:
        await check_server(client, controllers)
        manager = build_manager(config, client, controllers, budgets, hooks)
        print(await banner(config, client, controllers, hooks), flush=True)
        try:
            await manager.run(stop_signals=rtmanager.STOP_SIGNALS)
        except rtmanager.ListenError as e:
            raise UsageError(f"{e.strerror} (choose another port, or 0 for any free one)"
                             ) from e
        log.info("stopped")



def main(args: argparse.Namespace) -> int:
    """Run the ``run`` subcommand; returns the exit code."""
    try:
        config = config_from_args(args)
        try:
            module = load_target(config.target, add_to_path=True)
        except UsageError:
            raise
        except Exception as e:
            log.debug("importing %s failed", config.target, exc_info=e)
            raise UsageError(describe_import_error(config.target, e)) from e
        hooks = hooks_of(module)
        # a module of hooks alone is an operator too
        controllers = runtime.controllers_in(vars(module)) if hooks else controllers_of(module)
        eventloop.run(run(config, controllers, budgets_of(module), hooks))
    except UsageError as e:
        print(f"setpoint run: error: {e}", file=sys.stderr, flush=True)
        return 2
    return 0
