"""DELETE: preconditions, graceful deletion, finalizers, and removal.

What a DELETE does to an object, in Kubernetes' order:

* its preconditions (``uid``, ``resourceVersion``) must hold, else 409;
* a kind with a grace period (a Pod) is first *marked*: ``deletionTimestamp`` at now plus the
  grace and ``deletionGracePeriodSeconds``; a later DELETE may only shorten the grace, moving
  the timestamp by as much (:func:`graceful_marks`);
* an object with finalizers (those it has, or those the ``deletion_finalizers`` hook of
  :mod:`setpoint.registry.deletion` leaves on it for the garbage collector), or one its
  strategy holds (``blocks_deletion``), is marked too: ``deletionTimestamp`` set once, the
  admission hooks asked once, ``generation`` bumped where the kind uses it. A DELETE that
  changes nothing of an already marked object writes nothing;
* otherwise the object is removed, and what it held (a Service's cluster IP) released.

Removing the last finalizer later is an update; :mod:`setpoint.registry.storebase` then
removes the object. A DELETE answers ``(body, finished)``: the marked object and False, or
the removed object (kinds that return it) or a Success Status and True.
"""

from __future__ import annotations

import datetime
from typing import Any

from setpoint.apimachinery import timeutil
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import storageerrors
from setpoint.registry.options import DeleteOptions
from setpoint.registry.resources import VersionInfo
from setpoint.registry.storebase import Obj, StoreBase, encode
from setpoint.storage import interface as st


def graceful_marks(meta: Any, grace: int | None,
                   now: datetime.datetime) -> tuple[str, int] | None:
    """The ``(deletionTimestamp, deletionGracePeriodSeconds)`` a DELETE with ``grace`` seconds
    gives an object with ``meta``, or None when they stay as they are (Kubernetes'
    BeforeDelete): a first graceful DELETE sets them to now + grace; a later one may only
    shorten the grace, moving the timestamp by as much. No grace (None), or a first DELETE
    with none left (0 or less), marks nothing."""
    if grace is None:
        return None
    meta = meta if isinstance(meta, dict) else {}
    current = meta.get("deletionGracePeriodSeconds")
    if meta.get("deletionTimestamp"):
        if not isinstance(current, int) or grace >= current:
            return None
        try:
            marked = timeutil.parse_time(str(meta["deletionTimestamp"]))
        except ValueError:
            marked = now + datetime.timedelta(seconds=current)
        moved = marked - datetime.timedelta(seconds=current - grace)
        return timeutil.format_time(moved), grace
    if grace <= 0:
        return None
    return timeutil.format_time(now + datetime.timedelta(seconds=grace)), grace


class Deleting(StoreBase):
    """DELETE of one resource's objects."""

    async def delete(self, namespace: str | None, name: str, version_name: str,
                     opts: DeleteOptions) -> tuple[Obj, bool]:
        """Delete or mark for deletion. Returns (body, finished): the Status or the object."""
        version = self._version(version_name)
        async with self._writes.hold(self.info.key(namespace, name)):
            async for _ in self._attempts():
                kv, current = await self._current(namespace, name)
                meta = current["metadata"]
                self.strategy.check_delete(current)
                if opts.precondition_uid is not None and opts.precondition_uid != meta.get("uid"):
                    raise self._conflict(name, (
                        f"Precondition failed: UID in precondition: {opts.precondition_uid}, "
                        f"UID in object meta: {meta.get('uid', '')}"))
                if opts.precondition_resource_version is not None and \
                        opts.precondition_resource_version != str(kv.mod_revision):
                    raise self._conflict(name, (
                        "Precondition failed: ResourceVersion in precondition: "
                        f"{opts.precondition_resource_version}, ResourceVersion in meta: "
                        f"{kv.mod_revision}"))
                finalizers = list(meta.get("finalizers") or [])
                wanted = self._deletion_finalizers(current, opts) if self._deletion_finalizers \
                    else finalizers
                graceful = self._graceful(current, opts)
                try:
                    updated = deep_copy(current)
                    umeta = updated["metadata"]
                    if graceful is not None:
                        umeta["deletionTimestamp"], umeta["deletionGracePeriodSeconds"] = \
                            graceful
                    if wanted or self.strategy.blocks_deletion(updated):
                        if meta.get("deletionTimestamp") and wanted == finalizers and \
                                graceful is None:
                            return await self._output(current, version), False
                        if wanted:
                            umeta["finalizers"] = wanted
                        else:
                            umeta.pop("finalizers", None)
                        if not meta.get("deletionTimestamp"):
                            await self._admit("DELETE", None,
                                              await self._output(current, version),
                                              version, opts)
                            umeta.setdefault("deletionTimestamp", self._now())
                            umeta.setdefault("deletionGracePeriodSeconds", 0)
                            if self.strategy.uses_generation:
                                umeta["generation"] = int(umeta.get("generation") or 0) + 1
                            self.strategy.prepare_for_delete(updated)
                        if opts.dry_run:
                            return await self._output_owned(updated, version), False
                        written = await self._backend.update(kv.key, encode(updated),
                                                             kv.mod_revision)
                        umeta["resourceVersion"] = str(written.mod_revision)
                        return await self._output_owned(updated, version), False
                    await self._admit("DELETE", None, await self._output(current, version),
                                      version, opts)
                    if opts.dry_run:
                        return await self._deleted(current, version), True
                    await self._backend.delete(kv.key, kv.mod_revision)
                    if self.allocator is not None:
                        await self.allocator.release(current)
                    return await self._deleted(current, version), True
                except st.RevisionConflict:
                    continue
                except st.KeyNotFound as e:
                    raise self._not_found(name) from e
                except st.StorageError as e:
                    raise storageerrors.api_error(e) from e
            raise self._conflict(name)

    def _graceful(self, obj: Obj, opts: DeleteOptions) -> tuple[str, int] | None:
        """:func:`graceful_marks` of ``obj`` for the grace its strategy gives ``opts``."""
        return graceful_marks(obj.get("metadata"), self.strategy.grace_period(obj, opts),
                              self._clock.now())

    async def _deleted(self, obj: Obj, version: VersionInfo) -> Obj:
        """What a DELETE that removed ``obj`` answers: the object, for kinds that return it,
        else a Success Status."""
        if self.strategy.return_deleted_object:
            return await self._output(obj, version)
        return self._success(obj)

    def _success(self, obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        details: Obj = {"name": meta.get("name", ""), "kind": self.info.resource}
        if self.info.group:
            details["group"] = self.info.group
        if meta.get("uid"):
            details["uid"] = meta["uid"]
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": details}
