"""Reads: GET, LIST (paginated, from the cache or from storage at a revision) and WATCH.

Invariants:

* Reads are served from the :class:`~setpoint.registry.cache.WatchCache` after waiting until
  it holds every write acknowledged before the read (no resourceVersion), or the revision the
  client asked for (``resourceVersion``), or as it is (``resourceVersion=0``).
* A LIST answers one snapshot: every object at the list's revision. Its first page comes from
  the cache without awaiting in between; further pages (a continue token,
  :mod:`setpoint.registry.continuetokens`) and ``resourceVersionMatch=Exact`` of an older
  revision are read from storage at that revision; a compacted one is 410 Expired.
* A LIST lets other tasks run every :data:`TURN` objects it filters; selectors see the objects
  in the requested version.
* A WATCH starts after the revision asked for (or replays the current state first, with
  ``sendInitialEvents`` or no resourceVersion); see :mod:`setpoint.registry.watchstream`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import TypeVar

import orjson

from setpoint.apimachinery import errors, fields, resourceversion
from setpoint.registry import cache as wc
from setpoint.registry import continuetokens, listbudget, storageerrors
from setpoint.registry.options import ListOptions, WatchOptions
from setpoint.registry.resources import VersionInfo
from setpoint.registry.storebase import Obj, StoreBase
from setpoint.registry.watchstream import WatchStream, no_selectors
from setpoint.storage import interface as st

#: objects a LIST handles between two turns of the event loop
TURN = 1000

T = TypeVar("T")


@dataclass(slots=True)
class ListPage:
    items: list[Obj]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


class Reads(StoreBase):
    """GET, LIST and WATCH of one resource's objects."""

    async def _read_revision(self, resource_version: str) -> None:
        if resource_version == "0":
            await self._cache.wait_ready()
        elif resource_version:
            await self._cache.wait_ready()
            await self._cache.wait_for(parse_resource_version(resource_version))
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
            revision, start_after = continuetokens.decode(opts.continue_token, prefix)
            return await self._list_from_storage(prefix, revision, start_after, limit, opts,
                                                 version)
        if opts.resource_version_match == "Exact":
            revision = parse_resource_version(opts.resource_version)
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
        if not no_selectors(opts):
            if not self.conversion.immediate:
                # selectors see the objects as the request's version serves them
                objs = await self.conversion.outputs(objs, version.name)
                converted = True
            keep = [i async for i in in_turns(range(len(objs)))
                    if self.matches(objs[i], opts.label_selector, opts.field_selector,
                                    version.name)]
            keys = [keys[i] for i in keep]
            objs = [objs[i] for i in keep]
        token = ""
        remaining = None
        if limit and len(objs) > limit:
            token = continuetokens.encode(revision, keys[limit - 1])
            if no_selectors(opts):
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
            if not self.conversion.immediate and not no_selectors(opts):
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
            token = continuetokens.encode(revision, items[-1][0])
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
            since = parse_resource_version(rv)
            if opts.send_initial_events:
                raise errors.invalid("ListOptions", "meta.k8s.io", "", [fields.forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for watch unless resourceVersion is "
                    "empty or 0")])
            if since > self._cache.revision:
                await self._cache.wait_for(since)
        watcher = self._cache.watch(self.info.namespace_prefix(namespace), since)
        return WatchStream(self, watcher, version_name, opts)

    async def count(self, namespace: str | None = None) -> int:
        await self._cache.wait_fresh()
        return self._cache.count(self.info.namespace_prefix(namespace))



async def in_turns(items: Iterable[T]) -> AsyncIterator[T]:
    """``items``, letting other tasks run every :data:`TURN` of them: a LIST of many objects
    must not hold the event loop for its whole length."""
    for n, item in enumerate(items, 1):
        yield item
        if n % TURN == 0:
            await asyncio.sleep(0)



def parse_resource_version(text: str) -> int:
    """The ``resourceVersion`` query parameter: 400 with Go's message unless canonical."""
    try:
        return resourceversion.parse(text)
    except resourceversion.ResourceVersionError as e:
        shown = orjson.dumps(text if len(text) <= 64 else text[:64] + "...").decode()
        raise errors.BadRequest(f"resourceVersion: Invalid value: {shown}: {e}") from None
