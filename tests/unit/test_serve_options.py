"""``setpoint serve`` options: storage kinds, etcd endpoints and prefix, leader election, where
the controllers run, the shutdown bound."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import pytest

from setpoint.cli.main import _parser, leader_election, plane_config, serve_config
from setpoint.pki import certs


def parse(tmp_path: Path, *args: str) -> argparse.Namespace:
    return _parser().parse_args(["serve", "--data-dir", str(tmp_path), *args])


def test_etcd_storage_takes_endpoints_and_prefix(tmp_path: Path) -> None:
    args = parse(tmp_path, "--storage", "etcd", "--etcd-endpoints",
                 "http://127.0.0.1:2379, http://127.0.0.2:2379", "--etcd-prefix", "/clusters/a")
    config = serve_config(args)
    assert config.storage.kind == "etcd"
    assert config.storage.endpoints == ("http://127.0.0.1:2379", "http://127.0.0.2:2379")
    assert config.storage.prefix == "/clusters/a"
    assert config.compaction_interval == 300.0
    assert leader_election(args) is True


def test_etcd_tls_files_reach_the_storage_config_as_absolute_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = certs.new_ca("etcd-ca", now=now)
    client = certs.issue(ca, common_name="setpoint", usage="client", now=now)
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem)
    (tmp_path / "client.crt").write_bytes(client.cert_pem)
    (tmp_path / "client.key").write_bytes(client.key_pem)
    monkeypatch.chdir(tmp_path)
    args = parse(tmp_path, "--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379",
                 "--etcd-cafile", "ca.crt", "--etcd-certfile", "client.crt",
                 "--etcd-keyfile", "client.key")
    storage = serve_config(args).storage
    assert storage.endpoints == ("https://127.0.0.1:2379",)
    assert (storage.ca_file, storage.cert_file, storage.key_file) == (
        tmp_path / "ca.crt", tmp_path / "client.crt", tmp_path / "client.key")
    # a CA alone (etcd without --client-cert-auth), or nothing (gRPC's default roots)
    args = parse(tmp_path, "--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379",
                 "--etcd-cafile", "ca.crt")
    assert serve_config(args).storage.cert_file is None
    (tmp_path / "client.key").unlink()
    args = parse(tmp_path, "--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:2379",
                 "--etcd-certfile", "client.crt", "--etcd-keyfile", "client.key")
    with pytest.raises(ValueError, match=r"etcd client key .*client.key: No such file"):
        serve_config(args)


def test_leader_election_is_off_by_default_elsewhere_and_can_be_forced(tmp_path: Path) -> None:
    assert leader_election(parse(tmp_path)) is False
    assert leader_election(parse(tmp_path, "--leader-elect")) is True
    args = parse(tmp_path, "--storage", "etcd", "--etcd-endpoints", "http://127.0.0.1:2379",
                 "--no-leader-elect")
    assert leader_election(args) is False


def test_compaction_interval_zero_turns_it_off(tmp_path: Path) -> None:
    config = serve_config(parse(tmp_path, "--compaction-interval", "0"))
    assert config.compaction_interval is None


@pytest.mark.parametrize(("args", "message"), [
    (("--storage", "etcd"), "needs --etcd-endpoints"),
    (("--etcd-endpoints", "http://127.0.0.1:2379"), "need --storage etcd"),
    (("--storage", "etcd", "--etcd-endpoints", "http://a:1,http://b:2"), "IP addresses"),
    (("--storage", "etcd", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix",
      "/registry"), "registry/registry"),
    (("--compaction-interval", "-1"), "must not be negative"),
    (("--etcd-cafile", "ca.crt"), "need --storage etcd"),
    (("--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:1", "--etcd-certfile",
      "client.crt"), "--etcd-certfile and --etcd-keyfile go together"),
    (("--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:1,http://127.0.0.2:1"),
     "all https:// or all http://"),
    (("--storage", "etcd", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-cafile",
      "ca.crt"), "endpoints are http://"),
    (("--storage", "etcd", "--etcd-endpoints", "https://127.0.0.1:1", "--etcd-cafile",
      "/nonexistent/ca.crt"), "etcd CA file /nonexistent/ca.crt: No such file"),
    (("--service-cluster-ip-range", "10.0.0.0/8"), "too large: the mask must be at least /12"),
    (("--service-cluster-ip-range", "10.0.0.0/30"), "too small"),
    (("--service-cluster-ip-range", "ten"), "invalid service cluster IP range"),
    (("--service-node-port-range", "32767-30000"), "invalid node port range"),
    (("--service-node-port-range", "a-b"), "expected LOW-HIGH"),
])
def test_options_that_do_not_fit_together_are_refused(tmp_path: Path, args: tuple[str, ...],
                                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        serve_config(parse(tmp_path, *args))


def test_service_ranges(tmp_path: Path) -> None:
    config = serve_config(parse(tmp_path))
    assert config.service_network.first_ip == "10.96.0.1"
    assert config.service_network.node_port_range == (30000, 32767)
    assert config.advertise_address is None
    config = serve_config(parse(tmp_path, "--service-cluster-ip-range", "172.20.0.0/16",
                                "--service-node-port-range", "31000-31100",
                                "--advertise-address", "192.0.2.7"))
    assert config.service_network.first_ip == "172.20.0.1"
    assert config.service_network.node_port_range == (31000, 31100)
    assert config.advertise_address == "192.0.2.7"


def test_memory_bounds_have_bounded_defaults_and_take_quantities(tmp_path: Path) -> None:
    config = serve_config(parse(tmp_path))
    assert config.watch_cache_capacity == 20_000
    assert config.watch_cache_bytes == 256 * 1024 * 1024
    assert config.list_budget_bytes == 128 * 1024 * 1024
    config = serve_config(parse(tmp_path, "--watch-cache-events", "500", "--watch-cache-bytes",
                                "64Mi", "--list-budget-bytes", "1G"))
    assert config.watch_cache_capacity == 500
    assert config.watch_cache_bytes == 64 * 1024 * 1024
    assert config.list_budget_bytes == 1000**3
    assert serve_config(parse(tmp_path, "--list-budget-bytes", "4096")).list_budget_bytes == 4096


@pytest.mark.parametrize("size", ["0", "-5", "12MB", "Mi", "1.5Gi", ""])
def test_sizes_that_are_not_positive_quantities_are_refused(tmp_path: Path, size: str,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(tmp_path, "--watch-cache-bytes", size)
    assert exited.value.code == 2
    assert "argument --watch-cache-bytes" in capsys.readouterr().err


def test_watch_cache_events_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--watch-cache-events must be positive"):
        serve_config(parse(tmp_path, "--watch-cache-events", "0"))


def test_the_controllers_run_in_a_child_process_by_default(tmp_path: Path) -> None:
    config = plane_config(parse(tmp_path))
    assert config.controllers_mode == "process"
    assert config.server.kubeconfig_path == tmp_path.resolve() / "kubeconfig"
    assert plane_config(parse(tmp_path, "--controllers-mode", "inline")).controllers_mode \
        == "inline"
    assert plane_config(parse(tmp_path, "--log-level", "debug")).log_level == "DEBUG"
    with pytest.raises(SystemExit):
        parse(tmp_path, "--controllers-mode", "thread")


def test_the_shutdown_timeout_must_be_positive(tmp_path: Path) -> None:
    assert _parser().parse_args(["serve"]).shutdown_timeout == 30.0
    with pytest.raises(ValueError, match="--shutdown-timeout must be positive"):
        plane_config(parse(tmp_path, "--shutdown-timeout", "0"))


def test_cluster_signing_duration_bounds_the_signer(tmp_path: Path) -> None:
    config = plane_config(parse(tmp_path, "--cluster-signing-duration", "3600"))
    assert config.controller_settings.signing.max_duration == dt.timedelta(hours=1)
    default = plane_config(parse(tmp_path))
    assert default.controller_settings.signing.max_duration == dt.timedelta(days=365)
    for bad in ("599", "nan", "inf"):
        with pytest.raises(ValueError, match="--cluster-signing-duration"):
            plane_config(parse(tmp_path, "--cluster-signing-duration", bad))
