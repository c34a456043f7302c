"""``claim_candidates``: an owner's reconcile reads its own objects and the orphans of its
namespace, never another controller's, and claims exactly as over the whole namespace."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.apimachinery.selectors import LabelSelector
from setpoint.controllers import replicaset
from setpoint.runtime.informercache import Cache
from setpoint.runtime.watcher import Apply, Delete

Obj = dict[str, Any]
OWNER = {"metadata": {"name": "web", "namespace": "a", "uid": "u-web"}}
SELECTOR = LabelSelector.from_dict({"matchLabels": {"app": "web"}})


def pod(name: str, namespace: str = "a", *, controller: str | None = None,
        app: str = "web", others: tuple[str, ...] = (), deleting: bool = False) -> Obj:
    refs = [{"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": o} for o in others]
    if controller is not None:
        refs.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": controller,
                     "uid": controller, "controller": True})
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"p-{name}",
                 "resourceVersion": "1", "labels": {"app": app}}
    if refs:
        meta["ownerReferences"] = refs
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


class Recorder:
    """Answers a claim's patches as the server would (the references replaced)."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, Obj]] = []

    async def patch(self, resource: Any, name: str, patch: Obj, *, namespace: str) -> Obj:
        self.patches.append((name, copy.deepcopy(patch)))
        return {"metadata": {"name": name, "namespace": namespace,
                             "ownerReferences": patch["metadata"]["ownerReferences"]}}


def names(objs: list[Any]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def filled(*pods: Obj) -> Cache:
    cache = Cache()
    for p in pods:
        cache.apply(Apply(p))
    return cache


def test_only_its_own_and_the_orphans_of_its_namespace() -> None:
    cache = filled(pod("mine", controller="u-web"),
                   pod("orphan"),
                   pod("orphan-with-owner", others=("cm",)),
                   pod("theirs", controller="u-other"),
                   pod("elsewhere", "b"),
                   pod("elsewhere-mine", "b", controller="u-web"))
    assert names(replicaset.claim_candidates(cache, "a", "u-web")) == [
        "mine", "orphan", "orphan-with-owner"]
    assert names(replicaset.claim_candidates(cache, "a", "u-other")) == [
        "orphan", "orphan-with-owner", "theirs"]
    assert names(replicaset.claim_candidates(cache, "b", "u-web")) == [
        "elsewhere", "elsewhere-mine"]


def test_the_index_follows_adoption_release_and_deletion() -> None:
    cache = filled(pod("p"))
    assert names(replicaset.claim_candidates(cache, "a", "u-other")) == ["p"]
    cache.apply(Apply(pod("p", controller="u-web")))  # adopted by web
    assert names(replicaset.claim_candidates(cache, "a", "u-other")) == []
    assert names(replicaset.claim_candidates(cache, "a", "u-web")) == ["p"]
    cache.apply(Apply(pod("p")))  # released
    assert names(replicaset.claim_candidates(cache, "a", "u-other")) == ["p"]
    cache.apply(Delete(pod("p")))
    assert replicaset.claim_candidates(cache, "a", "u-web") == []


@st.composite
def namespaces(draw: st.DrawFn) -> list[Obj]:
    pods = []
    for i in range(draw(st.integers(0, 12))):
        pods.append(pod(f"p{i}", draw(st.sampled_from(["a", "b"])),
                        controller=draw(st.sampled_from([None, None, "u-web", "u-other", ""])),
                        app=draw(st.sampled_from(["web", "db"])),
                        others=draw(st.sampled_from([(), ("cm",)])),
                        deleting=draw(st.booleans())))
    return pods


@settings(max_examples=200, deadline=None)
@given(namespaces(), st.booleans())
async def test_claims_as_over_the_whole_namespace(pods: list[Obj], owner_deleting: bool
                                                  ) -> None:
    owner = copy.deepcopy(OWNER)
    if owner_deleting:
        owner["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache = filled(*pods)
    everything, narrowed = Recorder(), Recorder()
    kept = await replicaset.claim(everything, owner, cache.by_index("namespace", "a"),
                                  SELECTOR, ("v1", "Pod"), ("apps/v1", "ReplicaSet"))
    found = await replicaset.claim(narrowed, owner,
                                   replicaset.claim_candidates(cache, "a", "u-web"),
                                   SELECTOR, ("v1", "Pod"), ("apps/v1", "ReplicaSet"))
    assert found == kept
    assert narrowed.patches == everything.patches
