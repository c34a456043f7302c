"""Finalizers: run cleanup before an object is allowed to disappear.

An object with a finalizer is not deleted at once: the server sets
``metadata.deletionTimestamp`` and waits until every finalizer has been removed.
:class:`Finalizer` splits a reconcile in two (kube-rs's ``finalizer`` helper):

- the object is **live** (no ``deletionTimestamp``): make sure our finalizer is on it (add it
  first if missing), then run ``apply(obj)``;
- the object is **being deleted** and carries our finalizer: run ``cleanup(obj)``, then remove
  the finalizer, which lets the deletion complete;
- the object is being deleted without our finalizer: nothing to do.

Every finalizer write is a JSON patch guarded by a ``test`` of ``metadata.resourceVersion``
(and, for a removal, of the entry being removed), so it applies only to the object version
that was read. A failed test means the object changed meanwhile: it is raised as
``Conflict``, and the reconcile is retried on the fresh object (the change also arrives on
the watch).

A finalizer write answered ``NotFound`` means the object is already gone: the read was stale
(an earlier reconcile removed the last finalizer, or someone else did), and there is nothing
left to do. :meth:`Finalizer.run` returns done then instead of failing the reconcile.

Invariants: if ``apply`` ever ran for an object, ``cleanup`` runs before the object is gone
(unless someone else removes the finalizer by hand, or the finalizer is never removed:
a ``cleanup`` that keeps failing keeps the object in Terminating). ``cleanup`` may return a
``Result`` asking to be requeued: the finalizer then stays, and cleanup runs again later.

Non-guarantees: ``cleanup`` may run more than once for one deletion (a crash between cleanup
and the finalizer's removal, a conflict on removal) and must be idempotent; so must
``apply``. The object passed to the callbacks is the one read (or the one the finalizer patch
returned); it is shared with the cache, and must not be changed in place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.client import api as client_api
from setpoint.runtime import conditions, reconcile

Obj = Mapping[str, Any]
Step = Callable[[Obj], Awaitable[reconcile.Result | None]]


class Finalizer:
    """One finalizer name and the client to add and remove it with."""

    def __init__(self, client: sp_client.Client, name: str, *,
                 resource: client_api.ResourceLike | None = None) -> None:
        if not name or "/" not in name:
            raise ValueError("a finalizer name is qualified, like example.com/cleanup")
        self.client = client
        self.name = name
        self.resource = resource

    def present(self, obj: Obj) -> bool:
        return self.name in ((obj.get("metadata") or {}).get("finalizers") or ())

    @staticmethod
    def deleting(obj: Obj) -> bool:
        return bool((obj.get("metadata") or {}).get("deletionTimestamp"))

    async def _patch(self, obj: Obj, ops: list[dict[str, Any]]) -> dict[str, Any]:
        metadata = obj.get("metadata") or {}
        rv = metadata.get("resourceVersion")
        if not rv:
            raise ValueError("the object has no metadata.resourceVersion to guard the patch")
        guarded = [{"op": "test", "path": "/metadata/resourceVersion", "value": rv}, *ops]
        ref = self.resource if self.resource is not None else conditions.resource_of(obj)
        try:
            return await self.client.patch(ref, metadata["name"], guarded,
                                           namespace=metadata.get("namespace"),
                                           patch_type=sp_client.PatchType.JSON)
        except errors.Invalid as e:  # a failed test: the object changed since it was read
            raise errors.Conflict(
                f"{metadata['name']} changed while updating finalizer {self.name}: "
                f"{e.message}") from e

    async def add(self, obj: Obj) -> dict[str, Any]:
        """Add the finalizer (no-op when present); returns the object as stored."""
        if self.present(obj):
            return dict(obj)
        current = (obj.get("metadata") or {}).get("finalizers")
        if current:
            op: dict[str, Any] = {"op": "add", "path": "/metadata/finalizers/-",
                                  "value": self.name}
        else:
            op = {"op": "add", "path": "/metadata/finalizers", "value": [self.name]}
        return await self._patch(obj, [op])

    async def remove(self, obj: Obj) -> dict[str, Any]:
        """Remove the finalizer (no-op when absent); returns the object as stored."""
        current = list((obj.get("metadata") or {}).get("finalizers") or ())
        if self.name not in current:
            return dict(obj)
        path = f"/metadata/finalizers/{current.index(self.name)}"
        return await self._patch(obj, [{"op": "test", "path": path, "value": self.name},
                                       {"op": "remove", "path": path}])

    async def run(self, obj: Obj, *, apply: Step, cleanup: Step) -> reconcile.Result:
        """Reconcile ``obj`` with the apply/cleanup split; see the module docstring."""
        if self.deleting(obj):
            if not self.present(obj):
                return reconcile.Result.done()
            result = reconcile.as_result(await cleanup(obj))
            if result.requeue or result.requeue_after is not None:
                return result  # cleanup is not finished: keep the finalizer
            try:
                await self.remove(obj)
            except errors.NotFound:
                pass  # already gone: the deletion this cleanup waited for is complete
            return reconcile.Result.done()
        if not self.present(obj):
            try:
                obj = await self.add(obj)
            except errors.NotFound:
                return reconcile.Result.done()  # gone before apply ever ran: no cleanup owed
        return reconcile.as_result(await apply(obj))


async def with_finalizer(obj: Obj, name: str, client: sp_client.Client, *, apply: Step,
                         cleanup: Step,
                         resource: client_api.ResourceLike | None = None) -> reconcile.Result:
    """``Finalizer(client, name).run(obj, apply=..., cleanup=...)``."""
    return await Finalizer(client, name, resource=resource).run(obj, apply=apply,
                                                               cleanup=cleanup)
