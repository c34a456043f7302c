"""The shared machinery of a resource's store: its state, checks of a written body, field
management, admission, and the compare-and-swap every update ends in.

:class:`StoreBase` is the base of :class:`~setpoint.registry.store.Store`; the operations
are its subclasses by concept (:mod:`~setpoint.registry.writing` create and update,
:mod:`~setpoint.registry.patching` patches and server-side apply,
:mod:`~setpoint.registry.deleting` DELETE, :mod:`~setpoint.registry.reads` get, list and
watch). Invariants kept here for all of them:

* **resourceVersion is the storage revision** of the object's last write; it is never stored
  inside the value (:func:`encode` drops it), only set when an object is read.
* **Storage errors become API errors here** (and in the modules beside it), never in the
  server: a lost compare-and-swap is :class:`~setpoint.storage.interface.RevisionConflict`
  for the caller's retry loop (:meth:`StoreBase._attempts`, bounded by
  :data:`MAX_WRITE_ATTEMPTS`), any other storage failure its API error.
* **No-op updates** (:meth:`StoreBase._write_update` of an object equal to the stored one)
  write nothing: no new revision, no watch event; the object is answered as it is.
* **An update that leaves a deleted object nothing that keeps it** (no finalizer, no
  strategy hold) writes it once more, then removes it (:meth:`StoreBase._finish_deletion`).
* Whatever an :class:`Allocator` reserved for a write is committed when the write lands and
  aborted when it does not, whatever the exception.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import datetime
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Final, Protocol

import orjson

from setpoint.apimachinery import (
    decoding,
    errors,
    fields,
    patch,
    resourceversion,
    selectors,
    timeutil,
    typed,
)
from setpoint.apimachinery.clock import Clock
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import conversion, fieldmanager, keylocks, storageerrors
from setpoint.registry import watchcache as wc
from setpoint.registry.options import (
    AdmissionAttributes,
    DeleteOptions,
    WriteOptions,
    WriteResult,
)
from setpoint.registry.resources import VersionInfo
from setpoint.registry.strategy import Strategy
from setpoint.storage import interface as st

Obj = dict[str, Any]

#: namespace admission: raises NotFound / Forbidden for a namespace that cannot take writes
NamespaceGate = Callable[[str, str, str], Awaitable[None]]
#: validating admission of a write: ``(new object or None, old object or None, attributes)``,
#: called after the strategy validated it and before it is stored; raises an ApiError to
#: refuse. CREATE has no old object, DELETE no new one (both in the request's version).
Admission = Callable[[Obj | None, Obj | None, AdmissionAttributes], Awaitable[None]]


class QuietAdmission:
    """An admission hook that can tell, before a write's attributes are even built, that it
    has nothing to do on writes of a ``(group, resource)`` now: dynamic admission while no
    policy or webhook configuration exists. A store whose hooks are all quiet skips
    admission altogether.

    ``quiet`` must answer ``False`` whenever calling the hook could refuse, change or record
    anything, and for the writes the hook must see to keep its own state (the writes of its
    configuration objects).
    """

    __slots__ = ("admit", "quiet")

    def __init__(self, admit: Admission, quiet: Callable[[str, str], bool]) -> None:
        self.admit = admit
        self.quiet = quiet

    def __call__(self, new: Obj | None, old: Obj | None,
                 attrs: AdmissionAttributes) -> Awaitable[None]:
        return self.admit(new, old, attrs)


class Allocation(Protocol):
    """What an :class:`Allocator` reserved for one write."""

    async def commit(self) -> None:
        """The write landed: release what the old object held and the new one does not."""

    async def abort(self) -> None:
        """The write did not land: release what was reserved for it."""


class Allocator(Protocol):
    """Reserves what objects of a kind hold exclusively (a Service's cluster IP and node
    ports), in storage, so that every server on the same storage sees the reservation."""

    async def allocate(self, new: Obj, old: Obj | None, dry_run: bool) -> Allocation:
        """Reserve what ``new`` needs (filling in what it leaves to the server), or raise an
        ApiError; ``old`` is the object it replaces (None on create)."""

    async def release(self, obj: Obj) -> None:
        """``obj`` is gone: release what it held."""


#: attempts of a write without precondition that keeps losing its compare-and-swap; each lost
#: attempt means another writer's write landed, so N concurrent writers need at most N
MAX_WRITE_ATTEMPTS = 128
#: attempts made back to back before the jittered pauses start
QUICK_ATTEMPTS = 4
#: the longest pause between two attempts, in seconds
MAX_ATTEMPT_PAUSE = 0.05

SERVER_OWNED_META = ("uid", "creationTimestamp", "deletionTimestamp",
                     "deletionGracePeriodSeconds", "selfLink")


#: the largest stored form of an object a create or update may write: twice the request body
#: limit, room for what the server adds (managedFields, metadata) but not for what admission
#: could otherwise pile up (each mutating webhook answer and policy mutation may add 3 MiB)
MAX_STORED_BYTES: Final = 6 * 1024 * 1024


def encode(obj: Obj) -> bytes:
    """The stored form: the object without its resourceVersion."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        meta = dict(meta)
        del meta["resourceVersion"]
        obj = {**obj, "metadata": meta}
    return orjson.dumps(obj)


def encode_write(obj: Obj, limit: int = MAX_STORED_BYTES) -> bytes:
    """:func:`encode` for a create or an update a client asked for: 413 when the stored form
    would exceed ``limit`` bytes (the body was within its limit; admission made it grow).
    Writes the server makes to finish a deletion are not bounded: they only add a little
    metadata to an object that was stored."""
    data = encode(obj)
    if len(data) > limit:
        raise errors.RequestEntityTooLarge(
            f"Request entity too large: the object would be stored as {len(data)} bytes "
            f"after admission; limit is {limit}")
    return data


class StoreBase:
    """Objects of one resource, kept in the storage version: the state and the helpers
    every operation shares."""

    def __init__(self, strategy: Strategy, backend: st.Backend, cache: wc.WatchCache, *,
                 clock: Clock, rng: random.Random, namespace_gate: NamespaceGate | None = None,
                 deletion_finalizers: Callable[[Obj, DeleteOptions], list[str]] | None = None
                 ) -> None:
        self.strategy = strategy
        self.info = strategy.info
        self._backend = backend
        self._cache = cache
        self._clock = clock
        self._second: tuple[datetime.datetime, str] | None = None  # the last _now() formatted
        self._rng = rng
        # jitter of the pauses between write attempts (its own stream: uids stay as seeded)
        self._jitter = random.Random(rng.getrandbits(64))
        # this server's writes of one object, one at a time (see registry/keylocks.py)
        self._writes = keylocks.KeyLocks()
        self._namespace_gate = namespace_gate
        self._deletion_finalizers = deletion_finalizers
        self._field_managers: dict[str, fieldmanager.FieldManager] = {}
        self._merge_keys = {**patch.DEFAULT_MERGE_KEYS, **strategy.merge_keys}
        #: validating admission hooks, in order (see :data:`Admission`)
        self.admission: list[Admission] = []
        #: reservations of what objects hold exclusively (Services), or None
        self.allocator: Allocator | None = None
        #: between the storage version and the requested one (a CRD's webhook sets its own)
        self.conversion = conversion.Conversion(strategy)

    # --- helpers -------------------------------------------------------------------------

    def _version(self, name: str) -> VersionInfo:
        version = self.info.version(name)
        if version is None:
            raise errors.path_not_found()
        return version

    def _not_found(self, name: str) -> errors.NotFound:
        return errors.not_found(self.info.resource, self.info.group, name)

    def _conflict(self, name: str, why: str | None = None) -> errors.Conflict:
        return errors.conflict(self.info.resource, self.info.group, name, why)

    async def _attempts(self) -> AsyncIterator[int]:
        """The attempts of a retried write: the first few at once, then after a jittered
        pause that grows with the attempt (contending writers spread out)."""
        for attempt in range(MAX_WRITE_ATTEMPTS):
            if attempt >= QUICK_ATTEMPTS:
                ceiling = min(MAX_ATTEMPT_PAUSE, 0.001 * 2 ** (attempt - QUICK_ATTEMPTS))
                await asyncio.sleep(self._jitter.uniform(0, ceiling))
            yield attempt

    def _invalid(self, name: str, errs: Iterable[fields.FieldError]) -> errors.Invalid:
        return errors.invalid(self.info.kind, self.info.group, name, errs)

    def _now(self) -> str:
        """The clock's time as an object's timestamp (whole seconds); formatted once per
        second, as every write in it stamps the same text."""
        now = self._clock.now().replace(microsecond=0)
        last = self._second
        if last is not None and last[0] == now:
            return last[1]
        text = timeutil.format_time(now)
        self._second = (now, text)
        return text

    def matches(self, obj: Obj, labels: selectors.LabelSelector | None,
                field_sel: selectors.FieldSelector | None, version: str | None = None) -> bool:
        """Does ``obj`` (as stored) pass the selectors of a request in ``version`` (the
        storage version's fields when ``None``)?"""
        if labels is not None and not labels.empty:
            obj_labels = (obj.get("metadata") or {}).get("labels") or {}
            if not labels.matches(obj_labels):
                return False
        return field_sel is None or field_sel.empty or bool(
            field_sel.matches(self.strategy.field_labels(obj) if version is None
                              else self.strategy.field_labels_in(obj, version)))

    def _check_type(self, obj: Any, version: VersionInfo, source: str = "body",
                    where: str = "") -> Obj:
        """The body must be an object of this kind in this version, whose values decode into
        the kind's Go type (built-in kinds): 400 otherwise, or 422 for an object a patch
        made (``source="patch"``), as Kubernetes answers; ``source="apply"`` is an applied
        configuration for the object ``where`` (``namespace/name``)."""
        if not isinstance(obj, dict):
            raise errors.BadRequest("the body of the request must be a JSON or YAML object")
        api_version = self.info.api_version(version.name)
        kind = obj.get("kind")
        have = obj.get("apiVersion")
        if self.strategy.requires_type_meta and (not kind or not have):
            missing = "Kind" if not kind else "apiVersion"
            raise errors.BadRequest(f"Object '{missing}' is missing in '{_short(obj)}'")
        if kind is None:
            obj["kind"] = self.info.kind
        elif kind != self.info.kind:
            raise errors.BadRequest(
                f"{kind} in version \"{conversion.version_of(have)}\" cannot be handled as a "
                f"{self.info.kind}: the kind of the object ({kind}) does not match the "
                f"kind on the URL ({self.info.kind})")
        if have is None:
            obj["apiVersion"] = api_version
        elif have != api_version:
            raise errors.BadRequest(
                f"the API version in the data ({have}) does not match the expected API "
                f"version ({api_version})")
        problem = self.strategy.decode_error(obj, version)
        if problem is not None:
            raise self._decode_failed(version, problem, source, where, obj)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.BadRequest(
                f"{self.info.kind} in version \"{version.name}\" cannot be handled as a "
                f"{self.info.kind}: metadata must be an object")
        return meta

    def _decode_failed(self, version: VersionInfo, problem: str, source: str, where: str,
                       obj: Obj) -> errors.ApiError:
        kind = self.info.kind
        if source == "patch":
            return errors.invalid("", "", "", [fields.invalid("patch", _short(obj), problem)])
        if source == "apply":
            return errors.BadRequest(
                f"failed to create typed patch object ({where}; {self.info.group}/"
                f"{version.name}, Kind={kind}): {problem}")
        return errors.BadRequest(
            f'{kind} in version "{version.name}" cannot be handled as a {kind}: {problem}')

    def _check_depth(self, obj: Obj, name: str, current: Obj | None = None) -> None:
        """422 for an object nested deeper than :data:`~setpoint.apimachinery.decoding.MAX_DEPTH`:
        deeper ones could not be encoded in a List, a watch event or a Table. managedFields are
        left out (the server writes them, a few levels below the fields they describe). An
        object stored before the limit existed may still be written, if no deeper than it is."""
        path = decoding.too_deep(_without_managed_fields(obj))
        if path is None:
            return
        if current is not None and decoding.too_deep(_without_managed_fields(current)) \
                is not None and decoding.depth(obj) <= decoding.depth(current):
            return
        raise self._invalid(name, [fields.FieldError(
            fields.ErrorType.INVALID, str(path),
            f"the object may be nested at most {decoding.MAX_DEPTH} levels deep")])

    def _body_revision(self, value: Any, name: str) -> int:
        """``metadata.resourceVersion`` of a body or a patched object, as a revision: 422 on
        that field unless it is one (kube-apiserver fails such writes with a 500)."""
        try:
            return resourceversion.parse(value)
        except resourceversion.ResourceVersionError as e:
            raise self._invalid(name, [fields.invalid(
                "metadata.resourceVersion", value, str(e))]) from None

    def _check_namespace(self, meta: Obj, namespace: str | None) -> None:
        if self.info.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.BadRequest(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request")
            if namespace:
                meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)

    def _handle_pruned(self, pruned: list[str], opts: WriteOptions, version: VersionInfo,
                       warnings: list[str], *, is_patch: bool = False) -> None:
        if not pruned or opts.field_validation == "Ignore":
            return
        if opts.field_validation == "Strict":
            unknown = ", ".join(f'unknown field "{p}"' for p in pruned)
            if is_patch:
                raise errors.invalid(self.info.kind, self.info.group, "", [
                    fields.invalid("patch", None, f"strict decoding error: {unknown}")])
            raise errors.BadRequest(
                f'{self.info.kind} in version "{version.name}" cannot be handled as a '
                f"{self.info.kind}: strict decoding error: {unknown}")
        warnings.extend(f'unknown field "{p}"' for p in pruned)

    def _normalize(self, obj: Obj, version: VersionInfo, opts: WriteOptions,
                   warnings: list[str], *, is_patch: bool = False) -> None:
        pruned = self.strategy.prune(obj, version)
        self._handle_pruned(pruned, opts, version, warnings, is_patch=is_patch)
        self.strategy.default(obj, version)

    async def _gate(self, namespace: str | None, name: str) -> None:
        if self.info.namespaced and self._namespace_gate is not None and namespace:
            await self._namespace_gate(namespace, self.info.qualified, name)

    async def _output(self, stored: Obj, version: VersionInfo) -> Obj:
        """A shared stored object (the cache's, or decoded from storage) in ``version``."""
        return await self.conversion.output(stored, version.name)

    async def _output_owned(self, obj: Obj, version: VersionInfo) -> Obj:
        """An object this request made (just written, or a dry run's) in ``version``:
        converted in place, not copied."""
        return await self.conversion.output_owned(obj, version.name)

    def _fields(self, version: VersionInfo) -> fieldmanager.FieldManager:
        """Field management (managedFields, server-side apply) of ``version``."""
        found = self._field_managers.get(version.name)
        if found is None:
            found = self._field_managers[version.name] = fieldmanager.FieldManager(
                self.strategy.field_type(version), self.info.api_version(version.name),
                status_subresource=self.strategy.has_status(version))
        return found

    def _field_type(self, version: str) -> typed.TypeSpec:
        """How objects of ``version`` merge (an unknown version: no schema)."""
        found = self.info.version(version)
        if found is None:
            return typed.object_type()
        return self._fields(found).updater.spec

    # --- admission -----------------------------------------------------------------------

    async def _admit(self, operation: str, new: Obj | None, old: Obj | None,
                     version: VersionInfo, opts: WriteOptions | DeleteOptions,
                     subresource: str = "") -> None:
        """Run the admission hooks on a write that is about to be stored."""
        group, resource = self.info.group, self.info.resource
        hooks = [hook for hook in self.admission
                 if type(hook) is not QuietAdmission or not hook.quiet(group, resource)]
        if not hooks:
            return
        obj = new if new is not None else old
        meta = (obj or {}).get("metadata") or {}
        if operation == "DELETE":
            options: Obj = {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
            if isinstance(opts, DeleteOptions) and opts.propagation_policy:
                options["propagationPolicy"] = opts.propagation_policy
        else:
            options = {"kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                       "apiVersion": "meta.k8s.io/v1"}
            if isinstance(opts, WriteOptions) and opts.field_manager:
                options["fieldManager"] = opts.field_manager
        if opts.dry_run:
            options["dryRun"] = ["All"]
        attrs = AdmissionAttributes(
            operation=operation, group=self.info.group, version=version.name,
            resource=self.info.resource, kind=self.info.kind, subresource=subresource,
            namespace=str(meta.get("namespace") or "") if self.info.namespaced else "",
            name=str(meta.get("name") or ""), namespaced=self.info.namespaced,
            user=opts.user, dry_run=opts.dry_run, options=options, sink=opts.sink,
            versions=tuple(v.name for v in self.info.served_versions),
            convert=self.conversion.convert_owned, field_type=self._field_type)
        if new is not None:
            def revalidate(obj: Obj) -> None:
                # what a mutating hook changed is pruned, defaulted and validated again
                self._check_depth(obj, str((obj.get("metadata") or {}).get("name") or ""))
                self.strategy.prune(obj, version)
                self.strategy.default(obj, version)
                errs = self.strategy.validate(obj, version) if old is None else \
                    self.strategy.validate_subresource_update(obj, old, version, subresource)
                if errs:
                    raise self._invalid(str((obj.get("metadata") or {}).get("name") or ""),
                                        errs)
            attrs.revalidate = revalidate
        for admit in hooks:
            await admit(new, old, attrs)

    # --- the update every write of an existing object ends in --------------------------

    async def _current(self, namespace: str | None, name: str) -> tuple[st.KeyValue, Obj]:
        try:
            kv = await self._backend.get(self.info.key(namespace, name))
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        if kv is None:
            raise self._not_found(name)
        return kv, wc.decode(kv.value, kv.mod_revision)

    async def _start(self, namespace: str | None, name: str, attempt: int
                     ) -> tuple[st.KeyValue, Obj, bool]:
        """What a read-modify-write starts from: ``(kv, current, cached)``.

        The first attempt starts from a copy of the watch cache's object when the cache
        holds the key (as kube-apiserver's GuaranteedUpdate does): no storage read, no
        decoding. The cache may lag storage, so what is computed from it is only a guess:
        the compare-and-swap refuses a stale one, and the caller starts again from storage
        (``attempt`` > 0) on any error the guess led to, before answering it (see
        :class:`StaleStart`). A cached start's ``kv`` has no value (``b""``) and
        ``create_revision`` 0; callers use its key and ``mod_revision`` only.
        """
        if attempt == 0:
            key = self.info.key(namespace, name)
            cached = self._cache.get(key)
            revision = _cached_revision(cached)
            if cached is not None and revision:
                return st.KeyValue(key, b"", 0, revision), deep_copy(cached), True
        kv, current = await self._current(namespace, name)
        return kv, current, False

    async def _write_update(self, kv: st.KeyValue, current: Obj, new: Obj,
                            version: VersionInfo, opts: WriteOptions, subresource: str,
                            warnings: builtins.list[str], *, applied: bool = False,
                            cached: bool = False) -> WriteResult:
        """Prepare, validate and compare-and-swap ``new`` over ``current`` (storage form).

        Raises :class:`RevisionConflict` when the object moved on; callers retry or 409.
        ``current`` is the caller's own decoding of the stored value (it is converted in
        place); ``new`` is the caller's too.
        """
        name = str(current["metadata"].get("name", ""))
        # an object stored in a version that is no longer the storage version is written
        # again even when nothing changed (how a CRD's objects migrate to a new one)
        migrates = len(self.info.versions) > 1 and current.get("apiVersion") != \
            self.info.api_version(self.info.storage_version.name)
        # ``current`` was decoded for this write alone: converted in place, not copied; the
        # hooks below read ``old`` and copy what they take from it
        old = await self._output_owned(current, version)
        old_meta = old["metadata"]
        new_meta = new.setdefault("metadata", {})
        for k in SERVER_OWNED_META:
            if k in old_meta:
                new_meta[k] = old_meta[k]
            else:
                new_meta.pop(k, None)
        new_meta["resourceVersion"] = old_meta.get("resourceVersion")
        if "generation" in old_meta:
            new_meta["generation"] = old_meta["generation"]
        applied_fields = new_meta.get("managedFields")
        self.strategy.prepare_for_update(new, old, version, subresource)
        if applied:
            new["metadata"]["managedFields"] = applied_fields
            if applied_fields is None:
                del new["metadata"]["managedFields"]
        elif opts.field_manager:
            self._fields(version).update(old, new, opts.field_manager, self._now(),
                                         subresource)
        elif "managedFields" in old_meta:
            new["metadata"].setdefault("managedFields", old_meta["managedFields"])
        errs = self.strategy.validate_subresource_update(new, old, version, subresource)
        if errs:
            raise self._invalid(name, errs)
        await self._admit("UPDATE", new, old, version, opts, subresource)
        # a stale value is rewritten (key rotation), and one in an old storage version
        if new == old and not kv.stale and not migrates:
            if cached:
                await self._confirm_unchanged(kv)
            if not opts.dry_run and self._deletion_done(current):
                # an earlier write removed the last finalizer but its delete did not happen
                # (storage failed in between): a client that repeats the write finishes it
                await self._finish_deletion(kv.key, kv.mod_revision, current)
            return WriteResult(old, warnings=warnings)
        allocation = await self.allocator.allocate(new, old, opts.dry_run) \
            if self.allocator is not None else None
        if opts.dry_run:
            return WriteResult(new, warnings=warnings)
        key = kv.key
        async with allocated(allocation):
            stored = await self.conversion.to_storage(new, version.name)
            try:
                written = await self._backend.update(key, encode_write(stored), kv.mod_revision)
            except st.RevisionConflict:
                raise  # the caller's to retry on a fresh read, not an API error
            except st.KeyNotFound as e:
                raise self._not_found(name) from e
            except st.StorageError as e:
                raise storageerrors.api_error(e) from e
        stored["metadata"]["resourceVersion"] = str(written.mod_revision)
        if self._deletion_done(stored):
            await self._finish_deletion(key, written.mod_revision, stored)
        return WriteResult(await self._output_owned(stored, version), warnings=warnings)

    async def _confirm_unchanged(self, kv: st.KeyValue) -> None:
        """A no-op write computed from the cache's object: storage must still hold that
        revision, in the form it would write (else :class:`StaleStart`)."""
        try:
            stored = await self._backend.get(kv.key)
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        if stored is None or stored.mod_revision != kv.mod_revision or stored.stale:
            raise StaleStart

    def _deletion_done(self, obj: Obj) -> bool:
        """Marked for deletion and nothing keeps it: the object is to be removed."""
        meta = obj.get("metadata") or {}
        return bool(meta.get("deletionTimestamp")) and not meta.get("finalizers") and \
            not self.strategy.blocks_deletion(obj)

    async def _finish_deletion(self, key: str, revision: int, obj: Obj) -> None:
        try:
            await self._backend.delete(key, revision)
        except (st.KeyNotFound, st.RevisionConflict):
            return  # someone else finished the deletion
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        if self.allocator is not None:
            await self.allocator.release(obj)

    @property
    def cache_revision(self) -> int:
        return self._cache.revision


# --- small pure helpers ----------------------------------------------------------------------


class StaleStart(Exception):
    """A write computed from the watch cache's object found it out of date: start again
    from storage (see :meth:`StoreBase._start`)."""


def start_again(error: BaseException, cached: bool) -> bool:
    """Whether ``error``, raised by a write computed from the watch cache's copy
    (``cached``), calls for another attempt from storage: any refusal the copy may have led
    to does, a failure of storage itself does not (the write's outcome is storage's answer,
    as it is for a write that started from storage), except that the key is gone."""
    if not cached:
        return False
    cause = error.__cause__
    return not isinstance(cause, st.StorageError) or isinstance(cause, st.KeyNotFound)


def _cached_revision(obj: Obj | None) -> int:
    """The revision of an object the watch cache holds (0 when it has none)."""
    meta = obj.get("metadata") if obj is not None else None
    value = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else 0


@contextlib.asynccontextmanager
async def allocated(allocation: Allocation | None) -> AsyncIterator[None]:
    """Around the storage write of an object that holds ``allocation``: committed when the
    write succeeds, given back when anything is raised (cancellation included)."""
    try:
        yield
    except BaseException:
        if allocation is not None:
            await allocation.abort()
        raise
    if allocation is not None:
        await allocation.commit()


def _check_name(meta: Obj, name: str) -> None:
    """An object written to a name names itself, with that name (Kubernetes' checkName)."""
    given = meta.get("name")
    if not given:
        raise errors.BadRequest(f"the name of the object ({name} based on URL) was "
                                "undeterminable: name must be provided")
    if given != name:
        raise errors.BadRequest(f"the name of the object ({given}) does not match the name "
                                f"on the URL ({name})")


def _without_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def _short(obj: Obj) -> str:
    text = orjson.dumps(obj).decode()
    return text if len(text) <= 200 else text[:200] + "..."
