"""The ``setpoint`` command: arguments in, config dataclasses out, then run.

``setpoint serve`` runs the control plane (the API server and the built-in controllers that
``--controllers`` names, see :mod:`setpoint.controlplane`) until SIGINT or SIGTERM, then shuts
down gracefully (controllers first, then open watches end, storage closes after its last
acknowledged write).
``setpoint run FILE_OR_MODULE`` runs the controllers a file or module defines (see
:mod:`setpoint.cli.run`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from setpoint import controlplane
from setpoint.cli import run as run_command
from setpoint.server.server import ServerConfig
from setpoint.storage import StorageConfig

log = logging.getLogger("setpoint")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="setpoint", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the control plane")
    serve.add_argument("--data-dir", type=Path, default=Path(".setpoint"),
                       help="where data and the admin kubeconfig live (default: .setpoint)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443, help="0 picks any free port")
    serve.add_argument("--storage", choices=("sqlite", "memory"), default="sqlite")
    serve.add_argument("--log-level", default="INFO")
    serve.add_argument("--controllers", default=None, metavar="NAMES",
                       help="built-in controllers to run, comma-separated (default: all of "
                       f"{','.join(controlplane.CONTROLLERS)}; empty: none)")
    run_command.add_parser(sub)
    return parser


def serve_config(args: argparse.Namespace) -> ServerConfig:
    data_dir: Path = args.data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.storage == "sqlite":
        storage = StorageConfig(kind="sqlite", path=data_dir / "state.db")
    else:
        storage = StorageConfig(kind="memory")
    return ServerConfig(host=args.host, port=args.port, storage=storage,
                        kubeconfig_path=data_dir / "kubeconfig")


async def _serve(config: ServerConfig,
                 controllers: frozenset[str] = frozenset(controlplane.CONTROLLERS)) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with controlplane.ControlPlane(controlplane.ControlPlaneConfig(
            server=config, controllers=controllers)) as plane:
        server = plane.server
        print(f"setpoint serving on {server.url}; kubeconfig: {config.kubeconfig_path}",
              flush=True)
        await stop.wait()
        log.info("shutting down")


def _run(coro: Coroutine[Any, Any, None]) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        asyncio.run(coro)
        return
    uvloop.run(coro)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        try:
            controllers = controlplane.parse_controllers(args.controllers)
        except ValueError as e:
            print(f"setpoint serve: error: {e}", file=sys.stderr, flush=True)
            return 2
        _run(_serve(serve_config(args), controllers))
        return 0
    if args.command == "run":
        return run_command.main(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
