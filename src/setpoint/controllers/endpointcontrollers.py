"""The Endpoints and EndpointSlice controllers: a Service's endpoints follow its pods.

Two ordinary controllers for Services (what they compute is in
:mod:`setpoint.controllers.endpoints`):

- ``endpoint`` keeps the ``Endpoints`` object named as each Service with a selector; when
  the Service is deleted, it deletes that object. Services without a selector are left
  alone: their Endpoints belong to whoever writes them. The ``kubernetes`` Service in
  ``default`` has no selector: its Endpoints (the API server's own address) are written by
  the API server, never by this controller.
- ``endpointslice`` keeps the Service's EndpointSlices (labelled
  ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io``, owned by the
  Service, so that the garbage collector deletes them with it); slices other managers
  wrote are never touched.

Both are reconciled when the Service changes, when a pod it selects (or selected: the old
and the new pod are both mapped) changes, and when their own objects change (someone
edited or deleted them: they are put back).

Invariants: writes carry the resourceVersion read (a conflict retries); an unchanged
Service writes nothing. The slice controller remembers the slices it wrote until its cache
shows them (Kubernetes' endpoint slice tracker), so a cache that lags its own writes never
makes it create a slice twice.

Non-guarantees: the mapping from pods to Services is built from the Service cache of the
first reconcile on (every Service is reconciled at start, so nothing is missed); no
topology hints, no EndpointSlice mirroring of selector-less Services' Endpoints, no
``last-change-trigger-time`` annotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers import endpoints as ep

Obj = Mapping[str, Any]

SERVICE: Final = ("v1", "Service")
POD: Final = ("v1", "Pod")
ENDPOINTS: Final = ("v1", "Endpoints")
ENDPOINT_SLICE: Final = ("discovery.k8s.io/v1", "EndpointSlice")
#: the Service whose Endpoints the API server writes
API_SERVER_SERVICE: Final = ("default", "kubernetes")
#: seconds before a reconcile that waits for its own writes to show looks again, and how
#: many times it waits before it stops waiting (someone else deleted what it wrote)
CATCH_UP_DELAY: Final = 0.05
MAX_CATCH_UP_WAITS: Final = 100


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class ServicesOfPod:
    """Maps a pod to the Services of its namespace that select it (a handler)."""

    def __init__(self) -> None:
        self.services: runtime.Cache | None = None

    def requests(self, pod: Obj) -> Iterable[runtime.Request]:
        if self.services is None:
            return
        namespace = str(_meta(pod).get("namespace") or "")
        for service in self.services.by_index("namespace", namespace):
            chosen = ep.selector(service)
            if chosen is not None and ep.selects(chosen, pod):
                yield runtime.Request(namespace, str(_meta(service).get("name")))


def _same_name(obj: Obj) -> Iterable[runtime.Request]:
    meta = _meta(obj)
    if meta.get("name"):
        yield runtime.Request(str(meta.get("namespace") or ""), str(meta["name"]))


def _service_of_slice(obj: Obj) -> Iterable[runtime.Request]:
    labels = _meta(obj).get("labels")
    if isinstance(labels, Mapping) and labels.get(ep.MANAGED_BY_LABEL) == ep.MANAGED_BY \
            and labels.get(ep.SERVICE_NAME_LABEL):
        yield runtime.Request(str(_meta(obj).get("namespace") or ""),
                              str(labels[ep.SERVICE_NAME_LABEL]))


def _pods_of(ctx: runtime.Context, namespace: str) -> list[Obj]:
    return ctx.cache_for(POD).by_index("namespace", namespace)


class EndpointsReconciler:
    def __init__(self, mapper: ServicesOfPod) -> None:
        self.mapper = mapper

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.mapper.services = ctx.cache
        if (request.namespace, request.name) == API_SERVER_SERVICE:
            return runtime.Result.done()
        service = ctx.get(request)
        current = ctx.cache_for(ENDPOINTS).get(request.key)
        try:
            if service is None:
                if current is not None:
                    await ctx.client.delete(ENDPOINTS, request.name,
                                            namespace=request.namespace)
                return runtime.Result.done()
            if ep.selector(service) is None:
                return runtime.Result.done()
            desired = ep.endpoints_for(service, _pods_of(ctx, request.namespace))
            if current is None:
                await ctx.client.create(desired, namespace=request.namespace)
            elif not ep.same_endpoints(current, desired):
                meta = dict(_meta(current))
                meta["labels"] = desired["metadata"].get("labels") or {}
                annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                               if k != ep.OVER_CAPACITY}
                annotations.update(desired["metadata"].get("annotations") or {})
                meta["annotations"] = annotations
                await ctx.client.update({**current, "metadata": meta,
                                         "subsets": desired["subsets"]}, resource=ENDPOINTS)
        except (errors.Conflict, errors.AlreadyExists):
            return runtime.Result(requeue=True)
        except errors.NotFound:
            pass
        except errors.Forbidden:
            pass  # the namespace is being deleted
        return runtime.Result.done()


def endpoints_controller(*, workers: int = 4) -> runtime.Controller:
    mapper = ServicesOfPod()
    return (runtime.Controller(for_=SERVICE, reconcile=EndpointsReconciler(mapper),
                               name="endpoint")
            .watches(POD, mapper)
            .watches(ENDPOINTS, _same_name)
            .with_options(workers=workers))


def _rv(obj: Obj) -> int:
    try:
        return int(_meta(obj).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class EndpointSliceReconciler:
    def __init__(self, mapper: ServicesOfPod, *, max_per_slice: int) -> None:
        self.mapper = mapper
        self.max_per_slice = max_per_slice
        #: service key -> slice name -> the resourceVersion written (0: deleted)
        self._written: dict[str, dict[str, int]] = {}
        #: service key -> reconciles that waited for the cache in a row
        self._waits: dict[str, int] = {}

    def _caught_up(self, key: str, slices: list[Obj]) -> bool:
        written = self._written.get(key)
        if not written:
            self._waits.pop(key, None)
            return True
        waits = self._waits[key] = self._waits.get(key, 0) + 1
        if waits > MAX_CATCH_UP_WAITS:
            self._written.pop(key, None)
            self._waits.pop(key, None)
            return True
        held = {str(_meta(s).get("name")): _rv(s) for s in slices}
        for name, rv in list(written.items()):
            if (rv == 0 and name not in held) or (rv and held.get(name, -1) >= rv):
                del written[name]
        if not written:
            del self._written[key]
            self._waits.pop(key, None)
            return True
        return False

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        self.mapper.services = ctx.cache
        service = ctx.get(request)
        if service is None:
            self._written.pop(request.key, None)
            self._waits.pop(request.key, None)
            return runtime.Result.done()  # its slices go with it (owner references)
        if ep.selector(service) is None:
            return runtime.Result.done()
        slices = [s for s in ctx.cache_for(ENDPOINT_SLICE).by_index("namespace",
                                                                    request.namespace)
                  if list(_service_of_slice(s)) == [request]]
        if not self._caught_up(request.key, slices):
            return runtime.Result.after(CATCH_UP_DELAY)
        plan = ep.plan_slices(service, _pods_of(ctx, request.namespace), slices,
                              max_per_slice=self.max_per_slice)
        if plan.empty:
            return runtime.Result.done()
        written = self._written.setdefault(request.key, {})
        try:
            for name in plan.delete:
                try:
                    await ctx.client.delete(ENDPOINT_SLICE, name, namespace=request.namespace)
                except errors.NotFound:
                    pass
                written[name] = 0
            for obj in plan.update:
                stored = await ctx.client.update(obj, resource=ENDPOINT_SLICE)
                written[str(_meta(stored).get("name"))] = _rv(stored)
            for obj in plan.create:
                stored = await ctx.client.create(obj, namespace=request.namespace)
                written[str(_meta(stored).get("name"))] = _rv(stored)
        except (errors.Conflict, errors.AlreadyExists):
            return runtime.Result(requeue=True)
        except (errors.Forbidden, errors.NotFound):
            pass  # the namespace or the Service is going
        return runtime.Result.done()


def endpointslice_controller(*, workers: int = 4,
                             max_per_slice: int = ep.DEFAULT_MAX_PER_SLICE
                             ) -> runtime.Controller:
    mapper = ServicesOfPod()
    return (runtime.Controller(for_=SERVICE, reconcile=EndpointSliceReconciler(
                mapper, max_per_slice=max_per_slice), name="endpointslice")
            .watches(POD, mapper)
            .watches(ENDPOINT_SLICE, _service_of_slice)
            .with_options(workers=workers))
