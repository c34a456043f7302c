"""Which objects the pods bound to a node reference: the Node authorizer's graph, from the
watch cache.

:class:`CacheNodeGraph` keeps, per node name, the keys of the pods bound to it and how many
of them reference each ``(kind, namespace, name)`` (:func:`references`); both are updated by
every pod event the cache applies and filled from the cache when made. :meth:`related` for a
Secret, ConfigMap, PersistentVolumeClaim or ServiceAccount is one lookup in those counts: a
node agent asking for the ConfigMap of each of its 10,000 pods costs 10,000 lookups, not
10,000 scans of the node's pods. A PersistentVolume (through the claims) reads the node's
pods.

References of a pod: ``spec.volumes[*]`` ``secret.secretName``, ``configMap.name``,
``projected.sources[*].secret.name`` / ``configMap.name``, ``persistentVolumeClaim
.claimName`` (and the ephemeral claim ``POD-VOLUME``); every container's (init and
ephemeral ones too) ``env[*].valueFrom.secretKeyRef.name`` / ``configMapKeyRef.name`` and
``envFrom[*].secretRef.name`` / ``configMapRef.name``; ``spec.imagePullSecrets[*].name``;
``spec.serviceAccountName`` (``default`` when empty). A PersistentVolume is related through
a referenced claim whose ``spec.volumeName`` names it.

Non-guarantee: like Kubernetes' graph (fed by informers), a pod's references count once the
cache has applied the pod, a moment after the write that bound it was acknowledged.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping
from typing import Any

from setpoint.registry import watchcache as wc

__all__ = ["CacheNodeGraph", "references"]

Obj = Mapping[str, Any]
Ref = tuple[str, str, str]  # kind, namespace, name

PODS = "/registry/core/pods/"
PVCS = "/registry/core/persistentvolumeclaims/"


def _name(ref: Any, key: str = "name") -> str:
    return str(ref.get(key) or "") if isinstance(ref, Mapping) else ""


def references(pod: Obj) -> Iterator[tuple[str, str]]:
    """``(kind, name)`` of every namespaced object ``pod`` references."""
    spec = pod.get("spec") or {}
    yield "ServiceAccount", str(spec.get("serviceAccountName") or "default")
    for secret in spec.get("imagePullSecrets") or []:
        yield "Secret", _name(secret)
    pod_name = str((pod.get("metadata") or {}).get("name") or "")
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, Mapping):
            continue
        yield "Secret", _name(volume.get("secret"), "secretName")
        yield "ConfigMap", _name(volume.get("configMap"))
        yield "PersistentVolumeClaim", _name(volume.get("persistentVolumeClaim"), "claimName")
        if isinstance(volume.get("ephemeral"), Mapping):
            yield "PersistentVolumeClaim", f"{pod_name}-{volume.get('name')}"
        for source in (volume.get("projected") or {}).get("sources") or []:
            if isinstance(source, Mapping):
                yield "Secret", _name(source.get("secret"))
                yield "ConfigMap", _name(source.get("configMap"))
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, Mapping):
                continue
            for env in container.get("env") or []:
                source = env.get("valueFrom") if isinstance(env, Mapping) else None
                if isinstance(source, Mapping):
                    yield "Secret", _name(source.get("secretKeyRef"))
                    yield "ConfigMap", _name(source.get("configMapKeyRef"))
            for env_from in container.get("envFrom") or []:
                if isinstance(env_from, Mapping):
                    yield "Secret", _name(env_from.get("secretRef"))
                    yield "ConfigMap", _name(env_from.get("configMapRef"))


def _node_of(pod: Obj | None) -> str:
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")


class CacheNodeGraph:
    """See the module docstring."""

    def __init__(self, cache: wc.WatchCache) -> None:
        self._cache = cache
        self._pods: dict[str, set[str]] = {}
        self._node_of: dict[str, str] = {}
        #: the references each bound pod counts for (what to take back when it changes)
        self._refs_of: dict[str, frozenset[Ref]] = {}
        #: per node, how many of its pods reference each object
        self._counts: dict[str, collections.Counter[Ref]] = {}
        cache.add_listener(self._on_event)
        for key, pod in cache.items(PODS):
            self._place(key, pod)

    def _place(self, key: str, pod: Obj | None) -> None:
        node = _node_of(pod)
        refs: frozenset[Ref] = frozenset()
        if node and pod is not None:
            namespace = str((pod.get("metadata") or {}).get("namespace") or "")
            refs = frozenset((kind, namespace, name) for kind, name in references(pod)
                             if name)
        old = self._node_of.pop(key, "")
        old_refs = self._refs_of.pop(key, frozenset())
        if old == node and old_refs == refs:  # the usual status write: nothing moves
            if node:
                self._node_of[key] = node
                self._refs_of[key] = refs
            return
        if old:
            keys = self._pods.get(old)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._pods[old]
            counts = self._counts.get(old)
            if counts is not None:
                counts.subtract(old_refs)
                for ref in old_refs:
                    if counts[ref] <= 0:
                        del counts[ref]
                if not counts:
                    del self._counts[old]
        if node:
            self._node_of[key] = node
            self._refs_of[key] = refs
            self._pods.setdefault(node, set()).add(key)
            self._counts.setdefault(node, collections.Counter()).update(refs)

    def _on_event(self, event: wc.CacheEvent) -> None:
        if not event.key.startswith(PODS):
            return
        self._place(event.key, None if event.type == "DELETED" else event.object)

    def pods_on(self, node: str, namespace: str | None = None) -> Iterator[Obj]:
        prefix = f"{PODS}{namespace}/" if namespace is not None else PODS
        for key in sorted(self._pods.get(node) or ()):
            if key.startswith(prefix):
                pod = self._cache.get(key)
                if pod is not None:
                    yield pod

    def related(self, node: str, kind: str, namespace: str, name: str) -> bool:
        if kind == "PersistentVolume":
            return self._related_volume(node, name)
        counts = self._counts.get(node)
        return bool(name) and counts is not None and counts[(kind, namespace, name)] > 0

    def _related_volume(self, node: str, name: str) -> bool:
        for pod in self.pods_on(node):
            namespace = str((pod.get("metadata") or {}).get("namespace") or "")
            for kind, claim in references(pod):
                if kind != "PersistentVolumeClaim" or not claim:
                    continue
                pvc = self._cache.get(f"{PVCS}{namespace}/{claim}")
                if pvc is not None and (pvc.get("spec") or {}).get("volumeName") == name:
                    return True
        return False
