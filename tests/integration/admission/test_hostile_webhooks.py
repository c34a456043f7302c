"""Webhooks that misbehave, called over real HTTPS: whatever one answers, the write it was
called for gets a Kubernetes Status in Kubernetes' words, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from setpoint.registry.webhooks import MAX_PARALLEL_CALLS
from setpoint.server.limits import Limits
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from setpoint.testing import eventually, eventually_blocking
from tests.conftest import start_serve
from tests.integration.admission.test_webhook_transport import (
    cut_short,
    hang_up,
    to_itself,
    trickle,
)
from tests.integration.admission.test_webhooks import (
    CONFIGMAPS,
    VALIDATING,
    configmap,
    configuration,
    hook,
    install,
    url_client,
)
from tests.integration.api.helpers import request
from tests.webhookserver import Hang, Raw, WebhookServer, allow, patch_response, webhook_server


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


@pytest.mark.slow
def test_audit_annotation_and_warning_bombs_are_bounded(
        tmp_path: Path, webhook: WebhookServer) -> None:
    log = tmp_path / "audit" / "audit.log"
    serve = start_serve(tmp_path / "data", extra_args=["--audit-log-path", str(log)])
    try:
        annotations = {"ok": "kept", "a/b": "not a key", "k" * 100_000: "not a key",
                       "long": "v" * 100_000}
        annotations.update({f"n{i}": "x" for i in range(1000)})
        webhook.handlers["/bombs"] = lambda review: {
            "allowed": True, "auditAnnotations": annotations,
            "warnings": ["w" * 1_000_000, *(f"warning {i}" for i in range(5000))]}
        client = url_client(webhook, "/bombs")
        body = json.dumps(configuration("bombs", hook("bombs.example.com", client)))
        serve.urlopen(VALIDATING, data=body.encode(), method="POST",
                      headers={"Content-Type": "application/json"}).close()
        created = serve.urlopen(
            CONFIGMAPS, data=json.dumps(configmap("bombed", a="1")).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        with created:
            assert created.status == 201
            warnings = created.headers.get_all("Warning")
        assert 0 < len(warnings) <= 32
        assert all(len(w) < 2048 for w in warnings)

        def event() -> dict[str, Any] | None:
            for line in log.read_text().splitlines():
                found = json.loads(line)
                if found["verb"] == "create" and found["stage"] == "ResponseComplete" \
                        and "bombs.example.com/ok" in found.get("annotations", {}):
                    return dict(found)
            return None

        kept = eventually_blocking(event)["annotations"]
        ours = {k: v for k, v in kept.items() if k.startswith("bombs.example.com/")}
        assert ours["bombs.example.com/ok"] == "kept"
        assert ours["bombs.example.com/long"] == "v" * 10 * 1024
        assert len(ours) == 32
        assert all(len(k) < 100 for k in ours)
        with serve.urlopen(CONFIGMAPS + "/bombed") as got:
            assert got.status == 200
    finally:
        serve.stop()


MISSHAPEN: dict[str, Any] = {
    "/status-a-string": {"allowed": False, "status": "no"},
    "/message-an-object": {"allowed": False,
                           "status": {"code": 403, "message": {"a": "b" * 100_000}}},
    "/allowed-a-string": {"allowed": "true"},
    "/warnings-an-object": {"allowed": True, "warnings": {"w": 1}},
    "/huge-api-version": b'{"apiVersion": "' + b"v" * 2_000_000 + b'", "kind": "x"}',
    "/huge-uid": {"uid": "u" * 2_000_000, "allowed": True},
}


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_answers_of_the_wrong_shape_are_failed_calls(
        webhook: WebhookServer, http: aiohttp.ClientSession, policy: str) -> None:
    for path, answer in MISSHAPEN.items():
        name = path.strip("/")
        webhook.handlers[path] = lambda review, answer=answer: answer
        await install(http, configuration(f"{name}-{policy.lower()}", hook(
            f"{name}.example.com", url_client(webhook, path), failurePolicy=policy,
            objectSelector={"matchLabels": {"case": name}})))
    for path in MISSHAPEN:
        name = path.strip("/")
        cm = configmap(f"{name}-{policy.lower()}", a="1")
        cm["metadata"]["labels"] = {"case": name}
        status, body, _ = await request(http, "POST", CONFIGMAPS, cm)
        if policy == "Ignore":
            # a failed call, not a denial: the write goes on
            assert status == 201, (path, body)
            continue
        assert status == 500, (path, body)
        assert body["reason"] == "InternalError"
        assert body["message"].startswith(
            f'Internal error occurred: failed calling webhook "{name}.example.com": '
            "received invalid webhook response: "), body
        assert len(body["message"]) < 1024, path
    await still_serving(http, f"after-misshapen-{policy.lower()}")


async def test_an_answer_without_allowed_denies_as_go_decodes_it(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/silent"] = lambda review: {}
    await install(http, configuration("silent", hook(
        "silent.example.com", url_client(webhook, "/silent"), failurePolicy="Ignore")))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("silent"))
    assert status == 400, body
    assert body["message"] == ('admission webhook "silent.example.com" denied the request '
                               "without explanation")


@pytest.fixture
async def few_writes(tmp_path: Path) -> AsyncIterator[aiohttp.ClientSession]:
    """A server that serves at most 4 writes at once."""
    config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                          kubeconfig_path=tmp_path / "kubeconfig",
                          limits=Limits(max_mutating_requests_inflight=4))
    async with Server(config) as server, aiohttp.ClientSession(base_url=server.url) as http:
        yield http


async def test_writes_stuck_on_a_webhook_that_never_answers_leave_the_server_serving(
        webhook: WebhookServer, few_writes: aiohttp.ClientSession) -> None:
    http = few_writes
    webhook.handlers["/hang"] = lambda review: Hang()
    await install(http, configuration("hang", hook(
        "hang.example.com", url_client(webhook, "/hang"), timeoutSeconds=2)))
    stuck = [asyncio.ensure_future(request(http, "POST", CONFIGMAPS, configmap(f"s{i}")))
             for i in range(4)]
    await eventually(lambda: len(webhook.received) == 4, what="four calls in flight")
    # every write slot waits on the webhook: one more write is told to come back...
    status, body, headers = await request(http, "POST", CONFIGMAPS, configmap("more"))
    assert status == 429, body
    assert headers["Retry-After"] == "1"
    # ...and reads are served meanwhile
    status, body, _ = await request(http, "GET", CONFIGMAPS)
    assert status == 200, body
    status, body, _ = await request(http, "GET", "/api/v1/namespaces/default")
    assert status == 200, body
    for status, body, _ in await asyncio.gather(*stuck):
        assert status == 500, body
        assert body["message"] == (
            'Internal error occurred: failed calling webhook "hang.example.com": failed to '
            f'call webhook: Post "{webhook.url("/hang")}?timeout=2s": context deadline '
            "exceeded")
    await still_serving(http, "after-hang")


async def test_broken_connections_are_failed_calls_in_gos_words(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    cases = {"/cut": (Raw(cut_short), "unexpected error when reading response body. Please "
                                      "retry. Original error: unexpected EOF"),
             "/hang-up": (Raw(hang_up), f'Post "{webhook.url("/hang-up")}?timeout=1s": EOF'),
             "/loop": (Raw(to_itself), f'Post "{webhook.url("/loop")}?timeout=1s": stopped '
                                       "after 10 redirects"),
             "/trickle": (Raw(trickle), f'Post "{webhook.url("/trickle")}?timeout=1s": '
                                        "context deadline exceeded")}
    for path, (answer, _) in cases.items():
        name = path.strip("/")
        webhook.handlers[path] = lambda review, answer=answer: answer
        await install(http, configuration(name, hook(
            f"{name}.example.com", url_client(webhook, path), timeoutSeconds=1,
            objectSelector={"matchLabels": {"case": name}})))
    for path, (_, reason) in cases.items():
        name = path.strip("/")
        cm = configmap(name, a="1")
        cm["metadata"]["labels"] = {"case": name}
        status, body, _ = await request(http, "POST", CONFIGMAPS, cm)
        assert status == 500, (path, body)
        assert body["message"] == (f'Internal error occurred: failed calling webhook '
                                   f'"{name}.example.com": failed to call webhook: {reason}')
    await still_serving(http, "after-broken-connections")


async def test_more_silent_validating_webhooks_than_slots_end_at_the_request_timeout(
        webhook: WebhookServer, server: Server, http: aiohttp.ClientSession) -> None:
    assert server.catalog is not None
    # each call may take as long as the request: the first sixteen hold every slot until
    # nothing is left of it (long enough for all sixteen to reach a loaded machine's webhook)
    server.catalog.webhooks.request_timeout = 4.0
    webhook.handlers["/silent"] = lambda review: Hang()
    names = [f"a{i:02}" for i in range(MAX_PARALLEL_CALLS + 4)]
    for name in names:
        await install(http, configuration(name, hook(
            f"{name}.example.com", url_client(webhook, "/silent"), failurePolicy="Ignore",
            timeoutSeconds=4)))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("quiet"))
    assert status == 201, body
    # the first sixteen took every slot for the request's whole time: the last four had
    # nothing left of it once a slot was free, and were never called
    assert len(webhook.received) == MAX_PARALLEL_CALLS
    await still_serving(http, "after-silence")


async def test_a_chain_of_silent_mutating_webhooks_ends_at_the_request_timeout(
        webhook: WebhookServer, server: Server, http: aiohttp.ClientSession) -> None:
    assert server.catalog is not None
    server.catalog.webhooks.request_timeout = 1.5
    webhook.handlers["/silent"] = lambda review: Hang()
    for name, policy in (("m1", "Ignore"), ("m2", "Ignore"), ("m3", "Fail")):
        await install(http, configuration(name, hook(
            f"{name}.example.com", url_client(webhook, "/silent"), failurePolicy=policy,
            timeoutSeconds=1), mutating=True))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("chained"))
    assert status == 500, body
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "m3.example.com": failed to call '
        f'webhook: Post "{webhook.url("/silent")}?timeout=1s": context deadline exceeded')
    # the third had nothing left of the request's time: never called
    assert len(webhook.received) == 2
    await still_serving(http, "after-chain")


async def test_two_webhooks_that_keep_changing_each_other_are_reinvoked_once(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    def bump(key: str) -> Any:
        def answer(review: dict[str, Any]) -> dict[str, Any]:
            data = review["request"]["object"].get("data") or {}
            return patch_response([{"op": "add", "path": f"/data/{key}",
                                    "value": str(int(data.get(key, "0")) + 1)}])
        return answer

    webhook.handlers["/ping"] = bump("ping")
    webhook.handlers["/pong"] = bump("pong")
    for name in ("ping", "pong"):
        await install(http, configuration(name, hook(
            f"{name}.example.com", url_client(webhook, f"/{name}"),
            reinvocationPolicy="IfNeeded"), mutating=True))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("rally"))
    assert status == 201, body
    # each called once, then once more because the other changed the object: no further
    assert body["data"] == {"ping": "2", "pong": "2"}
    assert len(webhook.received) == 4


async def test_a_patch_cannot_move_the_object_or_change_what_it_is(
        webhook: WebhookServer, http: aiohttp.ClientSession) -> None:
    webhook.handlers["/move"] = lambda review: patch_response([
        {"op": "replace", "path": "/metadata/namespace", "value": "kube-system"},
        {"op": "add", "path": "/metadata/uid", "value": "forged"},
        {"op": "replace", "path": "/kind", "value": "Secret"},
        {"op": "replace", "path": "/apiVersion", "value": "v2"},
        {"op": "add", "path": "/data/kept", "value": "yes"}])
    await install(http, configuration("move", hook(
        "move.example.com", url_client(webhook, "/move")), mutating=True))
    status, body, _ = await request(http, "POST", CONFIGMAPS, configmap("stay", a="1"))
    assert status == 201, body
    assert (body["apiVersion"], body["kind"]) == ("v1", "ConfigMap")
    assert body["metadata"]["namespace"] == "default"
    assert body["metadata"]["uid"] != "forged"
    assert body["data"] == {"a": "1", "kept": "yes"}
    status, _, _ = await request(http, "GET", "/api/v1/namespaces/kube-system/configmaps/stay")
    assert status == 404
