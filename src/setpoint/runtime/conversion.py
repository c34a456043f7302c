"""Conversion between the versions of an operator's CRD as a plain Python function.

:class:`ConversionWebhook` serves ``convert(obj, desired_api_version) -> obj`` as the CRD's
conversion webhook: an HTTPS endpoint on this machine, with a certificate from a CA it makes
in memory (for ``127.0.0.1`` and ``localhost``), answering ConversionReview ``v1`` and
``v1beta1``. :meth:`ConversionWebhook.register` writes the CRD's ``spec.conversion``
(strategy Webhook, its URL and CA bundle), so there are no certificates or tunnels for the
operator's author to make::

    def convert(obj: dict, desired: str) -> dict:
        spec = obj["spec"]
        if desired.endswith("/v2"):
            spec["replicas"] = int(spec.pop("size"))
        else:
            spec["size"] = str(spec.pop("replicas"))
        return obj

    async with ConversionWebhook(convert) as hook:
        await hook.register(client, "gadgets.example.com")
        ...  # run the operator; every version of a Gadget is served through convert

``await hook.start(client)`` (instead of ``async with``) serves a certificate the cluster
issues through a CertificateSigningRequest (:mod:`setpoint.runtime.hookcerts`), falling
back to the own CA when the cluster cannot issue one.

The function gets a copy of each object (it may change and return it) and the
``desiredAPIVersion``; the ``apiVersion`` of what it returns is set to the desired one. The
API server keeps the metadata as it was (labels and annotations excepted) and checks the
rest (see ``docs/admission.md``).

Invariants: a review is answered with every object converted, or, when the function raises,
with a ``Failure`` result whose message is ``<ExceptionType>: <text>`` (never a partial
list); a body larger than ``max_body_bytes`` is refused (413), one that is not a
ConversionReview with 400.

Non-guarantees: the function runs in the event loop (keep it quick and pure: the API server
calls it on reads, writes and watches in another version); the URL is ``127.0.0.1``, so an
API server on another machine cannot reach it (there, serve it behind a Service as an
ordinary webhook); the certificate lasts a year (or as long as the cluster issued it for)
and is not rotated.
"""

from __future__ import annotations

import copy
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any, Final

import orjson
from aiohttp import web

from setpoint.client import Client
from setpoint.runtime import hookcerts, hookserver

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Convert = Callable[[Obj, str], Obj]

CRD: Final = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
REVIEW_VERSIONS: Final = ("apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1")


def conversion(url: str, ca_bundle: str) -> Obj:
    """A CRD's ``spec.conversion`` that points at the webhook at ``url``."""
    return {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1", "v1beta1"],
        "clientConfig": {"url": url, "caBundle": ca_bundle}}}


def answer(convert: Convert, body: bytes) -> web.Response:
    """The answer to one ConversionReview ``body`` (see the module doc)."""
    try:
        review = hookserver.decode_review(body)
    except hookserver.BadReview as e:
        return web.Response(status=400, text=str(e))
    req = review.get("request") if isinstance(review, dict) else None
    api_version = review.get("apiVersion") if isinstance(review, dict) else None
    if api_version not in REVIEW_VERSIONS or not isinstance(req, dict) or \
            not isinstance(req.get("objects"), list) or \
            not isinstance(req.get("desiredAPIVersion"), str):
        return web.Response(status=400, text="not a ConversionReview request")
    desired: str = req["desiredAPIVersion"]
    result: Obj = {"status": "Success"}
    converted: list[Obj] = []
    try:
        for obj in req["objects"]:
            out = convert(copy.deepcopy(obj), desired)
            if not isinstance(out, dict):
                raise TypeError(f"the conversion returned {type(out).__name__}, "
                                "not an object")
            out["apiVersion"] = desired
            converted.append(out)
    except Exception as e:  # the function's failure is the review's answer
        converted = []
        result = {"status": "Failure", "message": f"{type(e).__name__}: {e}"}
    return web.Response(body=orjson.dumps({
        "apiVersion": api_version, "kind": "ConversionReview",
        "response": {"uid": req.get("uid"), "result": result,
                     "convertedObjects": converted}}), content_type="application/json")


class ConversionWebhook:
    """An operator's conversion function, served as a CRD conversion webhook (see the
    module doc)."""

    def __init__(self, convert: Convert, *, host: str = "127.0.0.1", port: int = 0,
                 path: str = "/convert",
                 max_body_bytes: int = hookserver.DEFAULT_MAX_BODY_BYTES,
                 now: Callable[[], dt.datetime] = hookserver.now_utc) -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with /")
        self._convert = convert
        self._path = path
        self._server = hookserver.HookServer(
            {path: self._handle}, host=host, port=port, max_body_bytes=max_body_bytes,
            common_name="conversion-webhook", now=now)

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return self._server.url(self._path)

    @property
    def ca_bundle(self) -> str:
        """The base64 PEM of the CA that issued the webhook's certificate."""
        return self._server.ca_bundle

    def conversion(self) -> Obj:
        """The CRD's ``spec.conversion`` that points at this webhook."""
        return conversion(self.url, self.ca_bundle)

    async def register(self, client: Client, crd_name: str) -> Obj:
        """Point the CRD ``crd_name`` at this webhook; returns the CRD as written."""
        return await client.patch(CRD, crd_name, {"spec": {"conversion": self.conversion()}})

    async def start(self, client: Client | None = None, *,
                    certificate: hookcerts.CertificateConfig | None = None) -> None:
        """Start serving; with ``client`` on a certificate the cluster issues (else, or when
        it cannot, of an own CA)."""
        if client is not None:
            issued = await hookcerts.cluster_certificate(
                client, name="conversion-webhook", hosts=self._server.names,
                config=certificate or hookcerts.CertificateConfig(), log=log)
            if issued is not None:
                self._server.use_certificate(issued.cert_pem, issued.key_pem, issued.ca_pem)
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop()

    async def __aenter__(self) -> ConversionWebhook:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        return answer(self._convert, await request.read())
