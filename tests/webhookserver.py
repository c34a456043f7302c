"""A real HTTPS admission webhook server for tests, in a thread of its own.

Its certificate is issued by a fresh CA (:mod:`setpoint.pki.certs`) for ``127.0.0.1``,
``localhost`` and any service names given; ``ca_bundle`` is the base64 PEM a webhook
configuration carries. Each path answers with a handler ``(review) -> answer``, where the
answer is a ``response`` dict (``uid`` filled in when absent), raw ``bytes`` sent as they
are, a :class:`Hang` (the request never gets an answer while the server runs) or a
:class:`Raw` (the handler's own HTTP answer).
Every review received is kept in ``received`` (its User-Agent in ``user_agents``).
:func:`conversion_answer` answers a CRD's ConversionReview (the tests' Gadget kind converts
with :func:`gadget_conversion`).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import ssl
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from setpoint.pki import certs


class Hang:
    """Answer never."""


@dataclass(frozen=True)
class Raw:
    """Answer with whatever ``respond(request)`` does with the request (a redirect, a body
    that trickles, a connection cut mid-body)."""

    respond: Callable[[web.Request], Awaitable[web.StreamResponse]]


Answer = dict[str, Any] | bytes | Hang | Raw
Handler = Callable[[dict[str, Any]], Answer]


def allow(review: dict[str, Any]) -> Answer:
    return {"allowed": True}


def patch_response(operations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(operations).encode()).decode(), **extra}


def gadget_conversion(obj: dict[str, Any], desired: str) -> dict[str, Any]:
    """The conversion the tests' Gadget kind uses: v1 ``spec.size: "3"`` (a string) and v2
    ``spec.replicas: 3`` (an integer), both ways."""
    out = json.loads(json.dumps(obj))
    out["apiVersion"] = desired
    spec = out.get("spec")
    if isinstance(spec, dict):
        if desired.endswith("/v2") and "size" in spec:
            spec["replicas"] = int(spec.pop("size"))
        elif desired.endswith("/v1") and "replicas" in spec:
            spec["size"] = str(spec.pop("replicas"))
    return out


def conversion_answer(review: dict[str, Any],
                      convert: Callable[[dict[str, Any], str], dict[str, Any]]
                      = gadget_conversion) -> bytes:
    """A successful ConversionReview answer to ``review``, each object converted by
    ``convert(object, desiredAPIVersion)``."""
    request = review["request"]
    desired = request["desiredAPIVersion"]
    return json.dumps({
        "apiVersion": review["apiVersion"], "kind": "ConversionReview",
        "response": {"uid": request["uid"], "result": {"status": "Success"},
                     "convertedObjects": [convert(o, desired) for o in request["objects"]]},
    }).encode()


class WebhookServer:
    def __init__(self, handlers: dict[str, Handler], *, hosts: Sequence[str] = ()) -> None:
        self.handlers = handlers
        self.received: list[dict[str, Any]] = []
        #: the User-Agent of each review received, in the same order
        self.user_agents: list[str] = []
        now = dt.datetime.now(dt.UTC)
        self._ca = certs.new_ca("webhook-test-ca", now=now)
        self._pair = certs.issue(self._ca, common_name="webhook", usage="server", now=now,
                                 hosts=("127.0.0.1", "localhost", *hosts))
        self.ca_bundle = base64.b64encode(self._ca.cert_pem).decode()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._hung: set[asyncio.Future[None]] = set()
        self._transports: set[asyncio.BaseTransport] = set()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        handler = self.handlers.get(request.path)
        if handler is None:
            return web.Response(status=404, text="no such webhook")
        if request.transport is not None:
            self._transports.add(request.transport)
        review = json.loads(await request.read())
        self.received.append(review)
        self.user_agents.append(request.headers.get("User-Agent", ""))
        answer = handler(review)
        if isinstance(answer, Hang):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._hung.add(waiter)
            await waiter
            return web.Response(status=500)
        if isinstance(answer, Raw):
            return await answer.respond(request)
        if isinstance(answer, bytes):
            return web.Response(body=answer, content_type="application/json")
        response = dict(answer)
        response.setdefault("uid", review["request"]["uid"])
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview", "response": response})

    def _run(self) -> None:
        asyncio.run(self._serve())

    def _context(self) -> ssl.SSLContext:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
            cert.write_bytes(self._pair.cert_pem)
            key.write_bytes(self._pair.key_pem)
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
        return context

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        context = self._context()
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False,
                               shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        await self._stop.wait()
        for waiter in self._hung:
            waiter.cancel()
        await runner.cleanup()
        for transport in self._transports:
            transport.close()
        await asyncio.sleep(0.01)  # let the closed transports finish closing

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the webhook server did not start")

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


@contextmanager
def webhook_server(handlers: dict[str, Handler], *, hosts: Sequence[str] = ()
                   ) -> Iterator[WebhookServer]:
    server = WebhookServer(handlers, hosts=hosts)
    server.start()
    try:
        yield server
    finally:
        server.stop()
