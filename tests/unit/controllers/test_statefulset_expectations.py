"""The StatefulSet reconciler against caches fed by hand (a watch that lags) and an API that
records: it creates and deletes each pod once, and moves on to the next ordinal only when its
cache has caught up."""

from __future__ import annotations

import itertools
import logging
from datetime import UTC, datetime
from typing import Any

from setpoint import client as sp_client
from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers import statefulset as ssc
from setpoint.runtime import watcher

Obj = dict[str, Any]
STS_REF = sp_client.ResourceRef(group="apps", version="v1", resource="statefulsets",
                                 kind="StatefulSet", namespaced=True)
POD_REF = sp_client.ResourceRef(group="", version="v1", resource="pods", kind="Pod",
                                 namespaced=True)
REVISION_REF = sp_client.ResourceRef(group="apps", version="v1", resource="controllerrevisions",
                                      kind="ControllerRevision", namespaced=True)
REQUEST = runtime.Request("default", "web")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


class RecordingApi:
    """Records pod writes; the ControllerRevisions it creates never show in
    :attr:`revision_cache` (a watch that lags for good), and creating one twice is a 409."""

    def __init__(self) -> None:
        self.rv = itertools.count(100)
        self.created: list[Obj] = []
        self.revisions: list[Obj] = []
        self.revision_cache = synced()
        self.deleted: list[str] = []
        self.statuses: list[Obj] = []

    async def create(self, obj: Obj, *, namespace: str | None = None, **_: Any) -> Obj:
        rv = str(next(self.rv))
        made = {**obj, "metadata": {**obj["metadata"], "uid": f"uid-{rv}",
                                    "resourceVersion": rv}}
        if obj.get("kind") == "ControllerRevision":
            name = obj["metadata"]["name"]
            if any(r["metadata"]["name"] == name for r in self.revisions):
                raise errors.already_exists("controllerrevisions", "apps", name)
            self.revisions.append(made)
        else:
            self.created.append(made)
        return made

    async def delete(self, resource: Any, name: str, *, namespace: str | None = None,
                     **_: Any) -> Obj:
        self.deleted.append(name)
        return {}

    async def update_status(self, obj: Obj, **_: Any) -> Obj:
        self.statuses.append(obj["status"])
        return obj


class Recorder:
    async def normal(self, obj: Obj, reason: str, message: str) -> None:
        pass

    async def warning(self, obj: Obj, reason: str, message: str) -> None:
        pass


def statefulset(replicas: int, policy: str = "OrderedReady") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default", "uid": "sts-uid",
                         "generation": 1, "resourceVersion": "5"},
            "spec": {"replicas": replicas, "podManagementPolicy": policy,
                     "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": {"partition": 0}},
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
    return runtime.Context(name="statefulset", client=api,  # type: ignore[arg-type]
                           resource=STS_REF, cache=sets, recorder=Recorder(),  # type: ignore[arg-type]
                           logger=logging.getLogger("test"),
                           caches={POD_REF: pods, REVISION_REF: api.revision_cache})


def running(pod: Obj, rv: Any) -> Obj:
    return {**pod, "metadata": {**pod["metadata"], "resourceVersion": str(rv)},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True",
                 "lastTransitionTime": "2025-12-31T00:00:00Z"}]}}


async def test_ordered_ready_waits_for_its_cache_before_the_next_ordinal() -> None:
    api, pods = RecordingApi(), synced()
    reconciler = ssc.StatefulSetReconciler(now=lambda: NOW)
    ctx = context(api, synced(statefulset(3)), pods)
    for _ in range(4):
        await reconciler(REQUEST, ctx)
    # the watch has not shown web-0 yet: it is created once, nothing else
    assert [p["metadata"]["name"] for p in api.created] == ["web-0"]
    pods.apply(watcher.Apply(api.created[0]))
    await reconciler(REQUEST, ctx)
    assert len(api.created) == 1  # web-0 is there but not Running and Ready
    pods.apply(watcher.Apply(running(api.created[0], next(api.rv))))
    await reconciler(REQUEST, ctx)
    await reconciler(REQUEST, ctx)
    assert [p["metadata"]["name"] for p in api.created] == ["web-0", "web-1"]
    assert api.statuses[-1]["readyReplicas"] == 1
    # one revision of the one template, written once, and never waited for
    assert [(r["metadata"]["name"], r["revision"]) for r in api.revisions] == [
        (ssc.revision_name(statefulset(3)), 1)]


async def test_parallel_creates_each_pod_once_with_a_lagging_cache() -> None:
    api, pods = RecordingApi(), synced()
    reconciler = ssc.StatefulSetReconciler(now=lambda: NOW)
    ctx = context(api, synced(statefulset(3, "Parallel")), pods)
    for _ in range(3):
        await reconciler(REQUEST, ctx)
    assert sorted(p["metadata"]["name"] for p in api.created) == ["web-0", "web-1", "web-2"]


async def test_scale_down_deletes_once_and_in_order_with_a_lagging_cache() -> None:
    owned = [running({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"web-{i}", "namespace": "default", "uid": f"p{i}",
        "labels": {"app": "web", "controller-revision-hash": ssc.revision_name(
            statefulset(1))},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                             "uid": "sts-uid", "controller": True}]}}, 10 + i)
        for i in range(3)]
    api, pods = RecordingApi(), synced(*owned)
    reconciler = ssc.StatefulSetReconciler(now=lambda: NOW)
    ctx = context(api, synced(statefulset(1)), pods)
    for _ in range(3):
        await reconciler(REQUEST, ctx)
    assert api.deleted == ["web-2"]
    pods.apply(watcher.Delete(owned[2]))
    await reconciler(REQUEST, ctx)
    await reconciler(REQUEST, ctx)
    assert api.deleted == ["web-2", "web-1"]
    assert not api.created
