"""Create and update: a new object, a PUT of a whole object, and a read-modify-write.

Invariants:

* A create assigns what the server owns (uid, creationTimestamp, the name from generateName)
  and drops what a client may not set; an object that exists answers 409 AlreadyExists.
* **Optimistic concurrency.** An update that names a resourceVersion is a compare-and-swap on
  it (409 Conflict when stale); one without is retried on a fresh read when it loses its
  compare-and-swap (Kubernetes' ``GuaranteedUpdate``), at most
  :data:`~setpoint.registry.storebase.MAX_WRITE_ATTEMPTS` times, then 409. Within one server
  the writes of one object queue (:mod:`setpoint.registry.keylocks`).
* :meth:`Writes.guaranteed_update` computes the new object again from each fresh read, so
  every concurrent writer's change lands.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from setpoint.apimachinery import errors, fields, validation
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import storageerrors
from setpoint.registry.options import WriteOptions, WriteResult
from setpoint.registry.storebase import (
    SERVER_OWNED_META,
    Obj,
    StaleStart,
    StoreBase,
    _check_name,
    allocated,
    encode_write,
    start_again,
)
from setpoint.storage import interface as st


class Writes(StoreBase):
    """Create, update and read-modify-write of one resource's objects."""

    async def create(self, namespace: str | None, body: Any, version_name: str,
                     opts: WriteOptions, *, applied: bool = False) -> WriteResult:
        version = self._version(version_name)
        obj = body
        meta = self._check_type(obj, version)
        self._check_depth(obj, str(meta.get("name") or ""))
        self._check_namespace(meta, namespace)
        warnings = self.strategy.warnings(version)
        self._normalize(obj, version, opts, warnings)
        now = self._now()
        if opts.field_manager and not applied:
            self._fields(version).update(None, obj, opts.field_manager, now)
        meta = obj["metadata"]
        if not meta.get("name") and isinstance(meta.get("generateName"), str) \
                and meta["generateName"]:
            meta["name"] = validation.generate_name(meta["generateName"], self._rng)
        name = str(meta.get("name") or "")
        for k in (*SERVER_OWNED_META, "resourceVersion", "generation"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = now
        self.strategy.prepare_for_create(obj, version)
        self.strategy.prepare_requestor(obj, opts.user)
        await self._gate(namespace, name)
        errs = self.strategy.validate(obj, version)
        if errs:
            raise self._invalid(name, errs)
        await self._admit("CREATE", obj, None, version, opts)
        allocation = await self.allocator.allocate(obj, None, opts.dry_run) \
            if self.allocator is not None else None
        if opts.dry_run:
            return WriteResult(obj, created=True, warnings=warnings)
        key = self.info.key(namespace, name)
        async with allocated(allocation):
            stored = await self.conversion.to_storage(obj, version.name)
            try:
                kv = await self._backend.create(key, encode_write(stored))
            except st.KeyExists as e:
                raise errors.already_exists(self.info.resource, self.info.group, name) from e
            except st.StorageError as e:
                raise storageerrors.api_error(e) from e
        stored["metadata"]["resourceVersion"] = str(kv.mod_revision)
        return WriteResult(await self._output_owned(stored, version), created=True,
                           warnings=warnings)

    async def update(self, namespace: str | None, name: str, body: Any, version_name: str,
                     opts: WriteOptions, subresource: str = "") -> WriteResult:
        version = self._version(version_name)
        meta = self._check_type(body, version)
        _check_name(meta, name)
        self._check_namespace(meta, namespace)
        requested_rv = meta.get("resourceVersion") or ""
        # "0" is no resourceVersion, as for kube-apiserver (an unconditional update, or 422)
        requested = self._body_revision(requested_rv, name) if requested_rv else 0
        if not requested and not self.strategy.allow_unconditional_update:
            raise self._invalid(name, [fields.invalid(
                "metadata.resourceVersion", 0,
                "must be specified for an update")])
        async with self._writes.hold(self.info.key(namespace, name)):
            async for attempt in self._attempts():
                kv, current, cached = await self._start(namespace, name, attempt)
                try:
                    if requested and requested != kv.mod_revision:
                        raise self._conflict(name)
                    self._check_depth(body, name, current)
                    new = deep_copy(body)
                    warnings = self.strategy.warnings(version)
                    self._normalize(new, version, opts, warnings)
                    return await self._write_update(kv, current, new, version, opts, subresource,
                                                    warnings, cached=cached)
                except st.RevisionConflict as e:
                    if requested and not cached:
                        raise self._conflict(name) from e
                except (errors.ApiError, StaleStart) as e:
                    if start_again(e, cached):
                        continue  # computed from the cache's copy: again from storage
                    raise
            raise self._conflict(name)

    async def guaranteed_update(self, namespace: str | None, name: str, version_name: str,
                                mutate: Callable[[Obj, str], None], *, subresource: str,
                                opts: WriteOptions | None = None) -> WriteResult:
        """Read the object, let ``mutate(obj, now)`` change a copy of it (or raise an
        ApiError), and write it back through ``subresource``'s preparation and validation;
        again from a fresh read when another write came first (Kubernetes'
        GuaranteedUpdate). Used by subresources that are not a PUT of the object
        (``pods/binding``)."""
        version = self._version(version_name)
        opts = opts or WriteOptions()
        async with self._writes.hold(self.info.key(namespace, name)):
            async for _ in self._attempts():
                kv, current = await self._current(namespace, name)
                new = deep_copy(await self._output(current, version))
                mutate(new, self._now())
                try:
                    return await self._write_update(kv, current, new, version, opts,
                                                    subresource, [])
                except st.RevisionConflict:
                    continue
            raise self._conflict(name)
