"""The namespace lifecycle: a deleted namespace is emptied, then it goes.

An ordinary controller for Namespaces (:func:`namespace_controller`), written as Kubernetes'
namespace controller works. Deleting a namespace only marks it: the server sets
``deletionTimestamp`` and ``status.phase: Terminating``, keeps the ``kubernetes`` entry of
``spec.finalizers``, and refuses new objects in it (403). For such a namespace the reconcile:

1. reads discovery again (CRDs may have come since) and takes every namespaced resource that
   can be listed and deleted, custom resources included;
2. deletes everything in the namespace, kind by kind (``deletecollection`` with background
   propagation where the resource offers it, else object by object);
3. lists what remains, counting the objects per resource and the finalizers that hold them;
4. writes the namespace's conditions (Kubernetes' five: ``NamespaceDeletionDiscoveryFailure``,
   ``NamespaceDeletionGroupVersionParsingFailure``, ``NamespaceDeletionContentFailure``,
   ``NamespaceContentRemaining`` and ``NamespaceFinalizersRemaining``, "True" while there is a
   problem, "False" with Kubernetes' reasons once not);
5. while something remains, comes back later (0.1 s, doubling up to ``max_delay``); once
   nothing does, removes ``kubernetes`` from ``spec.finalizers`` through the ``/finalize``
   subresource, and the server deletes the namespace (when no metadata finalizer holds it).

Invariants: every step is idempotent and reads its state from the API, so a restart (or a
second replica taking over) carries on where the last one stopped; the only write to the
namespace besides its status is the ``/finalize`` call, made with the resourceVersion read.

Non-guarantees: progress is polled, not watched (the content of a namespace is not cached);
objects whose finalizers are never removed keep the namespace Terminating, as in Kubernetes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.client.api import PropagationPolicy

Obj = Mapping[str, Any]

NAMESPACE: Final = ("v1", "Namespace")
#: the spec finalizer this controller is responsible for
FINALIZER: Final = "kubernetes"
TERMINATING: Final = "Terminating"

#: the condition types this controller maintains, in Kubernetes' order
CONDITION_TYPES: Final = (
    "NamespaceDeletionDiscoveryFailure",
    "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",
    "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
)
OK_REASONS: Final = {
    "NamespaceDeletionDiscoveryFailure": "ResourcesDiscovered",
    "NamespaceDeletionGroupVersionParsingFailure": "ParsedGroupVersions",
    "NamespaceDeletionContentFailure": "ContentDeleted",
    "NamespaceContentRemaining": "ContentRemoved",
    "NamespaceFinalizersRemaining": "ContentRemoved",
}
OK_MESSAGES: Final = {
    "NamespaceDeletionDiscoveryFailure": "All resources successfully discovered",
    "NamespaceDeletionGroupVersionParsingFailure": "All legacy kube types successfully parsed",
    "NamespaceDeletionContentFailure":
        "All content successfully deleted, may be waiting on finalization",
    "NamespaceContentRemaining": "All content successfully removed",
    "NamespaceFinalizersRemaining": "All content successfully removed",
}

FIRST_DELAY: Final = 0.1
DEFAULT_MAX_DELAY: Final = 2.0
#: resources emptied at the same time within one namespace
CONCURRENCY: Final = 4

#: the media type of a metadata-only list
PARTIAL_LIST: Final = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


@dataclass(slots=True)
class Content:
    """What deleting a namespace's content found."""

    #: "plural.group" -> objects left
    remaining: dict[str, int] = field(default_factory=dict)
    #: finalizer -> objects it holds
    finalizers: dict[str, int] = field(default_factory=dict)
    #: one message per resource that could not be emptied
    failures: list[str] = field(default_factory=list)
    discovery_failure: str = ""

    @property
    def done(self) -> bool:
        return not (self.remaining or self.failures or self.discovery_failure)

    def conditions(self) -> list[runtime.Condition]:
        """The five conditions, as Kubernetes' namespace controller words them."""
        found: dict[str, runtime.Condition] = {}
        if self.discovery_failure:
            found["NamespaceDeletionDiscoveryFailure"] = runtime.Condition(
                type="NamespaceDeletionDiscoveryFailure", status=True,
                reason="DiscoveryFailed", message=self.discovery_failure)
        if self.failures:
            found["NamespaceDeletionContentFailure"] = runtime.Condition(
                type="NamespaceDeletionContentFailure", status=True,
                reason="ContentDeletionFailed",
                message=(f"Failed to delete all resource types, {len(self.failures)} "
                         f"remaining: {', '.join(sorted(self.failures))}"))
        if self.remaining:
            parts = sorted(f"{resource} has {count} resource instances"
                           for resource, count in self.remaining.items())
            found["NamespaceContentRemaining"] = runtime.Condition(
                type="NamespaceContentRemaining", status=True, reason="SomeResourcesRemain",
                message=f"Some resources are remaining: {', '.join(parts)}")
        if self.finalizers:
            parts = sorted(f"{finalizer} in {count} resource instances"
                           for finalizer, count in self.finalizers.items())
            found["NamespaceFinalizersRemaining"] = runtime.Condition(
                type="NamespaceFinalizersRemaining", status=True,
                reason="SomeFinalizersRemain",
                message=("Some content in the namespace has finalizers remaining: "
                         f"{', '.join(parts)}"))
        return [found.get(t) or runtime.Condition(type=t, status=False, reason=OK_REASONS[t],
                                                  message=OK_MESSAGES[t])
                for t in CONDITION_TYPES]


def _metadata(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class NamespaceLifecycle:
    """The reconcile function of the namespace controller (``(request, ctx)``)."""

    def __init__(self, *, max_delay: float = DEFAULT_MAX_DELAY) -> None:
        if max_delay < FIRST_DELAY:
            raise ValueError(f"max_delay must be at least {FIRST_DELAY}")
        self.max_delay = max_delay
        #: namespace uid -> consecutive polls that found content left
        self._polls: dict[str, int] = {}

    async def __call__(self, request: runtime.Request,
                       ctx: runtime.Context) -> runtime.Result:
        try:
            return await self._reconcile(request, ctx)
        except errors.Conflict:
            return runtime.Result(requeue=True)  # someone else wrote meanwhile: read again

    async def _reconcile(self, request: runtime.Request,
                         ctx: runtime.Context) -> runtime.Result:
        cached = ctx.get(request)
        if cached is None or not _metadata(cached).get("deletionTimestamp"):
            if cached is not None:
                self._polls.pop(str(_metadata(cached).get("uid")), None)
            return runtime.Result.done()
        try:
            namespace = await ctx.client.get(NAMESPACE, request.name)
        except errors.NotFound:
            return runtime.Result.done()
        meta = _metadata(namespace)
        uid = str(meta.get("uid"))
        if not meta.get("deletionTimestamp"):
            return runtime.Result.done()
        if (namespace.get("status") or {}).get("phase") != TERMINATING:
            namespace = await ctx.client.patch_status(
                NAMESPACE, request.name, {"status": {"phase": TERMINATING},
                                          "metadata": {"resourceVersion":
                                                       meta.get("resourceVersion")}})
        if FINALIZER not in ((namespace.get("spec") or {}).get("finalizers") or []):
            self._polls.pop(uid, None)
            return runtime.Result.done()  # finalized: metadata finalizers, if any, remain
        content = await self.delete_content(ctx, request.name, ctx.logger)
        namespace = await runtime.set_conditions(ctx.client, namespace, *content.conditions(),
                                                 resource=NAMESPACE)
        if not content.done:
            polls = self._polls.get(uid, 0)
            self._polls[uid] = polls + 1
            return runtime.Result.after(min(FIRST_DELAY * 2 ** polls, self.max_delay))
        self._polls.pop(uid, None)
        await self.finalize(ctx.client, namespace)
        ctx.logger.info("namespace %s emptied and finalized", request.name)
        return runtime.Result.done()

    async def finalize(self, client: sp_client.Client, namespace: Obj) -> None:
        """Remove :data:`FINALIZER` from ``spec.finalizers`` through ``/finalize``."""
        spec = dict(namespace.get("spec") or {})
        spec["finalizers"] = [f for f in spec.get("finalizers") or [] if f != FINALIZER]
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": dict(_metadata(namespace)),
                "spec": spec}
        try:
            await client.update(body, resource=NAMESPACE, subresource="finalize")
        except errors.NotFound:
            pass

    async def delete_content(self, ctx: runtime.Context, namespace: str,
                             log: logging.Logger | logging.LoggerAdapter[logging.Logger]
                             ) -> Content:
        """Delete everything in ``namespace``; report what is left."""
        content = Content()
        client = ctx.client
        try:
            await client.discovery.refresh()
        except errors.ApiError as e:
            content.discovery_failure = str(e)
            return content
        if client.discovery.failed:
            failed = client.discovery.failed
            content.discovery_failure = (
                f"Discovery failed for some groups, {len(failed)} failing: " + ", ".join(
                    f"{gv}: {e}" for gv, e in sorted(failed.items())))
        resources = [ref for ref in await client.discovery.all()
                     if ref.namespaced and {"list", "delete"} <= ref.verbs]
        limit = asyncio.Semaphore(CONCURRENCY)

        async def empty(ref: sp_client.ResourceRef) -> None:
            async with limit:
                try:
                    await self._empty(client, ref, namespace, content)
                except errors.ApiError as e:
                    log.info("emptying %s in namespace %s: %s", ref.resource, namespace, e)
                    content.failures.append(f"{_qualified(ref)}: {e}")

        async with asyncio.TaskGroup() as group:
            for ref in resources:
                group.create_task(empty(ref))
        return content

    async def _empty(self, client: sp_client.Client, ref: sp_client.ResourceRef,
                     namespace: str, content: Content) -> None:
        policy: PropagationPolicy = "Background"
        if "deletecollection" in ref.verbs:
            await client.delete_collection(ref, namespace=namespace, propagation_policy=policy)
        else:
            for item in (await self._list(client, ref, namespace)):
                meta = _metadata(item)
                if meta.get("deletionTimestamp"):
                    continue
                try:
                    await client.delete(ref, str(meta.get("name")), namespace=namespace,
                                        propagation_policy=policy)
                except errors.NotFound:
                    pass
        left = await self._list(client, ref, namespace)
        if left:
            content.remaining[_qualified(ref)] = len(left)
            for item in left:
                for finalizer in _metadata(item).get("finalizers") or []:
                    content.finalizers[finalizer] = content.finalizers.get(finalizer, 0) + 1

    @staticmethod
    async def _list(client: sp_client.Client, ref: sp_client.ResourceRef,
                    namespace: str) -> list[Obj]:
        page = await client.request("GET", ref.path(namespace=namespace), accept=PARTIAL_LIST)
        items = page.get("items") if isinstance(page, Mapping) else None
        return [i for i in items or [] if isinstance(i, Mapping)]


def _qualified(ref: sp_client.ResourceRef) -> str:
    """Kubernetes' ``resource.group`` (``configmaps.`` for the core group)."""
    return f"{ref.resource}.{ref.group}"


def namespace_controller(*, workers: int = 2,
                         max_delay: float = DEFAULT_MAX_DELAY) -> runtime.Controller:
    """The namespace lifecycle as a controller named ``namespace``."""
    return runtime.Controller(for_=NAMESPACE, reconcile=NamespaceLifecycle(max_delay=max_delay),
                              name="namespace").with_options(workers=workers)
