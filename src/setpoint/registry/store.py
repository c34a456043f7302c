"""The generic store: get, list, watch, create, update, patch and delete over a backend.

This is the one place where storage errors become API errors. Invariants:

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

import asyncio
import base64
import builtins
import datetime
import random
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import orjson

from setpoint.apimachinery import (
    decoding,
    errors,
    fields,
    patch,
    resourceversion,
    selectors,
    timeutil,
    validation,
)
from setpoint.apimachinery.clock import Clock
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import cache as wc
from setpoint.registry import (
    conversion,
    fieldmanager,
    keylocks,
    listbudget,
    scale,
    storageerrors,
)
from setpoint.registry.options import (
    AdmissionAttributes,
    DeleteOptions,
    ListOptions,
    WatchOptions,
    WriteOptions,
    WriteResult,
)
from setpoint.registry.resources import ScaleSpec, VersionInfo
from setpoint.registry.strategy import Strategy
from setpoint.storage import interface as st

Obj = dict[str, Any]

#: namespace admission: raises NotFound / Forbidden for a namespace that cannot take writes
NamespaceGate = Callable[[str, str, str], Awaitable[None]]
#: validating admission of a write: ``(new object or None, old object or None, attributes)``,
#: called after the strategy validated it and before it is stored; raises an ApiError to
#: refuse. CREATE has no old object, DELETE no new one (both in the request's version).
Admission = Callable[[Obj | None, Obj | None, AdmissionAttributes], Awaitable[None]]


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
#: the longest continue token taken (the ones this server makes are far shorter)
MAX_CONTINUE_LENGTH = 8192
#: attempts made back to back before the jittered pauses start
QUICK_ATTEMPTS = 4
#: the longest pause between two attempts, in seconds
MAX_ATTEMPT_PAUSE = 0.05

#: objects a LIST handles between two turns of the event loop
TURN = 1000

T = TypeVar("T")

PATCH_JSON = "application/json-patch+json"
PATCH_MERGE = "application/merge-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_APPLY_CBOR = "application/apply-patch+cbor"

SERVER_OWNED_META = ("uid", "creationTimestamp", "deletionTimestamp",
                     "deletionGracePeriodSeconds", "selfLink")


def encode(obj: Obj) -> bytes:
    """The stored form: the object without its resourceVersion."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        meta = dict(meta)
        del meta["resourceVersion"]
        obj = {**obj, "metadata": meta}
    return orjson.dumps(obj)


@dataclass(slots=True)
class ListPage:
    items: list[Obj]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


class WatchEvent:
    """One event of a :class:`WatchStream`: its type as this watch reports it and its object
    in the watch's version (converted on first use). :meth:`frame` shares the encoded
    event with every other watch that reports it the same way."""

    __slots__ = ("_event", "_object", "_stream", "type")

    def __init__(self, stream: WatchStream, type: str, event: wc.CacheEvent,
                 converted: Obj | None = None) -> None:
        self._stream = stream
        self._event = event
        self._object: Obj | None = converted
        self.type = type

    @property
    def object(self) -> Obj:
        if self._object is None:
            stream = self._stream
            self._object = stream._store.strategy.from_storage(self._event.object,
                                                               stream._version)
        return self._object

    def frame(self, form: Hashable, make: Callable[[str, Obj], bytes]) -> bytes:
        """``make(type, object)``: the bytes a watch sends for this event in the output
        ``form``, made once per event, type, version, strategy and ``form`` and shared by
        the watches that send the same (``form`` must name everything else the bytes
        depend on)."""
        stream = self._stream
        key = (self.type, stream._version, form, stream._store.strategy)
        return stream._watcher.frame(self._event, key, lambda: make(self.type, self.object))


class WatchStream:
    """API-level events of one watch: selector transitions applied, in the request version."""

    def __init__(self, store: Store, watcher: wc.Watcher, version: str,
                 opts: WatchOptions) -> None:
        self._store = store
        self._watcher = watcher
        self._version = version
        self._opts = opts
        self._unselective = _no_selectors(opts)
        self._verdict_key = (opts.label_selector, opts.field_selector, version, store.strategy)
        self.last_revision = 0

    @property
    def lagged(self) -> bool:
        return self._watcher.lagged

    def close(self) -> None:
        self._watcher.close()

    def pending_replay(self) -> int:
        return self._watcher.pending_replay()

    def bookmark_revision(self, current: int) -> int:
        """A revision safe to report in a bookmark: never ahead of an undelivered event."""
        if self._watcher.idle():
            return max(self.last_revision, current)
        return self.last_revision

    async def next(self, timeout: float | None = None) -> tuple[str, Obj] | None:
        """The next event that passes the selectors, as ``(type, object)``; ``None`` when
        the watch ended. Raises ``TimeoutError`` when nothing arrived within ``timeout``.
        """
        event = await self.next_event(timeout)
        return None if event is None else (event.type, event.object)

    async def next_event(self, timeout: float | None = None) -> WatchEvent | None:
        """The next event that passes the selectors; ``None`` when the watch ended.

        Raises ``TimeoutError`` when nothing arrived within ``timeout``.
        """
        while True:
            event = await self._watcher.next(timeout)
            if event is None:
                return None
            self.last_revision = max(self.last_revision, event.revision)
            conversion = self._store.conversion
            if conversion.immediate:
                kind = self._classify(event)
                if kind is None:
                    continue
                return WatchEvent(self, kind, event)
            # a webhook converts: the event's objects in this watch's version (shared with
            # the other watches of the version), then the selectors on them; a failure
            # ends the watch (the caller sends it as an ERROR event)
            obj = await conversion.shared_output(event.object, self._version)
            prev = None
            if not self._unselective and event.type != "ADDED" and event.prev is not None:
                prev = await conversion.shared_output(event.prev, self._version)
            kind = self._classify(event, obj, prev)
            if kind is None:
                continue
            return WatchEvent(self, kind, event, obj)

    def _classify(self, event: wc.CacheEvent, obj: Obj | None = None,
                  prev: Obj | None = None) -> str | None:
        """How this watch reports ``event`` (None: not at all); decided once per event for
        every watch with the same selectors, version and strategy. ``obj`` and ``prev``
        are the event's objects in the watch's version when they are converted already."""
        if self._unselective:
            # every event passes; the previous state (decoded on demand) is not needed
            return event.type
        return self._watcher.verdict(event, self._verdict_key,
                                     lambda: self._decide(event, obj, prev))

    def _decide(self, event: wc.CacheEvent, obj: Obj | None, prev: Obj | None) -> str | None:
        opts = self._opts
        matches = self._store.matches
        version = self._version
        now = matches(event.object if obj is None else obj, opts.label_selector,
                      opts.field_selector, version)
        if event.type == "ADDED":
            return "ADDED" if now else None
        was = event.prev is not None and matches(
            event.prev if prev is None else prev, opts.label_selector, opts.field_selector,
            version)
        if event.type == "DELETED":
            return "DELETED" if was else None
        if now and was:
            return "MODIFIED"
        if now:
            return "ADDED"
        if was:
            return "DELETED"
        return None


class Store:
    """Objects of one resource, kept in the storage version."""

    def __init__(self, strategy: Strategy, backend: st.Backend, cache: wc.WatchCache, *,
                 clock: Clock, rng: random.Random, namespace_gate: NamespaceGate | None = None,
                 deletion_finalizers: Callable[[Obj, DeleteOptions], list[str]] | None = None
                 ) -> None:
        self.strategy = strategy
        self.info = strategy.info
        self._backend = backend
        self._cache = cache
        self._clock = clock
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
        return timeutil.format_time(self._clock.now())

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
                f"{kind} in version \"{_version_of(have)}\" cannot be handled as a "
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

    # --- admission -----------------------------------------------------------------------

    async def _admit(self, operation: str, new: Obj | None, old: Obj | None,
                     version: VersionInfo, opts: WriteOptions | DeleteOptions,
                     subresource: str = "") -> None:
        """Run the admission hooks on a write that is about to be stored."""
        if not self.admission:
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
            convert=self.conversion.convert_owned)
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
        for admit in self.admission:
            await admit(new, old, attrs)

    # --- reads ---------------------------------------------------------------------------

    async def _read_revision(self, resource_version: str) -> None:
        if resource_version == "0":
            await self._cache.wait_ready()
        elif resource_version:
            await self._cache.wait_ready()
            await self._cache.wait_for(_parse_rv(resource_version))
        else:
            await self._cache.wait_fresh()

    async def get(self, namespace: str | None, name: str, version_name: str, *,
                  resource_version: str = "") -> Obj:
        version = self._version(version_name)
        await self._read_revision(resource_version)
        obj = self._cache.get(self.info.key(namespace, name))
        if obj is None:
            raise self._not_found(name)
        return await self._output(obj, version)

    async def list(self, namespace: str | None, version_name: str,
                   opts: ListOptions) -> ListPage:
        version = self._version(version_name)
        prefix = self.info.namespace_prefix(namespace)
        limit = max(opts.limit, 0)
        if opts.resource_version_match and not opts.resource_version:
            raise errors.invalid("ListOptions", "meta.k8s.io", "", [fields.forbidden(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden unless resourceVersion is provided")])
        if opts.continue_token:
            revision, start_after = _decode_continue(opts.continue_token, prefix)
            return await self._list_from_storage(prefix, revision, start_after, limit, opts,
                                                 version)
        if opts.resource_version_match == "Exact":
            revision = _parse_rv(opts.resource_version)
            await self._cache.wait_for(revision)
            if revision != self._cache.revision:
                return await self._list_from_storage(prefix, revision, None, limit, opts,
                                                     version)
        elif opts.resource_version_match not in ("", "NotOlderThan"):
            raise errors.BadRequest(
                f"unsupported resourceVersionMatch: {opts.resource_version_match!r}")
        else:
            await self._read_revision(opts.resource_version)
        revision = self._cache.revision
        # one snapshot, taken without awaiting: every object in it is at ``revision``. Plain
        # lists, no tuple per object: what a LIST keeps alive should not make the garbage
        # collector's full passes (over every cached object) come more often.
        keys, objs = self._cache.snapshot(prefix)
        converted = False
        if not _no_selectors(opts):
            if not self.conversion.immediate:
                # selectors see the objects as the request's version serves them
                objs = await self.conversion.outputs(objs, version.name)
                converted = True
            keep = [i async for i in _in_turns(range(len(objs)))
                    if self.matches(objs[i], opts.label_selector, opts.field_selector,
                                    version.name)]
            keys = [keys[i] for i in keep]
            objs = [objs[i] for i in keep]
        token = ""
        remaining = None
        if limit and len(objs) > limit:
            token = _encode_continue(revision, keys[limit - 1])
            if _no_selectors(opts):
                remaining = len(objs) - limit
            objs = objs[:limit]
        items = objs if converted else await self.conversion.outputs(objs, version.name)
        return ListPage(items, revision, token, remaining)

    def list_estimate(self, namespace: str | None, opts: ListOptions) -> int:
        """The stored bytes a LIST with ``opts`` may return, known without reading it: its
        resource's (a namespace or a selector may return less), or ``limit``'s share."""
        objects, stored = self._cache.resource_size(self.info.namespace_prefix(namespace))
        return listbudget.estimate(objects, stored, opts.limit)

    async def _list_from_storage(self, prefix: str, revision: int, start_after: str | None,
                                 limit: int, opts: ListOptions,
                                 version: VersionInfo) -> ListPage:
        items: builtins.list[tuple[str, Obj]] = []
        cursor = start_after
        more = False
        while True:
            try:
                page = await self._backend.list(prefix, revision=revision, start_after=cursor,
                                                limit=max(limit, 500) if limit else None)
            except st.Expired as e:
                raise errors.Expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue token in this response to retrieve the remainder of the "
                    "results. Continuing with the provided token results in an inconsistent "
                    "list - objects that were created, modified, or deleted between the time "
                    "the first chunk was returned and now may show up in the list.") from e
            except st.StorageError as e:
                raise storageerrors.api_error(e) from e
            decoded = [wc.decode(kv.value, kv.mod_revision) for kv in page.kvs]
            if not self.conversion.immediate and not _no_selectors(opts):
                decoded = await self.conversion.outputs(decoded, version.name)
            for kv, obj in zip(page.kvs, decoded, strict=True):
                if self.matches(obj, opts.label_selector, opts.field_selector, version.name):
                    items.append((kv.key, obj))
            if limit and len(items) > limit:
                more = True
                break
            if not page.more or not page.kvs:
                break
            cursor = page.kvs[-1].key
        token = ""
        if limit and (more or len(items) > limit):
            items = items[:limit]
            token = _encode_continue(revision, items[-1][0])
        return ListPage(await self.conversion.outputs([obj for _, obj in items], version.name),
                        revision, token)

    async def watch(self, namespace: str | None, version_name: str,
                    opts: WatchOptions) -> WatchStream:
        self._version(version_name)
        rv = opts.resource_version
        await self._cache.wait_ready()
        if rv in ("", "0"):
            if rv == "":
                await self._cache.wait_fresh()
            if opts.send_initial_events is False:
                since: int | None = self._cache.revision
            else:
                since = None
        else:
            since = _parse_rv(rv)
            if opts.send_initial_events:
                raise errors.invalid("ListOptions", "meta.k8s.io", "", [fields.forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless resourceVersion is "
                    "empty or 0")])
            if since > self._cache.revision:
                await self._cache.wait_for(since)
        watcher = self._cache.watch(self.info.namespace_prefix(namespace), since)
        return WatchStream(self, watcher, version_name, opts)

    @property
    def cache_revision(self) -> int:
        return self._cache.revision

    # --- create --------------------------------------------------------------------------

    async def create(self, namespace: str | None, body: Any, version_name: str,
                     opts: WriteOptions, *, applied: bool = False) -> WriteResult:
        version = self._version(version_name)
        obj = body
        meta = self._check_type(obj, version)
        self._check_depth(obj, str(meta.get("name") or ""))
        self._check_namespace(meta, namespace)
        warnings = self.strategy.warnings(version)
        self._normalize(obj, version, opts, warnings)
        if opts.field_manager and not applied:
            self._fields(version).update(None, obj, opts.field_manager, self._now())
        meta = obj["metadata"]
        if not meta.get("name") and isinstance(meta.get("generateName"), str) \
                and meta["generateName"]:
            meta["name"] = validation.generate_name(meta["generateName"], self._rng)
        name = str(meta.get("name") or "")
        for k in (*SERVER_OWNED_META, "resourceVersion", "generation"):
            meta.pop(k, None)
        meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
        meta["creationTimestamp"] = self._now()
        self.strategy.prepare_for_create(obj, version)
        await self._gate(namespace, name)
        errs = self.strategy.validate(obj, version)
        if errs:
            raise self._invalid(name, errs)
        await self._admit("CREATE", obj, None, version, opts)
        allocation = await self.allocator.allocate(obj, None, opts.dry_run) \
            if self.allocator is not None else None
        if opts.dry_run:
            return WriteResult(obj, created=True, warnings=warnings)
        stored = await self.conversion.to_storage(obj, version.name)
        key = self.info.key(namespace, name)
        try:
            kv = await self._backend.create(key, encode(stored))
        except st.KeyExists as e:
            await _abort(allocation)
            raise errors.already_exists(self.info.resource, self.info.group, name) from e
        except st.StorageError as e:
            await _abort(allocation)
            raise storageerrors.api_error(e) from e
        except BaseException:
            await _abort(allocation)
            raise
        if allocation is not None:
            await allocation.commit()
        stored["metadata"]["resourceVersion"] = str(kv.mod_revision)
        return WriteResult(await self._output_owned(stored, version), created=True,
                           warnings=warnings)

    # --- update --------------------------------------------------------------------------

    async def _current(self, namespace: str | None, name: str) -> tuple[st.KeyValue, Obj]:
        try:
            kv = await self._backend.get(self.info.key(namespace, name))
        except st.StorageError as e:
            raise storageerrors.api_error(e) from e
        if kv is None:
            raise self._not_found(name)
        return kv, wc.decode(kv.value, kv.mod_revision)

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
            async for _ in self._attempts():
                kv, current = await self._current(namespace, name)
                if requested and requested != kv.mod_revision:
                    raise self._conflict(name)
                self._check_depth(body, name, current)
                new = deep_copy(body)
                warnings = self.strategy.warnings(version)
                self._normalize(new, version, opts, warnings)
                try:
                    return await self._write_update(kv, current, new, version, opts, subresource,
                                                    warnings)
                except st.RevisionConflict as e:
                    if requested:
                        raise self._conflict(name) from e
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

    async def _write_update(self, kv: st.KeyValue, current: Obj, new: Obj,
                            version: VersionInfo, opts: WriteOptions, subresource: str,
                            warnings: builtins.list[str], *, applied: bool = False
                            ) -> WriteResult:
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
            if not opts.dry_run and self._deletion_done(current):
                # an earlier write removed the last finalizer but its delete did not happen
                # (storage failed in between): a client that repeats the write finishes it
                await self._finish_deletion(kv.key, kv.mod_revision, current)
            return WriteResult(old, warnings=warnings)
        allocation = await self.allocator.allocate(new, old, opts.dry_run) \
            if self.allocator is not None else None
        if opts.dry_run:
            return WriteResult(new, warnings=warnings)
        stored = await self.conversion.to_storage(new, version.name)
        key = kv.key
        try:
            written = await self._backend.update(key, encode(stored), kv.mod_revision)
        except st.RevisionConflict:
            await _abort(allocation)
            raise
        except st.KeyNotFound as e:
            await _abort(allocation)
            raise self._not_found(name) from e
        except st.StorageError as e:
            await _abort(allocation)
            raise storageerrors.api_error(e) from e
        except BaseException:
            await _abort(allocation)
            raise
        if allocation is not None:
            await allocation.commit()
        stored["metadata"]["resourceVersion"] = str(written.mod_revision)
        if self._deletion_done(stored):
            await self._finish_deletion(key, written.mod_revision, stored)
        return WriteResult(await self._output_owned(stored, version), warnings=warnings)

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

    # --- patch ---------------------------------------------------------------------------

    async def patch(self, namespace: str | None, name: str, patch_type: str, body: Any,
                    version_name: str, opts: WriteOptions, subresource: str = "",
                    *, strategic: bool = False) -> WriteResult:
        version = self._version(version_name)
        if patch_type == PATCH_STRATEGIC and not strategic:
            raise errors.unsupported_patch_type((PATCH_JSON, PATCH_MERGE, PATCH_APPLY))
        if patch_type in (PATCH_APPLY, PATCH_APPLY_CBOR) and not opts.field_manager:
            raise errors.BadRequest("fieldManager is required for apply requests")
        async with self._writes.hold(self.info.key(namespace, name)):
            async for _ in self._attempts():
                try:
                    kv, current = await self._current(namespace, name)
                except errors.NotFound:
                    if patch_type == PATCH_APPLY and not subresource:
                        try:
                            return await self._apply_create(namespace, name, body, version, opts)
                        except errors.AlreadyExists:
                            continue  # created meanwhile: apply to what is there now
                    raise
                base = deep_copy(await self._output(current, version))
                applying = patch_type == PATCH_APPLY
                if applying:
                    patched = self._server_side_apply(namespace, base, body, name, version, opts,
                                                      subresource)
                else:
                    patched = self._apply_patch(base, patch_type, body, name)
                if isinstance(patched, dict):
                    self._check_depth(patched, name, current)
                meta = self._check_type(patched, version, "patch")
                _check_name(meta, name)
                # The patched object carries the resourceVersion it was computed from, unless the
                # patch set one: a different one is the client's precondition, and fails now. The
                # same one may be the client's too; when the write loses its compare-and-swap,
                # the next attempt patches the newer object, and only a resourceVersion the patch
                # itself set still differs then (Kubernetes: a patch is unconditional unless it
                # names a resourceVersion).
                precondition = meta.get("resourceVersion")
                if precondition and self._body_revision(precondition, name) != kv.mod_revision:
                    raise self._conflict(name)
                self._check_namespace(meta, namespace)
                warnings = self.strategy.warnings(version)
                self._normalize(patched, version, opts, warnings, is_patch=True)
                try:
                    return await self._write_update(kv, current, patched, version, opts,
                                                    subresource, warnings, applied=applying)
                except st.RevisionConflict:
                    continue
            raise self._conflict(name)

    def _apply_patch(self, base: Obj, patch_type: str, body: Any, name: str) -> Obj:
        try:
            if patch_type == PATCH_JSON:
                if not isinstance(body, list):
                    raise errors.BadRequest(
                        "the body of a json-patch must be a JSON array of operations, got "
                        f"{_json_type(body)}")
                result = patch.json_patch(base, body)
            elif patch_type in (PATCH_MERGE, PATCH_APPLY):
                if not isinstance(body, dict):
                    raise errors.BadRequest(
                        f"the body of a {'merge' if patch_type == PATCH_MERGE else 'apply'} "
                        f"patch must be a JSON object, got {_json_type(body)}")
                result = patch.merge_patch(base, body)
            elif patch_type == PATCH_STRATEGIC:
                if not isinstance(body, dict):
                    raise errors.BadRequest(
                        "the body of a strategic merge patch must be a JSON object, got "
                        f"{_json_type(body)}")
                result = patch.strategic_merge_patch(base, body,
                                                     merge_keys=self._merge_keys)
            else:
                raise errors.unsupported_patch_type((PATCH_JSON, PATCH_MERGE, PATCH_APPLY))
        except patch.PatchError as e:
            if patch_type == PATCH_JSON:
                raise errors.Invalid(
                    "the server rejected our request due to an error in our request",
                    details={"name": name, "group": self.info.group,
                             "kind": self.info.resource,
                             "causes": [{"reason": "FieldValueInvalid", "message": str(e),
                                         "field": "patch"}]}) from e
            raise errors.BadRequest(str(e)) from e
        if not isinstance(result, dict):
            raise errors.BadRequest("the patched object must be a JSON object")
        return result

    def _server_side_apply(self, namespace: str | None, live: Obj | None, body: Any,
                           name: str, version: VersionInfo, opts: WriteOptions,
                           subresource: str) -> Obj:
        """The object an apply of ``body`` makes of ``live`` (None when it creates).

        A configuration must fit the schema: an unknown field is a 400 whatever the field
        validation, as Kubernetes cannot type it (``field not declared in schema``)."""
        if not isinstance(body, dict):
            raise errors.BadRequest(
                f"the body of an apply patch must be a JSON object, got {_json_type(body)}")
        config = deep_copy(body)
        meta = self._check_type(config, version, "apply",
                                f"{namespace}/{name}" if namespace else name)
        if meta.get("name") not in (None, name):
            raise errors.BadRequest(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})")
        meta["name"] = name
        pruned = self.strategy.prune(config, version)
        if pruned:
            paths = [f".{p}: field not declared in schema" for p in pruned]
            raise errors.BadRequest(
                f"failed to create typed patch object ({namespace + '/' if namespace else ''}"
                f"{name}; {self.info.group}/{version.name}, Kind={self.info.kind}): "
                + (paths[0] if len(paths) == 1 else "errors:\n  " + "\n  ".join(paths)))
        return self._fields(version).apply(live, config, opts.field_manager, self._now(),
                                           force=opts.force, subresource=subresource)

    async def _apply_create(self, namespace: str | None, name: str, body: Any,
                            version: VersionInfo, opts: WriteOptions) -> WriteResult:
        obj = self._server_side_apply(namespace, None, body, name, version, opts, "")
        return await self.create(namespace, obj, version.name, opts, applied=True)

    # --- scale ---------------------------------------------------------------------------

    async def get_scale(self, namespace: str | None, name: str, version_name: str, *,
                        resource_version: str = "") -> Obj:
        version = self._version(version_name)
        spec = self._scale_spec(version)
        obj = await self.get(namespace, name, version.name, resource_version=resource_version)
        return self._scale_of(obj, spec)

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

    # --- delete --------------------------------------------------------------------------

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
        """The (deletionTimestamp, deletionGracePeriodSeconds) a DELETE with ``opts`` gives
        ``obj`` for graceful deletion, or None when they stay as they are (Kubernetes'
        BeforeDelete): a first graceful DELETE sets them to now + grace; a later one may
        only shorten the grace, moving the timestamp by as much."""
        grace = self.strategy.grace_period(obj, opts)
        if grace is None:
            return None
        meta = obj.get("metadata") or {}
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp"):
            if not isinstance(current, int) or grace >= current:
                return None
            try:
                marked = timeutil.parse_time(str(meta["deletionTimestamp"]))
            except ValueError:
                marked = self._clock.now() + datetime.timedelta(seconds=current)
            moved = marked - datetime.timedelta(seconds=current - grace)
            return timeutil.format_time(moved), grace
        if grace <= 0:
            return None
        return timeutil.format_time(self._clock.now() + datetime.timedelta(seconds=grace)), grace

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

    async def count(self, namespace: str | None = None) -> int:
        await self._cache.wait_fresh()
        return self._cache.count(self.info.namespace_prefix(namespace))


# --- small pure helpers ----------------------------------------------------------------------


async def _abort(allocation: Allocation | None) -> None:
    if allocation is not None:
        await allocation.abort()


async def _in_turns(items: Iterable[T]) -> AsyncIterator[T]:
    """``items``, letting other tasks run every :data:`TURN` of them: a LIST of many objects
    must not hold the event loop for its whole length."""
    for n, item in enumerate(items, 1):
        yield item
        if n % TURN == 0:
            await asyncio.sleep(0)


def _check_name(meta: Obj, name: str) -> None:
    """An object written to a name names itself, with that name (Kubernetes' checkName)."""
    given = meta.get("name")
    if not given:
        raise errors.BadRequest(f"the name of the object ({name} based on URL) was "
                                "undeterminable: name must be provided")
    if given != name:
        raise errors.BadRequest(f"the name of the object ({given}) does not match the name "
                                f"on the URL ({name})")


def _parse_rv(text: str) -> int:
    """The ``resourceVersion`` query parameter: 400 with Go's message unless canonical."""
    try:
        return resourceversion.parse(text)
    except resourceversion.ResourceVersionError as e:
        shown = orjson.dumps(text if len(text) <= 64 else text[:64] + "...").decode()
        raise errors.BadRequest(f"resourceVersion: Invalid value: {shown}: {e}") from None


def _encode_continue(revision: int, key: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": key})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continue(token: str, prefix: str) -> tuple[int, str]:
    """The revision and the last key of a continue token; 400 for anything this server did
    not make: a token of another version, a revision that is not a positive integer, a key
    outside the listed prefix (Kubernetes' messages)."""
    if len(token) > MAX_CONTINUE_LENGTH:
        raise errors.BadRequest("continue key is not valid: too long")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = orjson.loads(raw)
    except (ValueError, orjson.JSONDecodeError):
        raise errors.BadRequest("continue key is not valid: illegal base64 data or JSON") \
            from None
    if not isinstance(data, dict):
        raise errors.BadRequest("continue key is not valid: not an object")
    version = data.get("v")
    if version != "meta.k8s.io/v1":
        raise errors.BadRequest("continue key is not valid: server does not recognize this "
                                f"encoded version {orjson.dumps(version).decode()}")
    revision, start = data.get("rv"), data.get("start")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision <= 0:
        raise errors.BadRequest("continue key is not valid: incorrect encoded start "
                                "resourceVersion (version meta.k8s.io/v1)")
    if not isinstance(start, str) or not start.startswith(prefix) or start == prefix or \
            "\x00" in start:
        raise errors.BadRequest("continue key is not valid: the encoded start key is not a "
                                "key of this list")
    return revision, start


def _no_selectors(opts: ListOptions | WatchOptions) -> bool:
    return (opts.label_selector is None or opts.label_selector.empty) and (
        opts.field_selector is None or opts.field_selector.empty)


def _without_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def _short(obj: Obj) -> str:
    text = orjson.dumps(obj).decode()
    return text if len(text) <= 200 else text[:200] + "..."


def _version_of(api_version: Any) -> str:
    if not isinstance(api_version, str):
        return ""
    return api_version.rsplit("/", 1)[-1]


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a scalar"

