"""The ReplicaSet reconciler against caches fed by hand (a watch that lags) and an API that
records: expectations keep it from creating or deleting twice before its cache catches up."""

from __future__ import annotations

import itertools
import logging
from typing import Any

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.controllers import replicaset as rsc
from setpoint.runtime import watcher

Obj = dict[str, Any]
RS_REF = sp_client.ResourceRef(group="apps", version="v1", resource="replicasets",
                                kind="ReplicaSet", namespaced=True)
POD_REF = sp_client.ResourceRef(group="", version="v1", resource="pods", kind="Pod",
                                 namespaced=True)


class RecordingApi:
    """Answers creates, deletes and status updates as a server would, remembering them."""

    def __init__(self) -> None:
        self.rv = itertools.count(100)
        self.created: list[Obj] = []
        self.deleted: list[str] = []
        self.statuses: list[Obj] = []

    async def create(self, obj: Obj, *, namespace: str | None = None, **_: Any) -> Obj:
        rv = str(next(self.rv))
        made = {**obj, "metadata": {**obj["metadata"], "namespace": namespace,
                                    "name": f"{obj['metadata']['generateName']}{rv}",
                                    "uid": f"uid-{rv}", "resourceVersion": rv}}
        self.created.append(made)
        return made

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None,
                     **_: Any) -> Obj:
        self.deleted.append(name)
        return {}

    async def update_status(self, obj: Obj, **_: Any) -> Obj:
        self.statuses.append(obj["status"])
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(next(self.rv))}}

    async def patch(self, *_: Any, **__: Any) -> Obj:
        raise AssertionError("nothing to adopt or release here")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def normal(self, obj: Obj, reason: str, message: str) -> None:
        self.events.append((reason, message))


def replica_set(replicas: int) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "rs-uid",
                         "generation": 1, "resourceVersion": "5"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}},
            "status": {"replicas": 0}}


def synced(*objs: Obj) -> runtime.Cache:
    cache = runtime.Cache()
    cache.apply(watcher.Init())
    for obj in objs:
        cache.apply(watcher.InitApply(obj))
    cache.apply(watcher.InitDone())
    return cache


def context(api: RecordingApi, sets: runtime.Cache, pods: runtime.Cache) -> runtime.Context:
    return runtime.Context(name="replicaset", client=api,  # type: ignore[arg-type]
                           resource=RS_REF, cache=sets, recorder=Recorder(),  # type: ignore[arg-type]
                           logger=logging.getLogger("test"), caches={POD_REF: pods})


REQUEST = runtime.Request("default", "web")


async def test_a_lagging_pod_cache_never_creates_twice() -> None:
    api, pods = RecordingApi(), synced()
    reconciler = rsc.ReplicaSetReconciler(rsc.OrphansOfPod())
    ctx = context(api, synced(replica_set(3)), pods)
    await reconciler(REQUEST, ctx)
    assert len(api.created) == 3
    # the watch has not delivered the pods yet: reconciles keep finding none
    for _ in range(3):
        await reconciler(REQUEST, ctx)
    assert len(api.created) == 3
    pending = reconciler.expectations.pending(REQUEST.key)
    assert pending is not None
    assert sorted(pending.created) == [100, 101, 102]
    # two of the three arrive: still waiting for the third
    for made in api.created[:2]:
        pods.apply(watcher.Apply(made))
    await reconciler(REQUEST, ctx)
    assert len(api.created) == 3
    pods.apply(watcher.Apply(api.created[2]))
    await reconciler(REQUEST, ctx)
    assert len(api.created) == 3
    assert reconciler.expectations.pending(REQUEST.key) is None
    # one pod vanishes (deleted by hand): now, and only now, one replacement
    gone = api.created[0]
    pods.apply(watcher.Delete({**gone, "metadata": {**gone["metadata"],
                                                    "resourceVersion": str(next(api.rv))}}))
    await reconciler(REQUEST, ctx)
    await reconciler(REQUEST, ctx)
    assert len(api.created) == 4


async def test_a_lagging_pod_cache_never_deletes_twice() -> None:
    api = RecordingApi()
    owned = [{"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": f"web-{i}", "namespace": "default", "uid": f"p{i}",
                           "resourceVersion": str(10 + i), "labels": {"app": "web"},
                           "creationTimestamp": f"2026-01-01T00:00:0{i}Z",
                           "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                "name": "web", "uid": "rs-uid",
                                                "controller": True}]},
              "spec": {"nodeName": "n" if i else ""}, "status": {"phase": "Running"}}
             for i in range(3)]
    pods = synced(*owned)
    reconciler = rsc.ReplicaSetReconciler(rsc.OrphansOfPod())
    ctx = context(api, synced(replica_set(1)), pods)
    await reconciler(REQUEST, ctx)
    # the unscheduled pod goes first, then the newest of the others
    assert api.deleted == ["web-0", "web-2"]
    await reconciler(REQUEST, ctx)
    assert api.deleted == ["web-0", "web-2"]
    for pod in (owned[0], owned[2]):
        pods.apply(watcher.Delete(pod))
    await reconciler(REQUEST, ctx)
    assert api.deleted == ["web-0", "web-2"]
    assert not api.created
    assert api.statuses[-1]["replicas"] == 1


async def test_expectations_expire() -> None:
    now = [0.0]
    expectations = rsc.Expectations(timeout=10, clock=lambda: now[0])
    expectations.expect("default/web").created.append(50)
    pods = synced()
    assert not expectations.satisfied("default/web", pods)
    now[0] = 11
    assert expectations.satisfied("default/web", pods)
