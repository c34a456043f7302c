"""The Node authorizer's graph: the reference counts per node follow pods being bound,
changed, moved and deleted, and always answer as a scan of the node's pods would."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.registry.nodegraph import PODS, CacheNodeGraph, references
from setpoint.registry.watchcache import CacheEvent, WatchCache
from setpoint.storage import MemoryBackend

Obj = dict[str, Any]


def pod(name: str, node: str, *, namespace: str = "ns", cms: tuple[str, ...] = (),
        secret: str = "", account: str = "") -> Obj:
    volumes: list[Obj] = [{"name": f"cm-{c}", "configMap": {"name": c}} for c in cms]
    if secret:
        volumes.append({"name": "s", "secret": {"secretName": secret}})
    spec: Obj = {"nodeName": node, "volumes": volumes, "containers": [{"name": "c"}]}
    if account:
        spec["serviceAccountName"] = account
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


async def test_counts_follow_the_pods(cache: tuple[MemoryBackend, WatchCache]) -> None:
    backend, watch_cache = cache

    async def put(obj: Obj) -> None:
        key = f"{PODS}{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        current = await backend.get(key)
        if current is None:
            await backend.create(key, orjson.dumps(obj))
        else:
            await backend.update(key, orjson.dumps(obj), current.mod_revision)
        await watch_cache.wait_fresh()

    await put(pod("before", "a", cms=("old",)))
    graph = CacheNodeGraph(watch_cache)  # filled from what the cache holds
    assert graph.related("a", "ConfigMap", "ns", "old")
    await put(pod("p", "a", cms=("shared", "mine"), secret="s"))
    await put(pod("q", "a", cms=("shared",)))
    await put(pod("r", "b", cms=("theirs",), namespace="other"))
    assert graph.related("a", "ConfigMap", "ns", "shared")
    assert graph.related("a", "Secret", "ns", "s")
    assert graph.related("a", "ServiceAccount", "ns", "default")
    assert not graph.related("a", "Secret", "ns", "shared")  # kind matters
    assert not graph.related("a", "ConfigMap", "other", "shared")  # namespace matters
    assert not graph.related("a", "ConfigMap", "other", "theirs")  # node matters
    assert graph.related("b", "ConfigMap", "other", "theirs")

    await put(pod("p", "a", cms=("shared",)))  # p no longer uses "mine" nor "s"
    assert not graph.related("a", "ConfigMap", "ns", "mine")
    assert not graph.related("a", "Secret", "ns", "s")
    assert graph.related("a", "ConfigMap", "ns", "shared")
    await backend.delete(f"{PODS}ns/p")
    await watch_cache.wait_fresh()
    assert graph.related("a", "ConfigMap", "ns", "shared")  # q still does
    await put(pod("q", "b", cms=("shared",)))  # moved (as a fresh pod would be)
    assert not graph.related("a", "ConfigMap", "ns", "shared")
    assert graph.related("b", "ConfigMap", "ns", "shared")


class FakeCache:
    """What the graph reads of a watch cache, fed by hand."""

    def __init__(self) -> None:
        self.objects: dict[str, Obj] = {}
        self.listeners: list[Callable[[CacheEvent], None]] = []
        self.revision = 0

    def add_listener(self, listener: Callable[[CacheEvent], None]) -> None:
        self.listeners.append(listener)

    def items(self, prefix: str) -> Iterator[tuple[str, Obj]]:
        return iter(sorted((k, v) for k, v in self.objects.items() if k.startswith(prefix)))

    def get(self, key: str) -> Obj | None:
        return self.objects.get(key)

    def put(self, obj: Obj | None, key: str) -> None:
        self.revision += 1
        prev = self.objects.get(key)
        if obj is None:
            if prev is None:
                return
            del self.objects[key]
            event = CacheEvent("DELETED", key, prev, prev, self.revision)
        else:
            self.objects[key] = obj
            event = CacheEvent("ADDED" if prev is None else "MODIFIED", key, obj, prev,
                               self.revision)
        for listener in self.listeners:
            listener(event)


NAMES = st.sampled_from(["x", "y", "z"])
changes = st.lists(st.tuples(
    st.sampled_from(["p", "q", "r"]), st.sampled_from(["ns", "other"]),
    st.one_of(st.none(), st.builds(lambda node, cms, secret, account: (node, cms, secret,
                                                                      account),
                                   st.sampled_from(["", "a", "b"]),
                                   st.lists(NAMES, max_size=2).map(tuple),
                                   st.sampled_from(["", "x"]),
                                   st.sampled_from(["", "x"])))), max_size=25)


@settings(max_examples=200, deadline=None)
@given(changes, st.integers(0, 25))
def test_answers_as_a_scan_would(steps: list[Any], made_at: int) -> None:
    fake = FakeCache()
    graph: CacheNodeGraph | None = None
    for i, (name, namespace, spec) in enumerate(steps):
        if i == made_at:
            graph = CacheNodeGraph(fake)  # type: ignore[arg-type]
        obj = None if spec is None else pod(name, spec[0], namespace=namespace, cms=spec[1],
                                            secret=spec[2], account=spec[3])
        fake.put(obj, f"{PODS}{namespace}/{name}")
    graph = graph or CacheNodeGraph(fake)  # type: ignore[arg-type]
    for node in ("a", "b"):
        for namespace in ("ns", "other"):
            bound = [p for p in fake.objects.values()
                     if p["spec"]["nodeName"] == node
                     and p["metadata"]["namespace"] == namespace]
            for kind in ("ConfigMap", "Secret", "ServiceAccount"):
                for name in ("x", "y", "z", "default"):
                    scanned = any((kind, name) == ref for p in bound for ref in references(p))
                    assert graph.related(node, kind, namespace, name) is scanned, \
                        (node, namespace, kind, name)
