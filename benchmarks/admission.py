"""Creates/s through a real ``setpoint serve`` without admission policies, with one
ValidatingAdmissionPolicy, one MutatingAdmissionPolicy, one HTTPS webhook and one in-process
Python hook, in the same run, printed side by side.

One server process (secure, as ``setpoint serve`` starts by default), one custom resource
kind. Phases, each creating N objects with C concurrent clients in a namespace of its own:

1. ``none``: no policy exists yet;
2. ``policy``: one ValidatingAdmissionPolicy with one binding matches every create and
   evaluates ``object.spec.size <= 1000000`` (it admits every object);
3. ``policy, not matched``: the same server, objects in a namespace the binding's
   namespaceSelector excludes (the cost of finding that no policy applies);
3b. ``one MutatingAdmissionPolicy``: one policy (``v1beta1``) with one binding, in a
   namespace of its own, adds a label to every create with an apply configuration (the
   validating policy above does not match there; later phases pay for finding that the
   mutating one does not match them);
4. ``webhook``: one ValidatingWebhookConfiguration whose webhook (a local HTTPS server in a
   thread of this process, ``tests.webhookserver``, answering ``allowed: true``) is called
   for every create in a namespace of its own;
5. ``in-process Python hook``: the same kind with one validate function of an operator
   (:class:`setpoint.runtime.Hooks`, ``async def``, admits every object), served and
   registered by the runtime in an event loop of its own thread of this process (as the
   webhook server has), in a namespace of its own; the webhook of phase 4 does not match it;
6. ``none, again``: creates of a kind no rule names, to show the drift of the machine.

    python benchmarks/admission.py [--n 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import start_serve  # noqa: E402
from tests.webhookserver import allow, webhook_server  # noqa: E402

from setpoint.client import Client, load_kubeconfig  # noqa: E402
from setpoint.runtime import AdmissionRequest, Hooks  # noqa: E402

GROUP = "bench.example.com"


def crd(plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}


POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "bench-size"},
    "spec": {"matchConstraints": {"resourceRules": [{
        "apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["items"]}]},
        "validations": [{"expression": "object.spec.size <= 1000000"}]}}
MUTATING_POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
    "metadata": {"name": "bench-stamp"},
    "spec": {"matchConstraints": {"resourceRules": [{
        "apiGroups": [GROUP], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["items"]}]},
        "failurePolicy": "Fail", "reinvocationPolicy": "Never",
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
            "expression": "Object{metadata: Object.metadata{labels: {'stamped': 'yes'}}}"}}]}}
MUTATING_BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1beta1",
    "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "bench-stamp"},
    "spec": {"policyName": "bench-stamp",
             "matchResources": {"namespaceSelector": {"matchLabels": {"mutated": "yes"}}}}}
BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "bench-size-binding"},
    "spec": {"policyName": "bench-size", "validationActions": ["Deny"],
             "matchResources": {"namespaceSelector": {"matchLabels": {"checked": "yes"}}}}}


def webhook_configuration(url: str, ca_bundle: str) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "bench-webhook"},
            "webhooks": [{"name": "allow.bench.example.com", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"],
                          "clientConfig": {"url": url, "caBundle": ca_bundle},
                          "namespaceSelector": {"matchLabels": {"hooked": "yes"}},
                          "rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
                                     "operations": ["CREATE"], "resources": ["items"]}]}]}


@contextmanager
def python_hooks(kubeconfig: Path) -> Iterator[list[int]]:
    """One operator's validate function, served and registered by setpoint.runtime in an
    event loop of its own thread; yields the list of calls it counts."""
    hooks = Hooks("bench", timeout_seconds=10)
    calls = [0]

    @hooks.validate((f"{GROUP}/v1", "Item"), operations=("CREATE",))
    async def admit(req: AdmissionRequest) -> None:
        calls[0] += 1

    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    failure: list[BaseException] = []

    async def serve() -> None:
        try:
            async with Client(load_kubeconfig(kubeconfig)) as client, \
                    hooks.serving(client):
                ready.set()
                await stop.wait()
        except BaseException as e:
            failure.append(e)
            ready.set()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    ready.wait(30)
    if failure:
        raise failure[0]
    try:
        yield calls
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()


async def post(session: aiohttp.ClientSession, path: str, body: Any) -> None:
    async with session.post(path, data=orjson.dumps(body),
                            headers={"Content-Type": "application/json"}) as r:
        if r.status != 201:
            raise RuntimeError(f"{path}: {r.status} {await r.text()}")


async def served(session: aiohttp.ClientSession, path: str) -> None:
    for _ in range(500):
        async with session.get(path + "?limit=1") as r:
            if r.status == 200:
                return
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{path} was not served")


async def creates(session: aiohttp.ClientSession, path: str, kind: str, n: int,
                  concurrency: int) -> float:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await post(session, path, {"apiVersion": f"{GROUP}/v1", "kind": kind,
                                       "metadata": {"name": f"o-{i}"}, "spec": {"size": i}})

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return n / (time.perf_counter() - started)


async def run(args: argparse.Namespace, data: Path) -> dict[str, float]:
    server = start_serve(data)
    results: dict[str, float] = {}
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4,
                                         ssl=server.ssl_context() or False)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector) as s:
            crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
            await post(s, crds, crd("items", "Item"))
            await post(s, crds, crd("others", "Other"))
            for ns, labels in (("none", {}), ("checked", {"checked": "yes"}),
                               ("unchecked", {}), ("mutated", {"mutated": "yes"}),
                               ("hooked", {"hooked": "yes"}),
                               ("python", {}), ("again", {})):
                await post(s, "/api/v1/namespaces", {
                    "apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": ns, "labels": labels}})
            items = f"/apis/{GROUP}/v1/namespaces/{{}}/items"
            await served(s, items.format("none"))
            await served(s, f"/apis/{GROUP}/v1/namespaces/again/others")
            results["none"] = await creates(s, items.format("none"), "Item", args.n,
                                            args.concurrency)
            await post(s, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
                       POLICY)
            await post(s, "/apis/admissionregistration.k8s.io/v1/"
                          "validatingadmissionpolicybindings", BINDING)
            results["policy"] = await creates(s, items.format("checked"), "Item", args.n,
                                              args.concurrency)
            results["policy, not matched"] = await creates(
                s, items.format("unchecked"), "Item", args.n, args.concurrency)
            await post(s, "/apis/admissionregistration.k8s.io/v1beta1/"
                          "mutatingadmissionpolicies", MUTATING_POLICY)
            await post(s, "/apis/admissionregistration.k8s.io/v1beta1/"
                          "mutatingadmissionpolicybindings", MUTATING_BINDING)
            results["one MutatingAdmissionPolicy"] = await creates(
                s, items.format("mutated"), "Item", args.n, args.concurrency)
            async with s.get(items.format("mutated") + "/o-0") as r:
                stamped = (await r.json())["metadata"].get("labels")
                assert stamped == {"stamped": "yes"}, stamped
            with webhook_server({"/allow": allow}) as hook:
                await post(s, "/apis/admissionregistration.k8s.io/v1/"
                              "validatingwebhookconfigurations", webhook_configuration(
                                  hook.url("/allow"), hook.ca_bundle))
                results["one HTTPS webhook"] = await creates(
                    s, items.format("hooked"), "Item", args.n, args.concurrency)
                assert len(hook.received) >= args.n
            with python_hooks(server.kubeconfig) as calls:
                results["in-process Python hook"] = await creates(
                    s, items.format("python"), "Item", args.n, args.concurrency)
                assert calls[0] >= args.n, calls
            results["none, again (other kind)"] = await creates(
                s, f"/apis/{GROUP}/v1/namespaces/again/others", "Other", args.n,
                args.concurrency)
    finally:
        server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(run(args, Path(tmp)))
    base = results["none"]
    print(f"creates of a custom resource, N={args.n}, concurrency {args.concurrency}, "
          "one setpoint serve (TLS, RBAC, SQLite)")
    print(f"{'admission':<28}{'creates/s':>12}{'vs none':>10}")
    for name, rate in results.items():
        print(f"{name:<28}{rate:>12.0f}{rate / base:>10.0%}")


if __name__ == "__main__":
    main()
