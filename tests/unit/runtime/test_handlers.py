"""Handlers map objects to requests; the queueing handler filters and enqueues."""

from __future__ import annotations

from typing import Any

from setpoint.runtime import handlers as h
from setpoint.runtime import informercache as rtcache
from setpoint.runtime import predicates as p
from setpoint.runtime import watcher as w
from setpoint.runtime.reconcile import Request


def cm(name: str, *owners: dict[str, Any], rv: str = "1", generation: int = 1,
       namespace: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv,
                            "generation": generation, "uid": f"uid-{name}"}
    if owners:
        meta["ownerReferences"] = list(owners)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def ref(name: str, *, kind: str = "Book", api_version: str = "example.com/v1",
        controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": controller}


def test_enqueue_self() -> None:
    assert h.EnqueueSelf().requests(cm("a")) == [Request("ns", "a")]
    cluster = {"metadata": {"name": "node-1"}}
    assert h.EnqueueSelf().requests(cluster) == [Request("", "node-1")]


def test_enqueue_owner_follows_the_controller_reference_of_the_kind() -> None:
    handler = h.EnqueueOwner(group="example.com", kind="Book")
    child = cm("c", ref("other", controller=False), ref("dune"),
               ref("x", kind="Shelf"), ref("y", api_version="other.io/v1"))
    assert handler.requests(child) == [Request("ns", "dune")]
    every = h.EnqueueOwner(group="example.com", kind="Book", only_controller=False)
    assert every.requests(child) == [Request("ns", "other"), Request("ns", "dune")]
    cluster_owner = h.EnqueueOwner(group="", kind="Namespace", namespaced=False)
    ns_child = cm("c", ref("team-a", kind="Namespace", api_version="v1"))
    assert cluster_owner.requests(ns_child) == [Request("", "team-a")]
    assert handler.requests(cm("orphan")) == []


def test_mapped_and_plain_functions() -> None:
    def mapper(obj: Any) -> list[Request]:
        return [Request("ns", "x"), Request("ns", "y")]

    assert list(h.as_handler(mapper).requests(cm("a"))) == [Request("ns", "x"),
                                                            Request("ns", "y")]
    selfish = h.EnqueueSelf()
    assert h.as_handler(selfish) is selfish


def test_queueing_handler_on_a_cache() -> None:
    added: list[Request] = []
    cache = rtcache.Cache()
    handler = h.QueueingHandler(h.EnqueueOwner(group="example.com", kind="Book"), added.append,
                                predicate=p.generation_changed)
    cache.subscribe(handler)
    for event in (w.Init(), w.InitApply(cm("c1", ref("dune"))), w.InitDone()):
        cache.apply(event)
    assert added == [Request("ns", "dune")]
    cache.apply(w.Apply(cm("c1", ref("dune"), rv="2")))  # same generation: filtered
    assert added == [Request("ns", "dune")]
    # the owner changed: both the old and the new owner hear of it
    cache.apply(w.Apply(cm("c1", ref("emma"), rv="3", generation=2)))
    assert added[1:] == [Request("ns", "dune"), Request("ns", "emma")]
    cache.apply(w.Delete(cm("c1", ref("emma"), rv="4", generation=2)))
    assert added[-1] == Request("ns", "emma")
    cache.apply(w.Resync())  # old is new: generation unchanged, filtered
    assert len(added) == 4


def test_a_failing_mapper_or_predicate_is_contained() -> None:
    added: list[Request] = []

    def broken(obj: Any) -> list[Request]:
        raise KeyError("spec")

    bad = h.QueueingHandler(h.as_handler(broken), added.append)
    bad.on_add(cm("a"))
    picky = h.QueueingHandler(h.EnqueueSelf(), added.append,
                              predicate=p.Funcs(on_create=lambda o: 1 / 0 > 0))
    picky.on_add(cm("a"))
    assert added == []
