"""The agent's HTTPS endpoint: what the API server reaches for logs, exec, attach and
port-forward (the kubelet's port 10250).

Paths, as the kubelet serves them::

    GET       /containerLogs/NAMESPACE/POD/CONTAINER?follow=&tailLines=&...
    GET|POST  /exec/NAMESPACE/POD/CONTAINER?command=...&stdin=&stdout=&stderr=&tty=
    GET|POST  /attach/NAMESPACE/POD/CONTAINER?stdin=&stdout=&stderr=&tty=
    GET|POST  /portforward/NAMESPACE/POD?ports=...
    GET       /metrics/resource   (the node's and its containers' CPU and memory, see
                                   :mod:`setpoint.node.usage`)
    GET       /healthz

Every protocol of :mod:`setpoint.server.streaming` is spoken (the API server uses WebSocket
``v5.channel.k8s.io`` and ``v4.channel.k8s.io``), against
:class:`~setpoint.node.target.RuntimeTarget` for the pod, found by namespace and name among
the pods bound to this node.

**Who may connect**: TLS with a client certificate issued by the cluster CA (the one in the
agent's kubeconfig) whose user is ``kube-apiserver-kubelet-client`` or which is in
``system:masters``; anything else is refused at the handshake (no certificate, another CA)
or answered 403. The serving certificate is the agent's own, self-signed, made at start
(kube-apiserver does not verify it by default either). Without a cluster CA (a server run
with ``--insecure-plain-http``) the endpoint serves plain HTTP with no authentication, and
only on a loopback address.

Bounds: the streaming limits of :class:`~setpoint.server.streaming.StreamingConfig` (the
runtime bounds concurrent execs). Non-guarantee: connections are not counted; the endpoint
trusts its one client, the API server.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID

from setpoint.agent import PodRuntime
from setpoint.apimachinery import errors
from setpoint.apimachinery import resourcemetrics as rm
from setpoint.node.target import RuntimeTarget
from setpoint.pki import certs, files
from setpoint.server import streaming
from setpoint.server.responses import error_response

log = logging.getLogger(__name__)

#: users whose client certificate may use the endpoint (besides system:masters)
ALLOWED_USERS: Final = frozenset({"kube-apiserver-kubelet-client"})
ALLOWED_GROUPS: Final = frozenset({"system:masters"})
_ROUTES: Final = {"containerLogs": "log", "exec": "exec", "attach": "attach",
                  "portforward": "portforward"}

PodLookup = Callable[[str, str], Mapping[str, Any] | None]
#: the text of ``/metrics/resource``
ResourceMetrics = Callable[[], Awaitable[str]]


def serving_certificate(directory: Path, name: str, hosts: list[str]) -> tuple[Path, Path]:
    """A self-signed serving certificate for the agent (new at every start), as files."""
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca(f"{name}-agent-ca@{int(now.timestamp())}", now=now,
                      validity=dt.timedelta(days=365))
    pair = certs.issue(ca, common_name=name, usage="server", now=now, hosts=hosts)
    crt, key = directory / "serving.crt", directory / "serving.key"
    files.write_private(key, pair.key_pem)
    files.write_private(crt, pair.cert_pem + ca.cert_pem)
    return crt, key


def tls_context(cert: Path, key: Path, client_ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    context.load_verify_locations(cadata=client_ca_pem.decode())
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _peer(request: web.Request) -> tuple[str, tuple[str, ...]] | None:
    transport = request.transport
    sslobj = transport.get_extra_info("ssl_object") if transport is not None else None
    if sslobj is None:
        return None
    der = sslobj.getpeercert(binary_form=True)
    if not der:
        return None
    cert = x509.load_der_x509_certificate(der)
    cn = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = tuple(str(a.value) for a in
                 cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return (cn[0] if cn else "", orgs)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_app(runtime: PodRuntime, lookup: PodLookup, *, secure: bool,
              config: streaming.StreamingConfig | None = None,
              resource_metrics: ResourceMetrics | None = None) -> web.Application:
    stream_config = config or streaming.StreamingConfig()

    async def handle(request: web.Request) -> web.StreamResponse:
        try:
            return await serve(request)
        except errors.ApiError as e:
            return error_response(e)

    async def serve(request: web.Request) -> web.StreamResponse:
        if secure:
            peer = _peer(request)
            if peer is None or not (peer[0] in ALLOWED_USERS
                                    or ALLOWED_GROUPS & set(peer[1])):
                raise errors.Forbidden(f"user {peer[0] if peer else 'anonymous'!r} may not "
                                       "use the node agent's endpoint")
        parts = [p for p in request.path.split("/") if p]
        if parts == ["healthz"]:
            return web.Response(text="ok")
        if parts == ["metrics", "resource"] and resource_metrics is not None:
            if request.method not in ("GET", "HEAD"):
                raise errors.MethodNotAllowed("only GET is served here")
            return web.Response(body=(await resource_metrics()).encode(),
                                headers={"Content-Type": rm.CONTENT_TYPE})
        if not parts or parts[0] not in _ROUTES:
            raise errors.path_not_found()
        subresource = _ROUTES[parts[0]]
        want = 3 if subresource == "portforward" else 4
        if len(parts) != want:
            raise errors.path_not_found()
        namespace, name = parts[1], parts[2]
        container = parts[3] if want == 4 else ""
        pod = lookup(namespace, name)
        uid = str(((pod or {}).get("metadata") or {}).get("uid") or "")
        if pod is None or not uid or runtime.pod_status(uid) is None:
            raise errors.NotFound(f'pod "{name}" in namespace "{namespace}" is not running '
                                  "on this node")
        options = streaming.parse(request, subresource, stream_config)
        target = RuntimeTarget(runtime, uid, name, container)
        return await streaming.serve(request, options, target, stream_config)

    app = web.Application()
    app.router.add_route("*", r"/{tail:[\s\S]*}", handle)
    return app


class Endpoint:
    """The running endpoint: ``async with Endpoint(...) as ep`` (``ep.port`` once started)."""

    def __init__(self, app: web.Application, host: str, port: int,
                 context: ssl.SSLContext | None) -> None:
        self._app = app
        self.host = host
        self.port = port
        self._context = context
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> Endpoint:
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False,
                               shutdown_timeout=1.0)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self._context,
                           backlog=128)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        log.info("agent endpoint serving on %s:%s", self.host, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
