"""The generic store: get, list, watch, create, update, patch and delete over a backend.

:class:`Store` is one resource's objects; its operations are split by concept, each module
with its own invariants: :mod:`~setpoint.registry.storebase` (state, body checks, admission,
the compare-and-swap of every update), :mod:`~setpoint.registry.writing` (create, update),
:mod:`~setpoint.registry.patching` (patch types, patches, server-side apply),
:mod:`~setpoint.registry.deleting` (DELETE, graceful deletion, finalizers),
:mod:`~setpoint.registry.reads` (get, list, watch) with
:mod:`~setpoint.registry.continuetokens` and :mod:`~setpoint.registry.watchstream`; the
``/scale`` subresource and DELETE of a collection are here. The names callers use stay
importable from this module.

The registry is the one place where storage errors become API errors. Invariants:

* **resourceVersion is the storage revision** of the object's last write; it is never stored
  inside the value, only set when an object is read.
* **Optimistic concurrency.** Every write is a compare-and-swap on the revision it read. A
  client that sent a resourceVersion (in the body of an update, in a patch, in an applied
  configuration or a Scale) gets 409 Conflict when it is stale; every write without one (all
  patch types, server-side apply, updates without resourceVersion, ``/status`` and
  ``/scale``, deletes without preconditions) is retried on a fresh read when it loses the
  compare-and-swap, as Kubernetes' ``GuaranteedUpdate`` does: it is computed again from the
  new state, so every concurrent writer's change lands. Retries are bounded
  (:data:`MAX_WRITE_ATTEMPTS`, with a short jittered pause after the first few); a write
  that loses them all answers 409. Within one server the writes of one object queue
  (:mod:`setpoint.registry.keylocks`), so they lose only to other servers' writes.
* **No-op writes** (an update that changes nothing) return the current object and write nothing:
  no new revision, no watch event.
* **Finalizers.** Deleting an object that has finalizers only sets ``deletionTimestamp``;
  the update that removes the last finalizer writes the object once more, then deletes it.
  The ``deletion_finalizers`` hook says which finalizers a DELETE leaves on the object (the
  garbage collector's ``orphan`` and ``foregroundDeletion``, from the DeleteOptions); a
  strategy's ``blocks_deletion`` keeps a marked object without finalizers (a Namespace with
  ``spec.finalizers``) until it returns False.
* Reads are served from the :class:`~setpoint.registry.cache.WatchCache` after waiting until it
  holds every write acknowledged before the read (or the revision the client asked for).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from setpoint.apimachinery import errors
from setpoint.registry import scale
from setpoint.registry.deleting import Deleting
from setpoint.registry.options import DeleteOptions, ListOptions, WriteOptions
from setpoint.registry.patching import (
    PATCH_APPLY,
    PATCH_APPLY_CBOR,
    PATCH_JSON,
    PATCH_MERGE,
    PATCH_STRATEGIC,
    Patching,
    apply_patch,
)
from setpoint.registry.reads import ListPage, Reads
from setpoint.registry.resources import ScaleSpec, VersionInfo
from setpoint.registry.storebase import (
    MAX_WRITE_ATTEMPTS,
    SERVER_OWNED_META,
    Admission,
    Allocation,
    Allocator,
    NamespaceGate,
    Obj,
    _check_name,
    encode,
)
from setpoint.registry.watchstream import WatchEvent, WatchStream
from setpoint.storage import interface as st

__all__ = [
    "MAX_WRITE_ATTEMPTS",
    "PATCH_APPLY",
    "PATCH_APPLY_CBOR",
    "PATCH_JSON",
    "PATCH_MERGE",
    "PATCH_STRATEGIC",
    "SERVER_OWNED_META",
    "Admission",
    "Allocation",
    "Allocator",
    "ListPage",
    "NamespaceGate",
    "Store",
    "WatchEvent",
    "WatchStream",
    "encode",
]


class Store(Patching, Deleting, Reads):
    """Objects of one resource, kept in the storage version."""

    # --- scale ---------------------------------------------------------------------------

    async def get_scale(self, namespace: str | None, name: str, version_name: str, *,
                        resource_version: str = "") -> Obj:
        version = self._version(version_name)
        spec = self._scale_spec(version)
        obj = await self.get(namespace, name, version.name, resource_version=resource_version)
        return self._scale_of(obj, spec)

    async def patch_scale(self, namespace: str | None, name: str, patch_type: str, body: Any,
                          version_name: str, opts: WriteOptions) -> Obj:
        """PATCH of ``/scale``: the same patch types and errors as a patch of the object
        (:func:`~setpoint.registry.patching.apply_patch`), applied to the current Scale;
        apply is taken as a merge patch (a Scale's fields are not managed)."""
        self.check_patch_type(patch_type, opts)

        def change(current: Obj) -> Obj:
            return apply_patch(current, patch_type, body, name=name, group="autoscaling",
                               resource="scales", merge_keys={})
        return await self.update_scale(namespace, name, version_name, opts, change)

    async def update_scale(self, namespace: str | None, name: str, version_name: str,
                           opts: WriteOptions, change: Callable[[Obj], Any]) -> Obj:
        """Write the replicas of the Scale ``change`` makes of the current one; returns the
        new Scale. Retried like every write; a resourceVersion in the Scale is a
        precondition."""
        version = self._version(version_name)
        spec = self._scale_spec(version)
        async with self._writes.hold(self.info.key(namespace, name)):
            async for _ in self._attempts():
                kv, current = await self._current(namespace, name)
                obj = await self._output(current, version)
                wanted = change(self._scale_of(obj, spec))
                _check_name(wanted.get("metadata") if isinstance(wanted.get("metadata"), dict)
                            else {}, name)
                replicas, errs = scale.replicas_errors(wanted)
                if errs:
                    raise errors.invalid("Scale", "autoscaling", name, errs)
                precondition = scale.resource_version(wanted)
                if precondition and self._body_revision(precondition, name) != kv.mod_revision:
                    raise self._conflict(name)
                updated = scale.with_replicas(obj, spec, replicas)
                warnings = self.strategy.warnings(version)
                self._normalize(updated, version, opts, warnings)
                try:
                    result = await self._write_update(kv, current, updated, version, opts,
                                                      "scale", warnings)
                except st.RevisionConflict:
                    continue
                return self._scale_of(result.object, spec)
            raise self._conflict(name)

    def _scale_of(self, obj: Obj, spec: ScaleSpec) -> Obj:
        out = scale.scale_of(obj, spec)
        selector = self.strategy.scale_selector(obj)
        if selector:
            out["status"]["selector"] = selector
        return out

    def _scale_spec(self, version: VersionInfo) -> ScaleSpec:
        if version.scale is None:
            raise errors.path_not_found()
        return version.scale

    async def delete_collection(self, namespace: str | None, version_name: str,
                                list_opts: ListOptions, opts: DeleteOptions) -> ListPage:
        page = await self.list(namespace, version_name,
                               ListOptions(label_selector=list_opts.label_selector,
                                           field_selector=list_opts.field_selector))
        deleted: builtins.list[Obj] = []
        for obj in page.items:
            meta = obj.get("metadata") or {}
            try:
                body, _ = await self.delete(meta.get("namespace"), meta["name"], version_name,
                                            opts)
            except errors.NotFound:
                continue
            deleted.append(obj if body.get("kind") == "Status" else body)
        return ListPage(deleted, self._cache.revision)
