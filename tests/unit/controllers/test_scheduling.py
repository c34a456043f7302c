"""The scheduler's algorithm: requests, filters, scores, the FitError message and the
cache's accounting (assumed pods included), without a server."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.controllers import podresources as r
from setpoint.controllers import scheduling as s

Obj = dict[str, Any]


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110,
         labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         ready: str = "True", unschedulable: bool = False) -> Obj:
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)},
                       "conditions": [{"type": "Ready", "status": ready}]}}


def pod(name: str, *, cpu: str | None = None, memory: str | None = None,
        node_name: str = "", phase: str = "Pending", namespace: str = "default",
        **spec: Any) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container: Obj = {"name": "c", "image": "x"}
    if requests:
        container["resources"] = {"requests": requests}
    body: Obj = {"metadata": {"name": name, "namespace": namespace},
                 "spec": {"containers": [container], **spec}, "status": {"phase": phase}}
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


def cache_of(*objs: Obj) -> s.SchedulingCache:
    cache = s.SchedulingCache()
    for obj in objs:
        if "containers" in obj.get("spec", {}):
            cache.observe_pod(obj)
        else:
            cache.set_node(obj)
    return cache


# requests


def test_pod_requests_sum_containers_and_take_init_peak() -> None:
    p = {"spec": {
        "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                       {"resources": {"limits": {"cpu": "200m"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "1"}}},
                           {"restartPolicy": "Always",
                            "resources": {"requests": {"cpu": "50m", "memory": "1Mi"}}}],
        "overhead": {"cpu": "10m"}}}
    # containers 300m + sidecar 50m = 350m < the first init container's 1000m
    assert r.pod_requests(p) == {"cpu": 1010, "memory": 65 * 2**20}
    assert r.non_zero_requests({"spec": {"containers": [{}, {}]}}) == {
        "cpu": 200, "memory": 400 * 2**20}


def test_quantities_round_up_and_bad_ones_count_as_zero() -> None:
    assert r.amount("cpu", "0.0001") == 1
    assert r.amount("memory", "1.5") == 2
    assert r.amount("memory", "lots") == 0
    assert r.amount("cpu", "-1") == 0
    assert r.allocatable({"status": {"capacity": {"pods": "3"}}}) == {"pods": 3}


# filters and the message


def test_fit_error_message_counts_reasons_sorted() -> None:
    cache = cache_of(node("a", cpu="1"), node("b", labels={"disk": "hdd"}),
                     node("c", labels={"disk": "hdd"}))
    p = pod("p", cpu="2", nodeSelector={"disk": "ssd"})
    # node a fails affinity first too: give it the label
    cache.set_node(node("a", cpu="1", labels={"disk": "ssd"}))
    decision = s.schedule(p, cache)
    assert decision.node is None
    assert decision.message == ("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) "
                                "didn't match Pod's node affinity/selector.")


def test_no_nodes() -> None:
    assert s.schedule(pod("p"), s.SchedulingCache()).message == \
        "no nodes available to schedule pods"


def test_filter_order_and_reasons() -> None:
    p = pod("p", cpu="1")
    cordoned = node("a", unschedulable=True, taints=[{"key": "x", "effect": "NoSchedule"}])
    assert s.filter_reasons(p, cache_of(cordoned).nodes()[0]) == ["node(s) were unschedulable"]
    tainted = node("b", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert s.filter_reasons(p, cache_of(tainted).nodes()[0]) == [
        "node(s) had untolerated taint {dedicated: gpu}"]
    tolerant = pod("q", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    assert s.filter_reasons(tolerant, cache_of(tainted).nodes()[0]) == []
    # a cordoned node takes a pod that tolerates the unschedulable taint
    cordon_tolerant = pod("r", tolerations=[
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
         "effect": "NoSchedule"}])
    assert s.filter_reasons(cordon_tolerant, cache_of(node("c", unschedulable=True))
                            .nodes()[0]) == []


def test_not_ready_node_counts_as_tainted() -> None:
    info = cache_of(node("a", ready="False")).nodes()[0]
    assert s.filter_reasons(pod("p"), info) == [
        "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"]
    info = cache_of(node("a", ready="Unknown")).nodes()[0]
    assert s.filter_reasons(pod("p"), info) == [
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"]
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/unreachable",
                                      "operator": "Exists"}])
    assert s.filter_reasons(tolerant, info) == []
    # no conditions at all: not ready either
    bare = {"metadata": {"name": "x"}, "status": {"allocatable": {"pods": "1"}}}
    assert s.filter_reasons(pod("p"), cache_of(bare).nodes()[0]) != []


def test_resources_against_what_bound_pods_request() -> None:
    cache = cache_of(node("a", cpu="1", memory="1Gi", pods=2),
                     pod("x", cpu="600m", memory="512Mi", node_name="a", phase="Running"))
    info = cache.node("a")
    assert info is not None
    assert s.fit_reasons(pod("p", cpu="400m", memory="512Mi"), info) == []
    assert s.fit_reasons(pod("p", cpu="500m", memory="600Mi"), info) == [
        "Insufficient cpu", "Insufficient memory"]
    cache.observe_pod(pod("y", node_name="a", phase="Running"))
    assert s.fit_reasons(pod("p"), info) == ["Too many pods"]
    # finished pods free their room
    cache.observe_pod(pod("y", node_name="a", phase="Succeeded"))
    cache.observe_pod(pod("x", cpu="600m", node_name="a", phase="Failed"))
    assert s.fit_reasons(pod("p", cpu="1", memory="1Gi"), info) == []


def test_extended_resources_must_be_offered() -> None:
    p = pod("p")
    p["spec"]["containers"][0]["resources"] = {"requests": {"example.com/gpu": "1"}}
    info = cache_of(node("a")).nodes()[0]
    assert s.fit_reasons(p, info) == ["Insufficient example.com/gpu"]


# scores


def test_least_allocated_prefers_the_emptier_node() -> None:
    cache = cache_of(node("a"), node("b"),
                     pod("x", cpu="2", memory="4Gi", node_name="a", phase="Running"))
    assert s.schedule(pod("p", cpu="100m"), cache).node == "b"


def test_ties_go_to_the_first_name() -> None:
    cache = cache_of(node("b"), node("c"), node("a"))
    assert s.schedule(pod("p"), cache).node == "a"


def test_prefer_no_schedule_is_a_preference_not_a_filter() -> None:
    soft = [{"key": "spot", "effect": "PreferNoSchedule"}]
    cache = cache_of(node("a", taints=soft), node("b"),
                     pod("x", cpu="3", node_name="b", phase="Running"))
    # b is busier, but a's untolerated preference weighs more (x3)
    assert s.schedule(pod("p"), cache).node == "b"
    only_soft = cache_of(node("a", taints=soft))
    assert s.schedule(pod("p"), only_soft).node == "a"
    tolerant = pod("p", tolerations=[{"key": "spot", "operator": "Exists",
                                      "effect": "PreferNoSchedule"}])
    assert s.schedule(tolerant, cache).node == "a"


def test_preferred_affinity_weighs_in() -> None:
    cache = cache_of(node("a"), node("b", labels={"zone": "z"}))
    p = pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z"]}]}}]}})
    assert s.schedule(p, cache).node == "b"


# the cache


def test_assumed_pod_counts_until_the_binding_is_seen() -> None:
    cache = cache_of(node("a", cpu="1"))
    p = pod("p", cpu="800m")
    cache.assume(p, "a")
    assert cache.is_assumed("default/p")
    # a slow watch still shows the pod unbound: the assumption stays
    cache.observe_pod(p)
    second = s.schedule(pod("q", cpu="800m"), cache)
    assert second.node is None
    assert second.message == "0/1 nodes are available: 1 Insufficient cpu."
    bound = pod("p", cpu="800m", node_name="a")
    cache.observe_pod(bound)
    assert not cache.is_assumed("default/p")
    assert cache.totals("a")[0] == {"cpu": 800}
    cache.remove_pod("default/p")
    assert cache.totals("a") == ({}, {}, 0)


def test_forget_releases_the_room() -> None:
    cache = cache_of(node("a", cpu="1"))
    p = pod("p", cpu="800m")
    cache.assume(p, "a")
    cache.forget(p)
    assert s.schedule(pod("q", cpu="800m"), cache).node == "a"


def test_pods_on_an_unknown_node_count_when_it_appears() -> None:
    cache = cache_of(pod("x", cpu="900m", node_name="late", phase="Running"))
    cache.set_node(node("late", cpu="1"))
    assert s.schedule(pod("p", cpu="200m"), cache).node is None
    cache.remove_node("late")
    cache.set_node(node("late", cpu="1"))
    assert cache.totals("late")[0] == {"cpu": 900}


ops = st.lists(st.tuples(
    st.sampled_from(["observe", "assume", "forget", "remove", "node+", "node-"]),
    st.integers(0, 5), st.sampled_from(["", "n0", "n1", "n2"]),
    st.sampled_from(["Pending", "Running", "Succeeded"])), max_size=40)
#: a pod's requests are immutable: pod i always asks for the same
CPU = [None, "100m", "1", "2500m", "1", "250m"]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(ops)
def test_totals_always_equal_the_sum_over_counted_pods(steps: list[Any]) -> None:
    cache = s.SchedulingCache()
    pods: dict[str, Obj] = {}
    for op, i, node_name, phase in steps:
        p = pod(f"p{i}", cpu=CPU[i], node_name=node_name if op == "observe" else "",
                phase=phase)
        key = f"default/p{i}"
        if op == "observe":
            cache.observe_pod(p)
            pods[key] = p
        elif op == "assume" and node_name:
            cache.assume(p, node_name)
            pods[key] = p
        elif op == "forget":
            cache.forget(p)
        elif op == "remove":
            cache.remove_pod(key)
            pods.pop(key, None)
        elif op == "node+" and node_name:
            cache.set_node(node(node_name))
        elif op == "node-" and node_name:
            cache.remove_node(node_name)
    expected: dict[str, tuple[dict[str, int], int]] = {}
    for key, node_name, _assumed in cache.counted():
        cpu_total, count = expected.get(node_name, ({}, 0))
        r.add(cpu_total, r.pod_requests(pods[key]))
        expected[node_name] = (cpu_total, count + 1)
    for name in {"n0", "n1", "n2"}:
        requested, _, count = cache.totals(name)
        want, want_count = expected.get(name, ({}, 0))
        assert (requested, count) == (want, want_count)
