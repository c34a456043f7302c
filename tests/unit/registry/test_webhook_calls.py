"""How a request's validating webhooks are called, through a transport that never answers
in time: at most ``MAX_PARALLEL_CALLS`` at once, each within its ``timeoutSeconds`` of when
the request's validation began, waiting for a free slot included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.registry import webhooks
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.watchcache import WatchCache
from setpoint.storage import MemoryBackend

Obj = dict[str, Any]


@pytest.fixture
async def cache() -> AsyncIterator[tuple[MemoryBackend, WatchCache]]:
    backend = MemoryBackend()
    await backend.start()
    cache = WatchCache(backend)
    task = asyncio.create_task(cache.run())
    await cache.wait_ready()
    yield backend, cache
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await backend.close()


class Silent:
    """A webhook transport whose calls all end at their deadline, unanswered."""

    def __init__(self) -> None:
        self.called: dict[str, float] = {}

    async def post(self, target: webhooks.Target, body: bytes, timeout: float) -> bytes:
        self.called[target.url] = timeout
        await asyncio.sleep(timeout)
        raise webhooks.CallFailed(f'Post "{target.url}": context deadline exceeded')


def configuration(name: str, seconds: int) -> Obj:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{"name": f"{name}.example.com", "failurePolicy": "Ignore",
                          "timeoutSeconds": seconds, "sideEffects": "None",
                          "admissionReviewVersions": ["v1"],
                          "clientConfig": {"url": f"https://127.0.0.1:1/{name}"},
                          "rules": [{"apiGroups": [""], "apiVersions": ["*"],
                                     "operations": ["CREATE"], "resources": ["configmaps"],
                                     "scope": "*"}]}]}


def attrs() -> AdmissionAttributes:
    return AdmissionAttributes(
        operation="CREATE", group="", version="v1", resource="configmaps", kind="ConfigMap",
        subresource="", namespace="default", name="c", namespaced=True, user=None,
        dry_run=False, options={}, sink=None, versions=("v1",))


async def test_calls_waiting_for_a_slot_wait_within_their_own_timeout(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache
    slow = [f"a{i:02}" for i in range(webhooks.MAX_PARALLEL_CALLS)]
    late = [f"b{i}" for i in range(4)]
    for name, seconds in [*((n, 2) for n in slow), *((n, 1) for n in late)]:
        await backend.create(webhooks.VALIDATING_PREFIX + name,
                             orjson.dumps(configuration(name, seconds)))
    await watch_cache.wait_fresh()
    admission = webhooks.WebhookAdmission(watch_cache)
    transport = Silent()
    admission.transport = transport
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "default"}}
    await admission.validate(obj, None, attrs())  # every webhook fails open
    # the slow ones took every slot until after the late ones' deadline: never called
    assert sorted(transport.called) == sorted(
        f"https://127.0.0.1:1/{n}?timeout=2s" for n in slow)
    assert all(0 < t <= 2 for t in transport.called.values())


async def test_a_call_that_cannot_get_a_slot_in_time_fails_as_a_timeout(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache
    names = [f"a{i:02}" for i in range(webhooks.MAX_PARALLEL_CALLS)] + ["b"]
    for name in names:
        config = configuration(name, 2 if name != "b" else 1)
        config["webhooks"][0]["failurePolicy"] = "Fail" if name == "b" else "Ignore"
        await backend.create(webhooks.VALIDATING_PREFIX + name, orjson.dumps(config))
    await watch_cache.wait_fresh()
    admission = webhooks.WebhookAdmission(watch_cache)
    admission.transport = Silent()
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "default"}}
    with pytest.raises(errors.ApiError) as caught:
        await admission.validate(obj, None, attrs())
    assert caught.value.code == 500
    assert str(caught.value) == (
        'Internal error occurred: failed calling webhook "b.example.com": failed to call '
        'webhook: Post "https://127.0.0.1:1/b?timeout=1s": context deadline exceeded')


async def test_all_of_a_requests_calls_end_within_its_request_timeout(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache
    for name in ("m1", "m2", "m3"):
        config = configuration(name, 1)
        config["kind"] = "MutatingWebhookConfiguration"
        await backend.create(webhooks.MUTATING_PREFIX + name, orjson.dumps(config))
    await backend.create(webhooks.VALIDATING_PREFIX + "v", orjson.dumps(configuration("v", 1)))
    await watch_cache.wait_fresh()
    admission = webhooks.WebhookAdmission(watch_cache)
    admission.request_timeout = 1.5
    transport = Silent()
    admission.transport = transport
    obj = {"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "c", "namespace": "default"}}
    request = attrs()
    await admission.mutate(obj, None, request)  # every webhook fails open
    await admission.validate(obj, None, request)
    # the first took its second, the second what was left of the request's 1.5 s; the third
    # and the validating webhook had none left: failed as timeouts, never called
    assert list(transport.called) == ["https://127.0.0.1:1/m1?timeout=1s",
                                      "https://127.0.0.1:1/m2?timeout=1s"]
    assert 0 < transport.called["https://127.0.0.1:1/m2?timeout=1s"] < 1
