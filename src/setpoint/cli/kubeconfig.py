"""``setpoint kubeconfig``: a kubeconfig that acts as a ServiceAccount, for an operator.

::

    setpoint kubeconfig --service-account NAMESPACE/NAME [--create] [--duration 24h]
                        [--audience AUD] [--kubeconfig ADMIN] [--output FILE]

Asks the server the admin kubeconfig names (``--kubeconfig``, else ``KUBECONFIG`` or
``~/.kube/config``) for a token of the ServiceAccount (its ``token`` subresource, what
``kubectl create token`` does), creating the account first with ``--create``, and writes a
kubeconfig with the same cluster and that token (to ``--output``, mode 0600, or to stdout).
``setpoint run operator.py --kubeconfig FILE`` then runs the operator with exactly the
permissions RBAC gives the account. The token expires (``--duration``, default one hour,
at most 48 hours); run the command again for a new one.

Exit codes: 0 when written; 2 when the arguments, the kubeconfig or the server refuse.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import sys
from pathlib import Path
from typing import Any

import yaml

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.cli import helptext
from setpoint.pki import files

_UNITS = {"s": 1, "m": 60, "h": 3600}
MAX_DURATION = 48 * 3600


def duration(text: str) -> int:
    """Seconds of ``30m``, ``24h``, ``600s`` or ``600``."""
    unit = text[-1:] if text[-1:] in _UNITS else "s"
    number = text[:-1] if text[-1:] in _UNITS else text
    if not number.isdigit() or int(number) == 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 30m, 24h)")
    seconds = int(number) * _UNITS[unit]
    if seconds > MAX_DURATION:
        raise argparse.ArgumentTypeError("a token lasts at most 48h")
    return seconds


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "kubeconfig", help="write a kubeconfig acting as a ServiceAccount",
        description=helptext.plain(__doc__.split("\n\n", 1)[0]) if __doc__ else None)
    parser.add_argument("--service-account", required=True, metavar="NAMESPACE/NAME")
    parser.add_argument("--create", action="store_true",
                        help="create the ServiceAccount if it does not exist")
    parser.add_argument("--duration", type=duration, default=3600, metavar="DURATION",
                        help="how long the token is valid (default: 1h; at most 48h)")
    parser.add_argument("--audience", action="append", default=[],
                        help="an audience of the token (default: the server's)")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="the admin kubeconfig (default: KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        help="write here (mode 0600) instead of to stdout")
    parser.add_argument("--log-level", default="WARNING")
    return parser


async def service_account_kubeconfig(admin: Path | None, namespace: str, name: str, *,
                                     create: bool, seconds: int,
                                     audiences: list[str]) -> dict[str, Any]:
    config = sp_client.load_kubeconfig(admin)
    async with sp_client.Client(config) as client:
        if create:
            try:
                await client.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                     "metadata": {"name": name, "namespace": namespace}})
            except errors.AlreadyExists:
                pass
        spec: dict[str, Any] = {"expirationSeconds": seconds}
        if audiences:
            spec["audiences"] = audiences
        answer = await client.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": spec})
    token = answer["status"]["token"]
    cluster: dict[str, Any] = {"server": config.server}
    if config.ca_data is not None:
        cluster["certificate-authority-data"] = _b64(config.ca_data)
    elif config.ca_file is not None:
        cluster["certificate-authority"] = str(config.ca_file)
    user = f"system:serviceaccount:{namespace}:{name}"
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "setpoint", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "setpoint", "context": {"cluster": "setpoint", "user": user,
                                                          "namespace": namespace}}],
            "current-context": "setpoint"}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def main(args: argparse.Namespace) -> int:
    namespace, sep, name = args.service_account.partition("/")
    if not sep or not namespace or not name:
        print("setpoint kubeconfig: error: --service-account is NAMESPACE/NAME",
              file=sys.stderr, flush=True)
        return 2
    try:
        document = asyncio.run(service_account_kubeconfig(
            args.kubeconfig, namespace, name, create=args.create, seconds=args.duration,
            audiences=args.audience))
    except (errors.ApiError, sp_client.ConfigError, OSError) as e:
        print(f"setpoint kubeconfig: error: {e}", file=sys.stderr, flush=True)
        return 2
    text = yaml.safe_dump(document, sort_keys=False)
    if args.output is None:
        sys.stdout.write(text)
    else:
        files.write_private(args.output, text.encode())
    return 0
