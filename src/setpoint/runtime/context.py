"""What a reconcile function gets besides its request: the client, caches, recorder, logger.

The manager builds one :class:`Context` per controller when it starts. A reconcile function
``async def reconcile(request, ctx)`` reads the object it is asked about from ``ctx.cache``
(or :meth:`Context.get`), the objects it owns or watches from :meth:`Context.cache_for`, writes
through ``ctx.client``, and reports with ``ctx.recorder`` and ``ctx.logger``.

Invariants: the caches are the manager's shared informer caches, synced before the first
reconcile; they are never copies, so **objects read from them must not be changed** (deep-copy
first). A context is immutable after construction.

Non-guarantees: a cache may be slightly behind the server (it follows a watch): right after a
write, a read from the cache may still show the previous state. Write with optimistic
concurrency (send the ``resourceVersion`` you read) or with patches that do not depend on it.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from typing import Any

from setpoint import client as sp_client
from setpoint.runtime import cache as rtcache
from setpoint.runtime import events, reconcile

Obj = Mapping[str, Any]


class Context:
    """The client, caches, event recorder and logger of one controller."""

    def __init__(self, *, name: str, client: sp_client.Client, resource: sp_client.ResourceRef,
                 cache: rtcache.Cache, recorder: events.EventRecorder,
                 logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
                 caches: Mapping[sp_client.ResourceRef, rtcache.Cache] | None = None,
                 aliases: Mapping[Hashable, sp_client.ResourceRef] | None = None) -> None:
        self.name = name
        self.client = client
        #: the resource the controller is for
        self.resource = resource
        #: the cache of that resource
        self.cache = cache
        self.recorder = recorder
        self.logger = logger
        self._caches = dict(caches or {})
        self._caches.setdefault(resource, cache)
        self._aliases = dict(aliases or {})

    @property
    def caches(self) -> Mapping[sp_client.ResourceRef, rtcache.Cache]:
        """Every cache the controller watches, by resource."""
        return dict(self._caches)

    def get(self, request: reconcile.Request) -> Obj | None:
        """The object ``request`` names, from the cache; None when it does not exist."""
        return self.cache.get(request.key)

    def cache_for(self, resource: sp_client.ResourceRef | tuple[str, str] | str
                  ) -> rtcache.Cache:
        """The cache of a watched resource: as it was named to the builder, as a
        ``(apiVersion, kind)`` pair, a ``ResourceRef``, or a plural / ``plural.group`` name.
        """
        if isinstance(resource, sp_client.ResourceRef) and resource in self._caches:
            return self._caches[resource]
        ref = self._aliases.get(resource)
        if ref is not None and ref in self._caches:
            return self._caches[ref]
        for ref, cache in self._caches.items():
            if isinstance(resource, tuple):
                if (ref.api_version, ref.kind) == tuple(resource):
                    return cache
            elif isinstance(resource, str) and (
                    ref.matches(resource) or resource in (f"{ref.resource}.{ref.group}",
                                                          f"{ref.resource}.{ref.version}."
                                                          f"{ref.group}")):
                return cache
        raise KeyError(f"controller {self.name} does not watch {resource!r}")
