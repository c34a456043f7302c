"""Serving a pod's streaming subresource: parse the request, pick the protocol, stream.

For the Pod resource: :func:`parse` the request's options (400/422 for bad ones), resolve
what only the pod knows (the default container, whether it runs), then :func:`serve` it
against the pod's :class:`~.target.StreamTarget`. :func:`serve_subresource` does both when
there is nothing to resolve. Errors before the protocol switch are raised as
:class:`~setpoint.apimachinery.errors.ApiError` (the server's middleware answers a Status);
after it they travel in-band.

Which protocol answers:

==============  ===========  =====================================================
subresource     methods      protocols
==============  ===========  =====================================================
``exec``        GET, POST    WebSocket channels; SPDY/3.1 upgrade
``attach``      GET, POST    WebSocket channels; SPDY/3.1 upgrade
``portforward`` GET, POST    WebSocket channels; SPDY/3.1 in WebSocket; SPDY/3.1 upgrade
``log``         GET          plain chunked response
==============  ===========  =====================================================

A request to exec, attach or portforward that asks for no upgrade is a 400 ("Upgrade
request required"), as from the kubelet.
"""

from __future__ import annotations

from collections.abc import Awaitable

from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.server import request_info, responses
from setpoint.server.streaming import channels, logs, portforward, remotecommand, websocket
from setpoint.server.streaming.conduit import UpgradedConduit
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.options import (
    AttachOptions,
    ExecOptions,
    LogOptions,
    PortForwardOptions,
    parse_attach,
    parse_exec,
    parse_log,
    parse_port_forward,
)
from setpoint.server.streaming.target import Session, StreamTarget

Options = ExecOptions | AttachOptions | PortForwardOptions | LogOptions

SUBRESOURCES = ("attach", "exec", "log", "portforward")
_METHODS = {"exec": ("GET", "POST"), "attach": ("GET", "POST"),
            "portforward": ("GET", "POST"), "log": ("GET",)}
_DEFAULT = StreamingConfig()


def parse(request: web.Request, subresource: str,
          config: StreamingConfig = _DEFAULT) -> Options:
    """The options of a request for ``pods/<subresource>``."""
    if subresource not in _METHODS:
        raise errors.path_not_found()
    if request.method not in _METHODS[subresource]:
        raise errors.method_not_allowed(request.method, f"pods/{subresource}", "")
    query = request.query
    if subresource == "exec":
        return parse_exec(query)
    if subresource == "attach":
        return parse_attach(query)
    if subresource == "portforward":
        return parse_port_forward(query, max_ports=config.max_ports)
    info = request_info.parse(request.path)
    return parse_log(query, info.name if info is not None else "")


async def serve(request: web.Request, options: Options, target: StreamTarget,
                config: StreamingConfig = _DEFAULT) -> web.StreamResponse:
    """Stream ``options`` between the client of ``request`` and ``target``."""
    if isinstance(options, LogOptions):
        return await logs.serve(request, options, target, config)
    if isinstance(options, PortForwardOptions):
        if websocket.is_websocket(request):
            offers = channels.offered(request.headers.get("Sec-WebSocket-Protocol"))
            if channels.negotiate(offers, (channels.SPDY_TUNNEL,)) is not None:
                return await portforward.serve_tunnel(request, target, config)
            return await portforward.serve_channels(request, options, target, config)
        if _is_spdy(request):
            switched = await _spdy_handshake(request, portforward.SPDY_PROTOCOLS, config)
            if isinstance(switched, web.Response):
                return switched
            conduit, response, _ = switched
            await portforward.serve_spdy(conduit, target, config)
            return response
        raise errors.BadRequest("Upgrade request required")

    def start() -> Awaitable[Session]:
        if isinstance(options, ExecOptions):
            return target.exec(options)
        return target.attach(options)

    if websocket.is_websocket(request):
        return await remotecommand.serve_websocket(request, options, start, config)
    if _is_spdy(request):
        switched = await _spdy_handshake(request, remotecommand.SPDY_PROTOCOLS, config)
        if isinstance(switched, web.Response):
            return switched
        conduit, response, protocol = switched
        await remotecommand.serve_spdy(conduit, protocol, options, start, config)
        return response
    raise errors.BadRequest("Upgrade request required")


async def serve_subresource(request: web.Request, subresource: str, target: StreamTarget,
                            config: StreamingConfig = _DEFAULT) -> web.StreamResponse:
    """:func:`parse` then :func:`serve`, for a target that needs nothing resolved."""
    return await serve(request, parse(request, subresource, config), target, config)


def _is_spdy(request: web.Request) -> bool:
    connection = request.headers.get("Connection", "").lower()
    return "upgrade" in connection and "spdy/3.1" in request.headers.get("Upgrade", "").lower()


async def _spdy_handshake(
    request: web.Request, supported: tuple[str, ...], config: StreamingConfig,
) -> tuple[UpgradedConduit, web.StreamResponse, str] | web.Response:
    """Negotiate ``X-Stream-Protocol-Version`` as the kubelet does, and switch."""
    offers = [p.strip() for value in request.headers.getall("X-Stream-Protocol-Version", ())
              for p in value.split(",") if p.strip()][:channels.MAX_OFFERED]
    if not offers:
        raise errors.BadRequest("unable to upgrade: X-Stream-Protocol-Version is required")
    chosen = next((p for p in offers if p in supported), None)
    if chosen is None:
        refusal = responses.error_response(errors.Forbidden(
            f"unable to upgrade: unable to negotiate protocol: client supports {offers}, "
            f"server accepts {list(supported)}"))
        for name in supported:
            refusal.headers.add("X-Accepted-Stream-Protocol-Versions", name)
        return refusal
    conduit = await UpgradedConduit.switch(
        request, {"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                  "X-Stream-Protocol-Version": chosen},
        buffer_limit=config.stream_buffer_bytes)
    return conduit, conduit.response, chosen
