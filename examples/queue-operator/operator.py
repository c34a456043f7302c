"""The queue operator: each ``Queue`` object is a queue in an external message-queue service.

A ``Queue`` (``messaging.example.com/v1``) named ``orders`` with ``spec.visibilityTimeout``
is kept as a queue ``<namespace>-orders`` in the service (``fakequeues.py`` here, an SQS
stand-in with SQS's idempotent create); ``status.url`` says where it lives. What makes an
operator of something *outside* the cluster behave:

- **a budget** (``budgets`` below, shared by every controller of the manager): at most
  ``rate`` calls a second with bursts of ``burst``, ``concurrency`` at once, and a circuit
  breaker that stops calling on a 429 or 5xx for the ``Retry-After`` it says, then tries
  one probe; 1,000 Queues created at once become a steady ``rate`` calls a second, not a
  thousand at once; sharded replicas (``setpoint run --shard-group``) each use their shards'
  part of it, so the budget is the operator's, whatever the number of replicas;
- **a poll cadence** (``poll``): no watch tells the operator that someone deleted a queue
  from the console, so each Queue is reconciled again every ``poll`` seconds ± 20 % (the
  jitter spreads a thousand of them over the interval); the create is idempotent, so one
  call per poll both checks and repairs;
- **a finalizer**: a deleted Queue deletes its queue before it goes;
- **a predicate**: only spec changes and deletions wake it (its own finalizer and status
  writes do not, so each new Queue costs exactly one call);
- **reconcile now**: ``kubectl annotate queue/orders setpoint.dev/reconcile-now=$(date +%s)
  --overwrite`` reconciles it at once.

Configuration (environment, for ``setpoint run``): ``QUEUE_SERVICE_URL`` (default
``http://127.0.0.1:9324``), ``QUEUE_BUDGET_RATE`` (20), ``QUEUE_BUDGET_BURST`` (10),
``QUEUE_POLL_SECONDS`` (60)::

    python examples/queue-operator/fakequeues.py --port 9324 &
    setpoint run examples/queue-operator/operator.py --kubeconfig .setpoint/kubeconfig
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import aiohttp

from setpoint.runtime import (
    BudgetConfig,
    Context,
    PollConfig,
    Registry,
    Request,
    Result,
    TerminalError,
    UpstreamError,
    generation_changed,
    with_finalizer,
)
from setpoint.runtime.predicates import Funcs

QUEUE = ("messaging.example.com/v1", "Queue")
FINALIZER = "messaging.example.com/delete-queue"
#: the budget's name: every call to the service goes through it
TARGET = "queues"


def deletion_started(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    def stamp(obj: Mapping[str, Any]) -> Any:
        return (obj.get("metadata") or {}).get("deletionTimestamp")
    return stamp(old) != stamp(new)


def queue_name(request: Request) -> str:
    """The service's name of a Queue object's queue (unique per namespace and name)."""
    return f"{request.namespace}-{request.name}"[:80]


async def _call(ctx: Context, method: str, url: str,
                body: Mapping[str, Any] | None = None) -> tuple[int, Any]:
    """One call to the service through the budget; 429/5xx are raised (the breaker has
    counted them), anything else is returned."""
    async with ctx.budget(TARGET) as call, aiohttp.ClientSession() as session, \
            session.request(method, url, json=body,
                            timeout=aiohttp.ClientTimeout(total=10)) as response:
        call.record(response.status, response.headers.get("Retry-After"))
        payload = await response.json() if response.content_type == "application/json" \
            else None
        if response.status == 429 or response.status >= 500:
            raise UpstreamError(f"{method} {url}: {response.status}")
        return response.status, payload


def build(service_url: str, *, poll: float = 60.0) -> Registry:
    """The operator's controllers, calling the service at ``service_url``."""
    registry = Registry()
    base = service_url.rstrip("/")

    @registry.controller(for_=QUEUE, poll=PollConfig(interval=poll, jitter=0.2),
                         predicates=[generation_changed | Funcs(on_update=deletion_started)])
    async def reconcile(request: Request, ctx: Context) -> Result | None:
        queue = ctx.get(request)
        if queue is None:
            return None
        name = queue_name(request)

        async def apply(obj: Mapping[str, Any]) -> Result | None:
            spec = obj.get("spec") or {}
            status, payload = await _call(ctx, "PUT", f"{base}/queues/{name}",
                                          {"visibilityTimeout": spec.get("visibilityTimeout",
                                                                         30)})
            if status == 400:
                raise TerminalError(f"the service refused queue {name}: {payload}")
            if status not in (200, 201):
                raise RuntimeError(f"PUT queue {name}: unexpected {status}")
            if status == 201 and (obj.get("status") or {}).get("url"):
                ctx.logger.info("queue %s was gone from the service; created it again", name)
            wanted = {"url": payload["url"], "queueName": name,
                      "observedGeneration": obj["metadata"].get("generation")}
            current = obj.get("status") or {}
            if any(current.get(k) != v for k, v in wanted.items()):
                await ctx.client.patch_status(QUEUE, request.name, {"status": wanted},
                                              namespace=request.namespace)
            return None

        async def cleanup(obj: Mapping[str, Any]) -> Result | None:
            status, _ = await _call(ctx, "DELETE", f"{base}/queues/{name}")
            if status not in (204, 404):
                raise RuntimeError(f"DELETE queue {name}: unexpected {status}")
            return None

        return await with_finalizer(queue, FINALIZER, ctx.client, apply=apply,
                                    cleanup=cleanup)

    return registry


def budget_from_env(env: Mapping[str, str]) -> BudgetConfig:
    return BudgetConfig(rate=float(env.get("QUEUE_BUDGET_RATE", "20")),
                        burst=int(env.get("QUEUE_BUDGET_BURST", "10")),
                        concurrency=4, open_for=5.0, max_open=120.0)


registry = build(os.environ.get("QUEUE_SERVICE_URL", "http://127.0.0.1:9324"),
                 poll=float(os.environ.get("QUEUE_POLL_SECONDS", "60")))
#: what ``setpoint run`` (and the test harness) give the manager
budgets = {TARGET: budget_from_env(os.environ)}
