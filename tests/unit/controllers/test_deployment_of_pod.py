"""Which Deployment a pod event wakes: only a ``Recreate`` one (waiting for its old pods to be
gone); a rolling update follows its ReplicaSets' status, as in Kubernetes."""

from __future__ import annotations

from typing import Any

from setpoint.controllers.deployment import DeploymentOfPod
from setpoint.runtime import Request
from setpoint.runtime.informercache import Cache
from setpoint.runtime.watcher import Apply

Obj = dict[str, Any]


def deployment(name: str, strategy: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"d-{name}"},
            "spec": {"strategy": {"type": strategy}}}


def replica_set(name: str, owner: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"rs-{name}",
                         "ownerReferences": [{"kind": "Deployment", "name": owner,
                                              "uid": f"d-{owner}", "controller": True}]}}


def pod(name: str, rs: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": rs,
                                              "uid": f"rs-{rs}", "controller": True}]}}


def filled(*objs: Obj) -> Cache:
    cache = Cache()
    for obj in objs:
        cache.apply(Apply(obj))
    return cache


def test_only_recreate_deployments_hear_of_their_pods() -> None:
    mapper = DeploymentOfPod()
    mapper.sets = filled(replica_set("web-1", "web"), replica_set("db-1", "db"),
                         replica_set("gone-1", "gone"))
    assert list(mapper.requests(pod("p", "web-1"))) == [Request("ns", "web")]  # not yet known
    mapper.deployments = filled(deployment("web", "RollingUpdate"),
                                deployment("db", "Recreate"))
    assert list(mapper.requests(pod("p", "web-1"))) == []
    assert list(mapper.requests(pod("q", "db-1"))) == [Request("ns", "db")]
    assert list(mapper.requests(pod("r", "gone-1"))) == []  # its Deployment is gone
    assert list(mapper.requests(pod("s", "unknown"))) == []
    mapper.deployments.apply(Apply(deployment("web", "Recreate")))  # switched
    assert list(mapper.requests(pod("p", "web-1"))) == [Request("ns", "web")]
