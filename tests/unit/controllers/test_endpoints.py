"""Endpoints and EndpointSlices computed from a Service and its pods, without a server."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.controllers import endpoints as ep

Obj = dict[str, Any]


def service(name: str = "web", *, selector: dict[str, str] | None = None,
            ports: list[Obj] | None = None, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "uid": "svc-uid",
                         "labels": {"team": "a"}},
            "spec": {"selector": {"app": "web"} if selector is None else selector,
                     "ports": [{"name": "http", "port": 80, "targetPort": "http",
                                "protocol": "TCP"}] if ports is None else ports, **spec}}


def pod(name: str, ip: str | None, *, ready: bool = True, labels: dict[str, str] | None = None,
        port: int = 8080, port_name: str = "http", phase: str = "Running",
        node: str = "n1", deleting: bool = False, namespace: str = "default",
        **spec: Any) -> Obj:
    status: Obj = {"phase": phase,
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    meta: Obj = {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                 "labels": {"app": "web"} if labels is None else labels}
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node, "containers": [
        {"name": "c", "ports": [{"name": port_name, "containerPort": port}]}], **spec},
        "status": status}


def test_endpoints_ready_and_not_ready_addresses() -> None:
    pods = [pod("b", "10.0.0.2", ready=False), pod("a", "10.0.0.10"),
            pod("c", "10.0.0.3"), pod("other", "10.0.0.4", labels={"app": "db"}),
            pod("noip", None), pod("done", "10.0.0.5", phase="Succeeded"),
            pod("gone", "10.0.0.6", deleting=True),
            pod("elsewhere", "10.0.0.7", namespace="other")]
    body = ep.endpoints_for(service(), pods)
    assert body["metadata"] == {"name": "web", "namespace": "default",
                                "labels": {"team": "a"}}
    assert body["subsets"] == [{
        "addresses": [
            {"ip": "10.0.0.3", "nodeName": "n1", "targetRef": {
                "kind": "Pod", "namespace": "default", "name": "c", "uid": "uid-c"}},
            {"ip": "10.0.0.10", "nodeName": "n1", "targetRef": {
                "kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"}}],
        "notReadyAddresses": [
            {"ip": "10.0.0.2", "nodeName": "n1", "targetRef": {
                "kind": "Pod", "namespace": "default", "name": "b", "uid": "uid-b"}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]


def test_ports_by_name_and_number_group_subsets() -> None:
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "http"},
                         {"name": "metrics", "port": 9000, "targetPort": 9100}])
    pods = [pod("a", "10.0.0.1", port=8080), pod("b", "10.0.0.2", port=8081),
            pod("c", "10.0.0.3", port_name="web")]  # c has no port named http
    subsets = ep.endpoints_for(svc, pods)["subsets"]
    by_ports = {tuple((p.get("name"), p["port"]) for p in s["ports"]):
                [a["ip"] for a in s["addresses"]] for s in subsets}
    assert by_ports == {
        (("http", 8080), ("metrics", 9100)): ["10.0.0.1"],
        (("http", 8081), ("metrics", 9100)): ["10.0.0.2"],
        (("metrics", 9100),): ["10.0.0.3"]}


def test_named_port_must_match_protocol() -> None:
    svc = service(ports=[{"port": 53, "targetPort": "dns", "protocol": "UDP"}])
    p = pod("a", "10.0.0.1", port_name="dns")  # the container port is TCP
    assert ep.endpoints_for(svc, [p])["subsets"] == []


def test_hostname_when_subdomain_is_the_service() -> None:
    pods = [pod("a", "10.0.0.1", hostname="alpha", subdomain="web"),
            pod("b", "10.0.0.2", hostname="beta", subdomain="other")]
    addresses = ep.endpoints_for(service(), pods)["subsets"][0]["addresses"]
    assert [a.get("hostname") for a in addresses] == ["alpha", None]


def test_publish_not_ready_and_headless_without_ports() -> None:
    svc = service(ports=[], clusterIP="None", publishNotReadyAddresses=True)
    body = ep.endpoints_for(svc, [pod("a", "10.0.0.1", ready=False)])
    assert body["metadata"]["labels"] == {"team": "a", "service.kubernetes.io/headless": ""}
    assert body["subsets"] == [{"addresses": [
        {"ip": "10.0.0.1", "nodeName": "n1", "targetRef": {
            "kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"}}]}]


def test_no_selector_is_not_managed() -> None:
    assert ep.selector(service(selector={})) is None
    assert ep.selected_pods(service(selector={}), [pod("a", "10.0.0.1")]) == []


def test_endpoints_truncated_at_capacity() -> None:
    pods = [pod(f"p{i}", f"10.1.{i // 250}.{i % 250}", ready=i % 2 == 0)
            for i in range(ep.MAX_ENDPOINTS_ADDRESSES + 5)]
    body = ep.endpoints_for(service(), pods)
    subset = body["subsets"][0]
    assert len(subset["addresses"]) + len(subset.get("notReadyAddresses", [])) == \
        ep.MAX_ENDPOINTS_ADDRESSES
    assert len(subset["addresses"]) == 503  # every ready one is kept
    assert body["metadata"]["annotations"] == {ep.OVER_CAPACITY: "truncated"}


# slices


def apply(plan: ep.SlicePlan, existing: list[Obj], names: itertools.count[int]) -> list[Obj]:
    """What the server would hold after the plan's writes."""
    by_name = {o["metadata"]["name"]: o for o in existing}
    for name in plan.delete:
        del by_name[name]
    for obj in plan.update:
        by_name[obj["metadata"]["name"]] = obj
    for obj in plan.create:
        name = f"{obj['metadata']['generateName']}{next(names):05d}"
        by_name[name] = {**obj, "metadata": {**obj["metadata"], "name": name}}
    return list(by_name.values())


def test_slice_shape() -> None:
    plan = ep.plan_slices(service(), [pod("a", "10.0.0.1", hostname="h", subdomain="web"),
                                      pod("b", "10.0.0.2", deleting=True, ready=True)], [])
    assert not plan.update
    assert not plan.delete
    [created] = plan.create
    assert created["metadata"] == {
        "generateName": "web-", "namespace": "default",
        "labels": {"team": "a", "kubernetes.io/service-name": "web",
                   "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "web",
                             "uid": "svc-uid", "controller": True,
                             "blockOwnerDeletion": True}]}
    assert created["addressType"] == "IPv4"
    assert created["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert created["endpoints"] == [
        {"addresses": ["10.0.0.1"],
         "conditions": {"ready": True, "serving": True, "terminating": False},
         "hostname": "h", "nodeName": "n1",
         "targetRef": {"kind": "Pod", "namespace": "default", "name": "a", "uid": "uid-a"}},
        {"addresses": ["10.0.0.2"],
         "conditions": {"ready": False, "serving": True, "terminating": True},
         "nodeName": "n1",
         "targetRef": {"kind": "Pod", "namespace": "default", "name": "b", "uid": "uid-b"}}]


def test_placeholder_slice_for_a_service_without_pods() -> None:
    names = itertools.count()
    plan = ep.plan_slices(service(), [], [])
    assert [c["endpoints"] for c in plan.create] == [[]]
    held = apply(plan, [], names)
    assert ep.plan_slices(service(), [], held).empty
    # pods arrive: the placeholder goes, a slice with the ports comes
    plan = ep.plan_slices(service(), [pod("a", "10.0.0.1")], held)
    held = apply(plan, held, names)
    assert [len(s["endpoints"]) for s in held] == [1]


def test_ipv6_pods_get_their_own_slice() -> None:
    plan = ep.plan_slices(service(), [pod("a", "10.0.0.1"), pod("b", "fd00::1")], [])
    assert sorted(c["addressType"] for c in plan.create) == ["IPv4", "IPv6"]


def test_slices_hold_at_most_max_and_endpoints_stay_put() -> None:
    names = itertools.count()
    pods = [pod(f"p{i}", f"10.0.{i // 200}.{i % 200}") for i in range(250)]
    held = apply(ep.plan_slices(service(), pods, []), [], names)
    assert sorted(len(s["endpoints"]) for s in held) == [50, 100, 100]
    where = {e["targetRef"]["name"]: s["metadata"]["name"] for s in held
             for e in s["endpoints"]}
    # one pod goes, one comes: only the slices concerned change
    pods = [p for p in pods if p["metadata"]["name"] != "p7"] + [pod("new", "10.9.9.9")]
    plan = ep.plan_slices(service(), pods, held)
    assert not plan.create
    assert not plan.delete
    held = apply(plan, held, names)
    moved = {e["targetRef"]["name"]: s["metadata"]["name"] for s in held
             for e in s["endpoints"]}
    assert all(moved[n] == where[n] for n in moved if n != "new")
    assert "p7" not in moved
    assert moved["new"] == where["p7"]


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[Obj], list[list[Obj]]]:
    def some_pods() -> list[Obj]:
        picked = draw(st.lists(st.integers(0, 30), max_size=30, unique=True))
        return [pod(f"p{i}", f"10.0.0.{i}" if i % 7 else f"fd00::{i}",
                    ready=draw(st.booleans()), port=8080 + i % 2,
                    port_name="http" if i % 5 else "nope",
                    deleting=i % 11 == 0) for i in picked]
    return some_pods(), [some_pods() for _ in range(draw(st.integers(1, 3)))]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=60)
@given(scenario(), st.integers(1, 7))
def test_slices_converge(case: tuple[list[Obj], list[list[Obj]]], per_slice: int) -> None:
    """Whatever the pods were and become: every endpoint is in exactly one slice, no slice
    is over the limit, each slice has one port list and address type, and planning again
    changes nothing."""
    first, later = case
    names = itertools.count()
    svc = service()
    held = apply(ep.plan_slices(svc, first, [], max_per_slice=per_slice), [], names)
    for pods in later:
        held = apply(ep.plan_slices(svc, pods, held, max_per_slice=per_slice), held, names)
        assert ep.plan_slices(svc, pods, held, max_per_slice=per_slice).empty
        seen = [e["targetRef"]["name"] for s in held for e in s["endpoints"]]
        expected = [p["metadata"]["name"] for p in ep.selected_pods(svc, pods)
                    if ep.pod_ports(svc, p)]
        assert sorted(seen) == sorted(expected)
        assert all(len(s["endpoints"]) <= per_slice for s in held)
        for s in held:
            for e in s["endpoints"]:
                assert ep.address_type(e["addresses"][0]) == s["addressType"]
        if not expected:
            assert len(held) == 1


def test_max_per_slice_is_bounded() -> None:
    with pytest.raises(ValueError, match="max_per_slice"):
        ep.plan_slices(service(), [], [], max_per_slice=0)
