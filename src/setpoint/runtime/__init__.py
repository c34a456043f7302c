"""``setpoint.runtime``: write Kubernetes controllers in Python.

A controller declares what it is for and what it watches, and reconciles one object at a time
from a shared, indexed cache; a manager runs controllers with leader election, probes and
metrics. Example::

    registry = Registry()

    @registry.controller(for_=("example.com/v1", "Book"), owns=[("v1", "ConfigMap")])
    async def reconcile(request: Request, ctx: Context) -> Result:
        book = ctx.get(request)
        if book is None:
            return Result.done()          # deleted: owned objects are garbage-collected
        ...                               # make the world match book["spec"]
        return Result.done()

    async with Client(load_kubeconfig()) as client:
        await Manager(client, registry, health_port=8081, metrics_port=8080).run()

The layers, each usable alone: :mod:`~setpoint.runtime.watcher` (list-then-watch state
machine), :mod:`~setpoint.runtime.listwatch` (its driver), :mod:`~setpoint.runtime.informercache`
(indexed store), :mod:`~setpoint.runtime.informer`, :mod:`~setpoint.runtime.queue` (work
queue), :mod:`~setpoint.runtime.engine` (workers), :mod:`~setpoint.runtime.builder`,
:mod:`~setpoint.runtime.manager`; helpers in :mod:`~setpoint.runtime.finalizers`,
:mod:`~setpoint.runtime.owners`, :mod:`~setpoint.runtime.conditions`,
:mod:`~setpoint.runtime.conversion` (a CRD's version conversion as a Python function),
:mod:`~setpoint.runtime.hooks` (an operator's validate, mutate and convert hooks),
:mod:`~setpoint.runtime.events` and :mod:`~setpoint.runtime.leaderelection`. Work that is not
a controller (it discovers what to watch as it runs) is a :mod:`~setpoint.runtime.runnable`.
Why a reconcile ran is :mod:`~setpoint.runtime.triggers` (kept by
:mod:`~setpoint.runtime.history`), the order of a queue :mod:`~setpoint.runtime.fairness`;
active-active replicas that split the keys are :mod:`~setpoint.runtime.sharding`;
budgets for calls to external APIs (rate, concurrency, circuit breaker) are
:mod:`~setpoint.runtime.budgets`, a per-object poll cadence :mod:`~setpoint.runtime.polling`;
typed resources from pydantic models are :mod:`setpoint.runtime.typed` (not imported here:
pydantic is optional).
"""

# Only this module imports names from the others: it is the package's public surface.
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from setpoint.runtime.budgets import (
    BreakerOpenError,
    Budget,
    BudgetConfig,
    Budgets,
    UpstreamError,
)
from setpoint.runtime.builder import Controller, ControllerOptions
from setpoint.runtime.clock import AsyncClock, FakeAsyncClock, SystemAsyncClock
from setpoint.runtime.conditions import (
    Condition,
    get_condition,
    is_true,
    set_condition,
    set_conditions,
)
from setpoint.runtime.context import Context
from setpoint.runtime.engine import Engine
from setpoint.runtime.events import EventRecorder
from setpoint.runtime.fairness import PriorityConfig
from setpoint.runtime.finalizers import Finalizer, with_finalizer
from setpoint.runtime.handlers import (
    RECONCILE_NOW_ANNOTATION,
    EnqueueMapped,
    EnqueueOwner,
    EnqueueSelf,
    Handler,
)
from setpoint.runtime.history import HistoryConfig, ReconcileHistory
from setpoint.runtime.informer import ClientListWatcher, Informer, SharedInformers
from setpoint.runtime.informercache import Cache, Handlers
from setpoint.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from setpoint.runtime.listwatch import BackoffConfig, WatcherConfig, run_watcher
from setpoint.runtime.manager import CacheSyncTimeoutError, Manager
from setpoint.runtime.metrics import MetricsRegistry
from setpoint.runtime.owners import (
    AlreadyOwnedError,
    controller_of,
    owned_by,
    owner_of,
    set_controller_reference,
)
from setpoint.runtime.polling import PollConfig
from setpoint.runtime.predicates import (
    Predicate,
    annotations_changed,
    generation_changed,
    labels_changed,
    resource_version_changed,
)
from setpoint.runtime.queue import ShutDown, WorkQueue
from setpoint.runtime.ratelimit import (
    ItemExponentialBackoff,
    MaxOf,
    RateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)
from setpoint.runtime.reconcile import (
    FuncReconciler,
    Reconciler,
    Request,
    Result,
    TerminalError,
)
from setpoint.runtime.reconcile_events import ReconcileEvents, ReconcileEventsConfig
from setpoint.runtime.registry import Registry, controllers_in
from setpoint.runtime.runnable import Runnable, RunnableContext
from setpoint.runtime.sharding import ShardCoordinator, ShardingConfig
from setpoint.runtime.triggers import Trigger, current_triggers

if _TYPE_CHECKING:
    from setpoint.runtime.conversion import ConversionWebhook
    from setpoint.runtime.hookcerts import CertificateConfig
    from setpoint.runtime.hooks import (
        AdmissionRequest,
        Denied,
        HookConfig,
        Hooks,
        Verdict,
        hooks_in,
    )

# Imported on first use: the hook server (its TLS material, cryptography, aiohttp's web
# server) is a fifth of the package's import time, and most operators serve no hooks.
_LAZY = {"ConversionWebhook": "setpoint.runtime.conversion",
         "CertificateConfig": "setpoint.runtime.hookcerts",
         **dict.fromkeys(("AdmissionRequest", "Denied", "HookConfig", "Hooks", "Verdict",
                          "hooks_in"), "setpoint.runtime.hooks")}


def __getattr__(name: str) -> _Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

__all__ = [
    "AdmissionRequest",
    "AlreadyOwnedError",
    "AsyncClock",
    "BackoffConfig",
    "BreakerOpenError",
    "Budget",
    "BudgetConfig",
    "Budgets",
    "Cache",
    "CacheSyncTimeoutError",
    "CertificateConfig",
    "ClientListWatcher",
    "Condition",
    "Context",
    "Controller",
    "ControllerOptions",
    "ConversionWebhook",
    "Denied",
    "Engine",
    "EnqueueMapped",
    "EnqueueOwner",
    "EnqueueSelf",
    "EventRecorder",
    "FakeAsyncClock",
    "Finalizer",
    "FuncReconciler",
    "Handler",
    "Handlers",
    "HistoryConfig",
    "HookConfig",
    "Hooks",
    "Informer",
    "ItemExponentialBackoff",
    "LeaderElectionConfig",
    "LeaderElector",
    "Manager",
    "MaxOf",
    "MetricsRegistry",
    "PollConfig",
    "Predicate",
    "PriorityConfig",
    "RECONCILE_NOW_ANNOTATION",
    "RateLimiter",
    "ReconcileEvents",
    "ReconcileEventsConfig",
    "ReconcileHistory",
    "Reconciler",
    "Registry",
    "Request",
    "Result",
    "Runnable",
    "RunnableContext",
    "ShardCoordinator",
    "ShardingConfig",
    "SharedInformers",
    "ShutDown",
    "SystemAsyncClock",
    "TerminalError",
    "TokenBucket",
    "Trigger",
    "UpstreamError",
    "Verdict",
    "WatcherConfig",
    "WorkQueue",
    "annotations_changed",
    "controller_of",
    "controllers_in",
    "current_triggers",
    "default_controller_rate_limiter",
    "generation_changed",
    "get_condition",
    "hooks_in",
    "is_true",
    "labels_changed",
    "owned_by",
    "owner_of",
    "resource_version_changed",
    "run_watcher",
    "set_condition",
    "set_conditions",
    "set_controller_reference",
    "with_finalizer",
]
