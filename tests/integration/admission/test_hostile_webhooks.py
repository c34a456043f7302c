"""Webhooks that misbehave, called over real HTTPS: whatever one answers, the write it was
called for gets a Kubernetes Status in Kubernetes' words, and the server keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.integration.admission.test_webhooks import (
    CONFIGMAPS,
    configmap,
    configuration,
    hook,
    install,
    url_client,
)
from tests.integration.api.helpers import request
from tests.webhookserver import WebhookServer, allow, patch_response, webhook_server


@pytest.fixture
def webhook() -> Iterator[WebhookServer]:
    with webhook_server({"/allow": allow}) as server:
        yield server


async def still_serving(http: aiohttp.ClientSession, name: str) -> None:
    """Writes no webhook is called for and reads go on."""
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/secrets",
                                    {"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": name}})
    assert status == 201, body
    status, body, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200, body


def doubling_copies(times: int) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/x", "value": {"a": {}}}]
    ops += [{"op": "copy", "from": "/x", "path": "/x" + "/a" * (2 ** k)}
            for k in range(times)]
    return ops


async def test_a_patch_nesting_the_object_ever_deeper_is_refused(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/bomb"] = lambda review: patch_response(
        doubling_copies(int(review["request"]["object"]["data"]["copies"])))
    await install(http, configuration("bomb", hook(
        "bomb.example.com", url_client(webhook, "/bomb")), mutating=True))
    # too deep to walk: what Kubernetes cannot decode either, an internal error
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("deep", copies="15"))
    assert status == 500, body
    assert body["reason"] == "InternalError"
    assert body["message"] == ("Internal error occurred: the patched object nests deeper "
                               "than 128 levels")
    # deeper than an object may be: refused as any such object is
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("deep", copies="8"))
    assert status == 422, body
    assert body["reason"] == "Invalid"
    assert body["details"]["name"] == "deep"
    assert "may be nested at most 128 levels deep" in body["message"]
    # within bounds: applied, and what a ConfigMap does not have is pruned
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("deep", copies="2"))
    assert status == 201, body
    assert "x" not in body
    await still_serving(http, "after-deep")
