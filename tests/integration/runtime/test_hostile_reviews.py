"""Reviews an operator's hook server did not expect, over HTTPS from anyone who reaches it:
one nested deeper than Python can walk is a 400 (not a traceback and a 500), and the hooks
go on answering the API server."""

from __future__ import annotations

import base64
import ssl

import aiohttp
import orjson

from setpoint.runtime import Hooks
from tests.integration.runtime.test_conversion_functions import GADGET_V1, GROUP, convert
from tests.integration.runtime.test_hooks import library_hooks


def review(obj_json: bytes, *, kind: str = "AdmissionReview") -> bytes:
    if kind == "ConversionReview":
        return (b'{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", '
                b'"request": {"uid": "u", "desiredAPIVersion": "' + GROUP.encode()
                + b'/v2", "objects": [' + obj_json + b"]}}")
    return (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
            b'{"uid": "u", "operation": "CREATE", "name": "b", "object": ' + obj_json + b"}}")


def book(depth: int) -> bytes:
    nested = b'{"x":' * depth + b"{}" + b"}" * depth
    return (b'{"apiVersion": "example.com/v1", "kind": "Book", "metadata": {"name": "b"}, '
            b'"spec": {"title": "t", "deep": ' + nested + b"}}")


async def post(hooks: Hooks, path: str, body: bytes) -> tuple[int, str]:
    context = ssl.create_default_context(cadata=base64.b64decode(hooks.ca_bundle).decode())
    async with aiohttp.ClientSession() as http, http.post(
            hooks.url(path), data=body, ssl=context) as resp:
        return resp.status, await resp.text()


async def test_a_review_nested_too_deep_is_refused_and_the_hooks_go_on() -> None:
    hooks = library_hooks()
    hooks.convert(f"gadgets.{GROUP}")(convert)
    assert GADGET_V1[0].startswith(GROUP)
    await hooks.start()
    try:
        for path, kind in (("/validate/no-untitled", "AdmissionReview"),
                           ("/mutate/shelve", "AdmissionReview"),
                           (f"/convert/gadgets.{GROUP}", "ConversionReview")):
            status, text = await post(hooks, path, review(book(1000), kind=kind))
            assert (status, text) == (400, "the review nests deeper than 256 levels"), path
        # deep, but within the bound: served as before
        status, text = await post(hooks, "/mutate/shelve", review(book(200)))
        assert status == 200, text
        answer = orjson.loads(text)["response"]
        assert answer["allowed"] is True
        assert answer["patchType"] == "JSONPatch"
    finally:
        await hooks.stop()
