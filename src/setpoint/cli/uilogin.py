"""``setpoint ui-login``: print a sign-in URL of the web UI for a ServiceAccount.

::

    setpoint ui-login --service-account NAMESPACE/NAME [--create] [--duration 10m]
                      [--kubeconfig ADMIN]

Asks the server the admin kubeconfig names for a token of the ServiceAccount (its
``token`` subresource, as ``setpoint kubeconfig`` does) and prints
``https://SERVER/ui/#token=TOKEN``. Opening it signs the browser tab in as that account: the
token travels in the URL's fragment, which browsers never send to a server, and the UI moves
it into the tab's sessionStorage and removes it from the address bar and history at once.
The URL is short-lived rather than one-time: the token works until it expires
(``--duration``, default ten minutes, at most 48 hours), so treat the URL as the token.

Exit codes: 0 when printed; 2 when the arguments, the kubeconfig or the server refuse.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.cli import helptext
from setpoint.cli.kubeconfig import duration, service_account_token


def add_parser(sub: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        "ui-login", help="print a sign-in URL of the web UI for a ServiceAccount",
        description=helptext.plain(__doc__.split("\n\n", 1)[0]) if __doc__ else None)
    parser.add_argument("--service-account", required=True, metavar="NAMESPACE/NAME")
    parser.add_argument("--create", action="store_true",
                        help="create the ServiceAccount if it does not exist")
    parser.add_argument("--duration", type=duration, default=600, metavar="DURATION",
                        help="how long the token is valid (default: 10m; at most 48h)")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="the admin kubeconfig (default: KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--log-level", default="WARNING")
    return parser


def login_url(server: str, token: str) -> str:
    return f"{server.rstrip('/')}/ui/#token={urllib.parse.quote(token, safe='')}"


def main(args: argparse.Namespace) -> int:
    namespace, sep, name = args.service_account.partition("/")
    if not sep or not namespace or not name:
        print("setpoint ui-login: error: --service-account is NAMESPACE/NAME",
              file=sys.stderr, flush=True)
        return 2
    try:
        config, token = asyncio.run(service_account_token(
            args.kubeconfig, namespace, name, create=args.create, seconds=args.duration,
            audiences=[]))
    except (errors.ApiError, sp_client.ConfigError, OSError) as e:
        print(f"setpoint ui-login: error: {e}", file=sys.stderr, flush=True)
        return 2
    print(login_url(config.server, token), flush=True)
    return 0
