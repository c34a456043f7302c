"""CRD cleanup: a deleted CustomResourceDefinition takes its custom resources with it.

An ordinary controller for CustomResourceDefinitions (:func:`crd_controller`), as Kubernetes'
``CRDFinalizer`` works. The server adds the ``customresourcecleanup.apiextensions.k8s.io``
finalizer to every CRD it creates, so deleting one only marks it. For a marked CRD that still
has the finalizer, the reconcile:

1. sets the ``Terminating`` condition (True, ``InstanceDeletionInProgress``, "CustomResource
   deletion is in progress"); from then on the server refuses new custom resources of the
   kind (405, "create not allowed while custom resource definition is terminating");
2. deletes every custom resource of the CRD through the API, namespace by namespace
   (``deletecollection``, background propagation), so their own finalizers are honoured:
   an object with finalizers stays until they are removed, and the CRD waits for it;
3. comes back while any remain (0.1 s, doubling up to ``max_delay``); when none does, sets
   ``Terminating`` to False (``InstanceDeletionCompleted``, "removed all instances") and
   removes the finalizer: the server deletes the CRD, and stops serving its resource.

A CRD that was never established has nothing to delete (``NeverEstablished``).

Invariants: state lives in the CRD (its deletionTimestamp, finalizer and conditions): a
restart carries on. Writes carry the resourceVersion they were computed from.

Non-guarantees: progress is polled; a custom resource whose finalizer is never removed keeps
its CRD Terminating, as in Kubernetes. CRD establishment (names, ``Established``) is done by
the server itself, not here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import clock as base_clock
from setpoint.apimachinery import errors
from setpoint.client.api import PropagationPolicy

Obj = Mapping[str, Any]

CRD: Final = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CLEANUP_FINALIZER: Final = "customresourcecleanup.apiextensions.k8s.io"
FIRST_DELAY: Final = 0.1
DEFAULT_MAX_DELAY: Final = 2.0
PARTIAL_LIST: Final = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


def _metadata(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _condition(obj: Obj, type_: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == type_:
            return c
    return None


def custom_resource(crd: Obj) -> sp_client.ResourceRef | None:
    """The resource a CRD serves (in its storage version when served), or None if none."""
    spec = crd.get("spec") or {}
    names = (crd.get("status") or {}).get("acceptedNames") or {}
    if not names.get("plural"):
        names = spec.get("names") or {}
    versions = [v for v in spec.get("versions") or [] if isinstance(v, Mapping)
                and v.get("served", True)]
    if not versions or not names.get("plural") or not spec.get("group"):
        return None
    version = next((v for v in versions if v.get("storage")), versions[0])
    return sp_client.ResourceRef(
        group=str(spec["group"]), version=str(version.get("name")),
        resource=str(names["plural"]), kind=str(names.get("kind") or ""),
        namespaced=spec.get("scope") == "Namespaced",
        verbs=frozenset({"list", "delete", "deletecollection"}))


class CRDCleanup:
    """The reconcile function of the CRD controller (``(request, ctx)``)."""

    def __init__(self, *, max_delay: float = DEFAULT_MAX_DELAY,
                 clock: base_clock.Clock | None = None) -> None:
        if max_delay < FIRST_DELAY:
            raise ValueError(f"max_delay must be at least {FIRST_DELAY}")
        self.max_delay = max_delay
        self._clock: base_clock.Clock = clock or base_clock.SystemClock()
        self._polls: dict[str, int] = {}

    async def __call__(self, request: runtime.Request,
                       ctx: runtime.Context) -> runtime.Result:
        try:
            return await self._reconcile(request, ctx)
        except errors.Conflict:
            return runtime.Result(requeue=True)

    async def _reconcile(self, request: runtime.Request,
                         ctx: runtime.Context) -> runtime.Result:
        cached = ctx.get(request)
        if cached is None or not _metadata(cached).get("deletionTimestamp") or \
                CLEANUP_FINALIZER not in (_metadata(cached).get("finalizers") or []):
            return runtime.Result.done()
        try:
            crd: Obj = await ctx.client.get(CRD, request.name)
        except errors.NotFound:
            return runtime.Result.done()
        meta = _metadata(crd)
        uid = str(meta.get("uid"))
        if not meta.get("deletionTimestamp") or \
                CLEANUP_FINALIZER not in (meta.get("finalizers") or []):
            return runtime.Result.done()
        terminating = _condition(crd, "Terminating")
        if terminating is None or terminating.get("status") != "True":
            crd = await self._set_terminating(ctx, crd, "True", "InstanceDeletionInProgress",
                                              "CustomResource deletion is in progress")
        established = _condition(crd, "Established")
        ref = custom_resource(crd)
        if established is None or established.get("status") != "True" or ref is None:
            crd = await self._set_terminating(ctx, crd, "False", "NeverEstablished",
                                              "resource was never established")
        else:
            try:
                left = await self._delete_instances(ctx.client, ref)
            except errors.ApiError as e:
                await self._set_terminating(ctx, crd, "True", "InstanceDeletionFailed",
                                            f"could not issue all deletes: {e}")
                raise
            if left:
                polls = self._polls.get(uid, 0)
                self._polls[uid] = polls + 1
                return runtime.Result.after(min(FIRST_DELAY * 2 ** polls, self.max_delay))
            crd = await self._set_terminating(ctx, crd, "False", "InstanceDeletionCompleted",
                                              "removed all instances")
        self._polls.pop(uid, None)
        await self._remove_finalizer(ctx.client, crd)
        ctx.logger.info("custom resources of %s removed; finalizer released", request.name)
        return runtime.Result.done()

    async def _set_terminating(self, ctx: runtime.Context, crd: Obj, status: str, reason: str,
                               message: str) -> Obj:
        """Write the ``Terminating`` condition (no request when it is already so)."""
        current = _condition(crd, "Terminating")
        if current is not None and (current.get("status"), current.get("reason"),
                                    current.get("message")) == (status, reason, message):
            return crd
        condition = runtime.Condition(type="Terminating", status=status == "True",
                                      reason=reason, message=message)
        conditions = runtime.set_condition(
            [c for c in (crd.get("status") or {}).get("conditions") or []
             if isinstance(c, Mapping)], condition, now=self._clock.now())
        patch = {"metadata": {"resourceVersion": _metadata(crd).get("resourceVersion")},
                 "status": {"conditions": conditions}}
        return await ctx.client.patch_status(CRD, str(_metadata(crd).get("name")), patch)

    @staticmethod
    async def _delete_instances(client: sp_client.Client, ref: sp_client.ResourceRef) -> int:
        """Delete every instance not yet being deleted; the number still there."""
        page = await client.request("GET", ref.path(), accept=PARTIAL_LIST)
        items = [i for i in (page.get("items") or []) if isinstance(i, Mapping)]
        policy: PropagationPolicy = "Background"
        pending = {str(_metadata(i).get("namespace") or "") for i in items
                   if not _metadata(i).get("deletionTimestamp")}
        for namespace in sorted(pending):
            try:
                await client.delete_collection(ref, namespace=namespace or None,
                                               propagation_policy=policy)
            except errors.NotFound:
                pass
        if pending:
            page = await client.request("GET", ref.path(), accept=PARTIAL_LIST)
            items = [i for i in (page.get("items") or []) if isinstance(i, Mapping)]
        return len(items)

    @staticmethod
    async def _remove_finalizer(client: sp_client.Client, crd: Obj) -> None:
        meta = _metadata(crd)
        body = {"metadata": {
            "finalizers": [f for f in meta.get("finalizers") or [] if f != CLEANUP_FINALIZER],
            "resourceVersion": meta.get("resourceVersion")}}
        try:
            await client.patch(CRD, str(meta.get("name")), body)
        except errors.NotFound:
            pass


def crd_controller(*, workers: int = 2, max_delay: float = DEFAULT_MAX_DELAY
                   ) -> runtime.Controller:
    """CRD cleanup as a controller named ``crd``."""
    return runtime.Controller(for_=CRD, reconcile=CRDCleanup(max_delay=max_delay),
                              name="crd").with_options(workers=workers)

