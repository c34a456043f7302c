"""Services, Endpoints and EndpointSlices through the API: defaults, cluster IP and node port
allocation (also under concurrency and across a restart), validation, tables, and the
``kubernetes`` Service the server keeps."""

from __future__ import annotations

import asyncio
import ipaddress
from pathlib import Path
from typing import Any

import aiohttp

from setpoint.registry.serviceips import ServiceNetworkConfig
from setpoint.server.server import Server, ServerConfig
from setpoint.storage import StorageConfig
from tests.integration.api.helpers import request

SERVICES = "/api/v1/namespaces/default/services"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
SMP = "application/strategic-merge-patch+json"
RANGE = ipaddress.ip_network("10.96.0.0/12")


def service(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                            "spec": {"selector": {"app": name},
                                     "ports": [{"port": 80, "targetPort": 8080}]}}
    body["spec"].update(spec)
    return body


async def test_the_kubernetes_service_is_there(server: Server,
                                               http: aiohttp.ClientSession) -> None:
    status, svc, _ = await request(http, "GET", f"{SERVICES}/kubernetes")
    assert status == 200, svc
    assert svc["spec"]["clusterIP"] == "10.96.0.1"
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP",
                                     "targetPort": server.port}]
    _, endpoints, _ = await request(http, "GET", f"{ENDPOINTS}/kubernetes")
    assert endpoints["subsets"] == [{"addresses": [{"ip": "127.0.0.1"}],
                                     "ports": [{"name": "https", "port": server.port,
                                                "protocol": "TCP"}]}]
    _, slices, _ = await request(http, "GET", f"{SLICES}/kubernetes")
    assert slices["endpoints"][0]["addresses"] == ["127.0.0.1"]
    _, table, _ = await request(http, "GET", f"{SERVICES}/kubernetes", headers=TABLE)
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
    assert table["rows"][0]["cells"][:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>",
                                             "443/TCP"]


async def test_cluster_ips_and_node_ports_are_allocated(http: aiohttp.ClientSession) -> None:
    status, web, _ = await request(http, "POST", SERVICES, service("web"))
    assert status == 201, web
    spec = web["spec"]
    assert ipaddress.ip_address(spec["clusterIP"]) in RANGE
    assert spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["type"] == "ClusterIP"
    assert spec["sessionAffinity"] == "None"
    assert spec["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert spec["ipFamilies"] == ["IPv4"]
    status, node, _ = await request(http, "POST", SERVICES, service(
        "np", type="NodePort", ports=[{"name": "a", "port": 80}, {"name": "b", "port": 81,
                                                                   "nodePort": 30081}]))
    assert status == 201, node
    a, b = node["spec"]["ports"]
    assert 30000 <= a["nodePort"] <= 32767
    assert a["targetPort"] == 80
    assert b["nodePort"] == 30081
    assert node["spec"]["externalTrafficPolicy"] == "Cluster"
    status, body, _ = await request(http, "POST", SERVICES, service(
        "np2", type="NodePort", ports=[{"port": 80, "nodePort": 30081}]))
    assert status == 422, body
    assert body["details"]["causes"][0]["message"] == \
        "Invalid value: 30081: provided port is already allocated"
    status, body, _ = await request(http, "POST", SERVICES, service(
        "same-ip", clusterIP=spec["clusterIP"]))
    assert status == 422, body
    assert "provided IP is already allocated" in body["message"]
    status, body, _ = await request(http, "POST", SERVICES, service(
        "outside", clusterIP="192.168.0.1"))
    assert status == 422, body
    assert "The range of valid IPs is 10.96.0.0/12" in body["message"]
    # headless and ExternalName Services hold no address
    status, headless, _ = await request(http, "POST", SERVICES, service("hl", clusterIP="None"))
    assert status == 201, headless
    assert headless["spec"]["clusterIPs"] == ["None"]
    status, ext, _ = await request(http, "POST", SERVICES, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
        "spec": {"type": "ExternalName", "externalName": "example.com"}})
    assert status == 201, ext
    assert "clusterIP" not in ext["spec"]
    # the address is released with its Service and may then be asked for by name
    status, _, _ = await request(http, "DELETE", f"{SERVICES}/web")
    assert status == 200
    status, again, _ = await request(http, "POST", SERVICES, service(
        "again", clusterIPs=[spec["clusterIP"]]))
    assert status == 201, again
    assert again["spec"]["clusterIP"] == spec["clusterIP"]
    # node ports go when the type no longer has them, and may be reused
    status, changed, _ = await request(http, "PATCH", f"{SERVICES}/np",
                                       {"spec": {"type": "ClusterIP"}}, content_type=SMP)
    assert status == 200, changed
    assert all("nodePort" not in p for p in changed["spec"]["ports"])
    status, reused, _ = await request(http, "POST", SERVICES, service(
        "np3", type="NodePort", ports=[{"port": 80, "nodePort": 30081}]))
    assert status == 201, reused


async def test_the_cluster_ip_is_immutable_and_kept(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", SERVICES, service("imm"))
    assert status == 201
    ip = created["spec"]["clusterIP"]
    replaced = {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "imm", "resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"ports": [{"port": 81}], "selector": {"app": "x"}}}
    status, body, _ = await request(http, "PUT", f"{SERVICES}/imm", replaced)
    assert status == 200, body
    assert body["spec"]["clusterIP"] == ip  # a PUT without it keeps the allocated one
    status, body, _ = await request(http, "PATCH", f"{SERVICES}/imm",
                                    {"spec": {"clusterIP": "10.96.0.77",
                                              "clusterIPs": ["10.96.0.77"]}}, content_type=SMP)
    assert status == 422, body
    assert body["details"]["causes"][0] == {"reason": "FieldValueInvalid",
                                            "message": 'Invalid value: "10.96.0.77": may not '
                                                       "change once set",
                                            "field": "spec.clusterIPs[0]"}


async def test_invalid_services(http: aiohttp.ClientSession) -> None:
    bad = service("bad", type="Weird")
    status, body, _ = await request(http, "POST", SERVICES, bad)
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.type"
    status, body, _ = await request(http, "POST", SERVICES, service(
        "bad", ports=[{"port": 0}, {"port": 80, "protocol": "HTTP", "nodePort": 30000}]))
    assert status == 422, body
    causes = {(c["field"], c["reason"]) for c in body["details"]["causes"]}
    assert causes >= {("spec.ports[0].name", "FieldValueRequired"),
                      ("spec.ports[0].port", "FieldValueInvalid"),
                      ("spec.ports[1].protocol", "FieldValueNotSupported"),
                      ("spec.ports[1].nodePort", "FieldValueForbidden")}
    status, body, _ = await request(http, "POST", SERVICES, service("noports", ports=[]))
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.ports"
    status, body, _ = await request(http, "POST", SERVICES, service("1abc"))
    assert status == 422
    assert "DNS-1035 label" in body["message"]


async def test_concurrent_creates_get_distinct_addresses(tmp_path: Path) -> None:
    # a /28 has 14 addresses: 20 Services racing for them get 13 distinct ones (the first
    # is the kubernetes Service's) and the rest a 422, never a duplicate
    network = ServiceNetworkConfig(cluster_ip_range="10.0.0.0/28", node_port_range=(
        30000, 30009))
    config = ServerConfig(port=0, storage=StorageConfig(kind="sqlite",
                                                        path=tmp_path / "db.sqlite"),
                          service_network=network)
    async with Server(config) as s, aiohttp.ClientSession(base_url=s.url) as http:
        results = await asyncio.gather(*(request(http, "POST", SERVICES, service(
            f"s{i}", type="NodePort")) for i in range(20)))
        made = [body for status, body, _ in results if status == 201]
        refused = [body for status, body, _ in results if status != 201]
        ips = [b["spec"]["clusterIP"] for b in made]
        ports = [b["spec"]["ports"][0]["nodePort"] for b in made]
        assert len(set(ips)) == len(ips)
        assert len(set(ports)) == len(ports) == 10  # the node ports run out first
        assert all(r["code"] == 422 and "range is full" in r["message"] for r in refused)
    # after a restart the same addresses are taken: asking for one is refused
    async with Server(config) as s, aiohttp.ClientSession(base_url=s.url) as http:
        status, body, _ = await request(http, "POST", SERVICES, service(
            "late", clusterIP=ips[0]))
        assert status == 422, body
        assert "already allocated" in body["message"]
        status, _, _ = await request(http, "DELETE", f"{SERVICES}/{made[0]['metadata']['name']}")
        assert status == 200
        status, body, _ = await request(http, "POST", SERVICES, service(
            "late", clusterIP=ips[0]))
        assert status == 201, body


async def test_endpoints_and_slices(http: aiohttp.ClientSession) -> None:
    status, created, _ = await request(http, "POST", ENDPOINTS, {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}],
                     "ports": [{"port": 8080}]}]})
    assert status == 201, created
    assert created["subsets"][0]["ports"][0]["protocol"] == "TCP"
    _, table, _ = await request(http, "GET", f"{ENDPOINTS}/web", headers=TABLE)
    assert table["rows"][0]["cells"][1] == "10.1.0.1:8080,10.1.0.2:8080"
    status, body, _ = await request(http, "POST", ENDPOINTS, {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "bad"},
        "subsets": [{"addresses": [{"ip": "nope"}], "ports": [{"port": 8080}]}]})
    assert status == 422, body
    slice_body = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                  "metadata": {"name": "web-abc",
                               "labels": {"kubernetes.io/service-name": "web"}},
                  "addressType": "IPv4",
                  "endpoints": [{"addresses": [f"10.1.0.{i}"],
                                 "conditions": {"ready": True}} for i in range(1, 6)],
                  "ports": [{"name": "http", "port": 8080}]}
    status, made, _ = await request(http, "POST", SLICES, slice_body)
    assert status == 201, made
    _, table, _ = await request(http, "GET", f"{SLICES}/web-abc", headers=TABLE)
    assert table["rows"][0]["cells"][1:4] == ["IPv4", "8080",
                                              "10.1.0.1,10.1.0.2,10.1.0.3 + 2 more..."]
    status, body, _ = await request(http, "PATCH", f"{SLICES}/web-abc",
                                    {"addressType": "IPv6"},
                                    content_type="application/merge-patch+json")
    assert status == 422, body
    slice_body["metadata"]["name"] = "bad"
    slice_body["endpoints"] = [{"addresses": ["fe80::1"]}]
    status, body, _ = await request(http, "POST", SLICES, slice_body)
    assert status == 422, body
    assert body["details"]["causes"][0]["field"] == "endpoints[0].addresses[0]"
