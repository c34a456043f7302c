"""Service environment variables: names and rules of the kubelet's ``FromServices``."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from setpoint.agent import servicelinks as sl


def svc(ns: str, name: str, ip: str = "10.96.0.10", ports: list[dict[str, Any]] | None = None,
        ) -> dict[str, Any]:
    return {"metadata": {"namespace": ns, "name": name},
            "spec": {"clusterIP": ip,
                     "ports": ports if ports is not None else [{"port": 80, "protocol": "TCP"}]}}


def test_one_service_all_names() -> None:
    s = svc("ns", "my-svc", "10.96.0.7", [
        {"name": "http", "port": 80, "protocol": "TCP"},
        {"name": "dns-udp", "port": 53, "protocol": "UDP"}])
    assert sl.service_vars(s) == [
        ("MY_SVC_SERVICE_HOST", "10.96.0.7"),
        ("MY_SVC_SERVICE_PORT", "80"),
        ("MY_SVC_SERVICE_PORT_HTTP", "80"),
        ("MY_SVC_SERVICE_PORT_DNS_UDP", "53"),
        ("MY_SVC_PORT", "tcp://10.96.0.7:80"),
        ("MY_SVC_PORT_80_TCP", "tcp://10.96.0.7:80"),
        ("MY_SVC_PORT_80_TCP_PROTO", "tcp"),
        ("MY_SVC_PORT_80_TCP_PORT", "80"),
        ("MY_SVC_PORT_80_TCP_ADDR", "10.96.0.7"),
        ("MY_SVC_PORT_53_UDP", "udp://10.96.0.7:53"),
        ("MY_SVC_PORT_53_UDP_PROTO", "udp"),
        ("MY_SVC_PORT_53_UDP_PORT", "53"),
        ("MY_SVC_PORT_53_UDP_ADDR", "10.96.0.7"),
    ]


def test_protocol_defaults_to_tcp_and_ipv6_is_bracketed() -> None:
    env = dict(sl.service_vars(svc("ns", "a", "fd00::5", [{"port": 8080}])))
    assert env["A_PORT"] == "tcp://[fd00::5]:8080"
    assert env["A_PORT_8080_TCP_ADDR"] == "fd00::5"


def test_headless_external_and_unallocated_give_nothing() -> None:
    services = [svc("ns", "headless", "None"), svc("ns", "pending", ""),
                {"metadata": {"namespace": "ns", "name": "ext"},
                 "spec": {"type": "ExternalName", "externalName": "example.com"}}]
    assert sl.service_env(services, "ns") == {}


def test_namespace_filter_and_master_service() -> None:
    services = [svc("default", "kubernetes", "10.96.0.1", [{"name": "https", "port": 443}]),
                svc("default", "other", "10.96.0.2"),
                svc("ns", "mine", "10.96.0.3"),
                svc("elsewhere", "theirs", "10.96.0.4")]
    env = sl.service_env(services, "ns")
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert env["KUBERNETES_SERVICE_PORT_HTTPS"] == "443"
    assert env["MINE_SERVICE_HOST"] == "10.96.0.3"
    assert not any(k.startswith(("OTHER_", "THEIRS_")) for k in env)
    # enableServiceLinks: false keeps only the kubernetes Service
    off = sl.service_env(services, "ns", enable_links=False)
    assert {k for k in off if not k.startswith("KUBERNETES_")} == set()
    assert off["KUBERNETES_PORT"] == "tcp://10.96.0.1:443"
    # a pod in default sees default's Services
    assert sl.service_env(services, "default")["OTHER_SERVICE_HOST"] == "10.96.0.2"


def test_a_kubernetes_service_of_the_pods_namespace_wins_with_links() -> None:
    services = [svc("default", "kubernetes", "10.96.0.1"), svc("ns", "kubernetes", "10.96.0.9")]
    assert sl.service_env(services, "ns")["KUBERNETES_SERVICE_HOST"] == "10.96.0.9"
    assert sl.service_env(services, "ns", False)["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


def test_bounded_by_max_services() -> None:
    services = [svc("ns", f"s{i:03d}", f"10.96.1.{i}") for i in range(20)]
    env = sl.service_env(services, "ns", max_services=5)
    assert {k for k in env if k.endswith("_SERVICE_HOST")} == {
        f"S{i:03d}_SERVICE_HOST" for i in range(5)}


@given(st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
       st.lists(st.integers(1, 65535), min_size=1, max_size=4, unique=True))
def test_every_port_has_its_link_variables(name: str, ports: list[int]) -> None:
    env = dict(sl.service_vars(svc("ns", name, "10.0.0.1", [{"port": p} for p in ports])))
    prefix = name.replace("-", "_").upper()
    assert env[f"{prefix}_SERVICE_PORT"] == str(ports[0])
    for p in ports:
        assert env[f"{prefix}_PORT_{p}_TCP_PORT"] == str(p)
    assert all(k.isupper() or not k.isalpha() for k in env)
    assert all("-" not in k for k in env)
