"""One HTTPS server for an operator's hooks, with a certificate the cluster issued or of a CA
it makes itself.

The API server calls an operator's hooks (admission reviews, CRD conversion reviews) over
HTTPS and checks the certificate against the ``caBundle`` of the configuration that names
the hook. :class:`HookServer` makes that unnecessary to arrange by hand: it serves a
certificate given to it (:meth:`HookServer.use_certificate`: one the cluster issued, see
:mod:`setpoint.runtime.hookcerts`), or else on start makes a CA in memory and issues a
serving certificate from it for its host, ``127.0.0.1`` and ``localhost`` (and any further
names given: :attr:`HookServer.names`); it serves POST routes ``path -> handler``;
:attr:`HookServer.ca_bundle` is the base64 PEM the configuration carries and
:meth:`HookServer.url` the URL of a path.

Invariants: a body larger than ``max_body_bytes`` is refused with 413 before any handler
sees it; :func:`decode_review` (the hooks' reading of a review) refuses with 400 one nested
deeper than :data:`MAX_REVIEW_DEPTH`; the key never touches the disk except for the instant
``load_cert_chain`` reads it (a temporary directory removed at once); :meth:`stop` closes
every connection.

Non-guarantees: the certificate lasts a year (or as long as the cluster issued it for) and
is not rotated; the URL names this machine, so an API server elsewhere cannot reach it
(behind a Service, give ``hosts`` the Service's DNS name and a ``url`` the API server can
reach).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import orjson
from aiohttp import web

from setpoint.apimachinery import decoding
from setpoint.pki import certs

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: the largest review body accepted by default (the API server sends whole objects)
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
#: how deep a review may nest, counting the review, its request and its objects' own levels
#: (an object the API server stores is at most 128 deep): a deeper one is refused before a
#: hook, a copy or a diff walks it, which Python's recursion could not
MAX_REVIEW_DEPTH: Final = 256


class BadReview(Exception):
    """A body that is not a review a hook can take (the 400 answer's text)."""


def decode_review(body: bytes) -> Any:
    """``body`` decoded as JSON, nested at most :data:`MAX_REVIEW_DEPTH` levels deep; its
    shape is the caller's to check. :class:`BadReview` otherwise."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BadReview(f"not JSON: {e}") from None
    if decoding.too_deep(doc, MAX_REVIEW_DEPTH) is not None:
        raise BadReview(f"the review nests deeper than {MAX_REVIEW_DEPTH} levels")
    return doc


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class HookServer:
    """HTTPS routes for hooks, with their own CA (see the module doc)."""

    def __init__(self, routes: Mapping[str, Handler], *, host: str = "127.0.0.1",
                 port: int = 0, hosts: Sequence[str] = (),
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 common_name: str = "setpoint-hooks",
                 now: Callable[[], dt.datetime] = now_utc) -> None:
        for path in routes:
            if not path.startswith("/"):
                raise ValueError(f"path {path!r} must start with /")
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self._routes = dict(routes)
        self._host = host
        self._port = port
        self._hosts = tuple(hosts)
        self._max_body = max_body_bytes
        self._common_name = common_name
        self.now_utc = now
        self._runner: web.AppRunner | None = None
        self._ca_pem: bytes | None = None
        self._given: certs.KeyPair | None = None
        self.port = 0

    @property
    def names(self) -> tuple[str, ...]:
        """The names the certificate must be valid for."""
        return tuple(dict.fromkeys((self._host, "127.0.0.1", "localhost", *self._hosts)))

    @property
    def own_ca(self) -> bool:
        """Whether the server serves a certificate of a CA it made itself."""
        return self._given is None

    def use_certificate(self, cert_pem: bytes, key_pem: bytes, ca_pem: bytes) -> None:
        """Serve ``cert_pem`` (with ``key_pem``), verified by ``ca_pem``, instead of a
        certificate of an own CA; before :meth:`start`."""
        if self._runner is not None:
            raise RuntimeError("the hook server is already started")
        self._given = certs.KeyPair(cert_pem, key_pem)
        self._ca_pem = ca_pem

    def url(self, path: str) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"https://{host}:{self.port}{path}"

    @property
    def ca_bundle(self) -> str:
        """The base64 PEM of the CA that issued the server's certificate."""
        if self._ca_pem is None:
            raise RuntimeError("the hook server is not started")
        return base64.b64encode(self._ca_pem).decode()

    def _tls(self) -> ssl.SSLContext:
        pair = self._given
        if pair is None:
            now = self.now_utc()
            ca = certs.new_ca(f"{self._common_name}-ca", now=now)
            self._ca_pem = ca.cert_pem
            pair = certs.issue(ca, common_name=self._common_name, usage="server",
                               now=now, hosts=self.names)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert.write_bytes(pair.cert_pem)
            key.write_bytes(pair.key_pem)
            context.load_cert_chain(cert, key)
        return context

    async def start(self) -> None:
        context = await asyncio.to_thread(self._tls)
        app = web.Application(client_max_size=self._max_body)
        for path, handler in self._routes.items():
            app.router.add_post(path, handler)
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port, ssl_context=context)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        for address in runner.addresses:
            self.port = int(address[1])
            break

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> HookServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
