"""How a request's webhooks are called, through transports that answer late or never: the
validating ones at most ``MAX_PARALLEL_CALLS`` at once, each with its ``timeoutSeconds`` once
it has a slot, and all of a request's calls within its ``request_timeout``, waiting for a
slot included."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.registry import webhooks
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.watchcache import WatchCache
from setpoint.storage import MemoryBackend

Obj = dict[str, Any]


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


class Answering:
    """A webhook transport whose calls are allowed after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.called: dict[str, float] = {}

    async def post(self, target: webhooks.Target, body: bytes, timeout: float) -> bytes:
        self.called[target.url] = timeout
        await asyncio.sleep(self.delay)
        uid = orjson.loads(body)["request"]["uid"]
        return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                             "response": {"uid": uid, "allowed": True}})


async def put_validating(backend: MemoryBackend, watch_cache: WatchCache,
                         configurations: list[tuple[str, int, str]]) -> None:
    for name, seconds, policy in configurations:
        config = configuration(name, seconds)
        config["webhooks"][0]["failurePolicy"] = policy
        await backend.create(webhooks.VALIDATING_PREFIX + name, orjson.dumps(config))
    await watch_cache.wait_fresh()


CONFIGMAP: Obj = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "c", "namespace": "default"}}


async def test_webhooks_beyond_the_slots_that_answer_in_time_are_all_answered(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    """Each call has its whole timeoutSeconds once it has a slot: twice as many webhooks
    as slots, each answering in 0.6 s of its 1 s, all allow the write."""
    backend, watch_cache = cache
    names = [f"a{i:02}" for i in range(2 * webhooks.MAX_PARALLEL_CALLS)]
    await put_validating(backend, watch_cache, [(n, 1, "Fail") for n in names])
    admission = webhooks.WebhookAdmission(watch_cache)
    transport = Answering(0.6)
    admission.transport = transport
    await admission.validate(dict(CONFIGMAP), None, attrs())
    assert len(transport.called) == len(names)
    assert set(transport.called.values()) == {1.0}


async def test_calls_waiting_for_a_slot_get_what_is_left_of_the_request(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache
    slow = [f"a{i:02}" for i in range(webhooks.MAX_PARALLEL_CALLS)]
    late = [f"b{i}" for i in range(4)]
    await put_validating(backend, watch_cache, [(n, 1, "Ignore") for n in [*slow, *late]])
    admission = webhooks.WebhookAdmission(watch_cache)
    admission.request_timeout = 1.5
    transport = Silent()
    admission.transport = transport
    await admission.validate(dict(CONFIGMAP), None, attrs())  # every webhook fails open
    # the late ones had a slot once the slow ones' second was over: half a second was left
    assert len(transport.called) == len(slow) + len(late)
    for name in late:
        assert 0 < transport.called[f"https://127.0.0.1:1/{name}?timeout=1s"] <= 0.5


async def test_a_call_that_gets_no_slot_before_the_request_deadline_fails_as_a_timeout(
        cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache
    await put_validating(backend, watch_cache, [
        *((f"a{i:02}", 2, "Ignore") for i in range(webhooks.MAX_PARALLEL_CALLS)),
        ("b", 1, "Fail")])
    admission = webhooks.WebhookAdmission(watch_cache)
    admission.request_timeout = 1.0
    transport = Silent()
    admission.transport = transport
    with pytest.raises(errors.ApiError) as caught:
        await admission.validate(dict(CONFIGMAP), None, attrs())
    assert caught.value.code == 500
    assert str(caught.value) == (
        'Internal error occurred: failed calling webhook "b.example.com": failed to call '
        'webhook: Post "https://127.0.0.1:1/b?timeout=1s": context deadline exceeded')
    assert "https://127.0.0.1:1/b?timeout=1s" not in transport.called


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
