"""What authorization and token checks read: RBAC objects and live uids, from the watch cache.

:class:`CacheSource` implements :class:`~setpoint.auth.rbac.authorizer.RBACSource` and the
ServiceAccount token checks' :class:`~setpoint.auth.serviceaccounts.ObjectLookup` over the
:class:`~setpoint.registry.watchcache.WatchCache`, so a decision costs no storage read.

Non-guarantee: like Kubernetes' RBAC authorizer (informer-fed), decisions see a binding once
the cache has applied it, a moment after the write that created it was acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from setpoint.registry import watchcache as wc

Obj = Mapping[str, Any]

RBAC = "/registry/rbac.authorization.k8s.io/"
_KIND_PREFIX = {"ServiceAccount": "/registry/core/serviceaccounts/",
                "Pod": "/registry/core/pods/", "Secret": "/registry/core/secrets/",
                "Node": "/registry/core/nodes/"}


class CacheSource:
    def __init__(self, cache: wc.WatchCache) -> None:
        self._cache = cache

    def cluster_role(self, name: str) -> Obj | None:
        return self._cache.get(f"{RBAC}clusterroles/{name}")

    def role(self, namespace: str, name: str) -> Obj | None:
        return self._cache.get(f"{RBAC}roles/{namespace}/{name}")

    def cluster_role_bindings(self) -> Iterable[Obj]:
        return [obj for _, obj in self._cache.items(f"{RBAC}clusterrolebindings/")]

    def role_bindings(self, namespace: str) -> Iterable[Obj]:
        return [obj for _, obj in self._cache.items(f"{RBAC}rolebindings/{namespace}/")]

    def uid_of(self, kind: str, namespace: str, name: str) -> str | None:
        prefix = _KIND_PREFIX.get(kind)
        if prefix is None:
            return None
        key = f"{prefix}{namespace}/{name}" if namespace else f"{prefix}{name}"
        obj = self._cache.get(key)
        if obj is None:
            return None
        uid = (obj.get("metadata") or {}).get("uid")
        return str(uid) if uid else None
